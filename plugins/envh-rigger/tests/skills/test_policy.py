"""``skills:POLICY``: the real openai policy, the real runner on Toy24, a real bank; the
model is envh's replay server, and we read the system prompt it was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import envh_rigger.hooks
import pytest
from envh import TaskRef, errors, make_plugin_manager, spec_id
from envh.plugins.manager import get_registry, set_registry
from envh.rollout.runner import run_episode
from envh.rollout.trajectory import EpisodeRequest
from envh.testing_llm import tool_reply
from envh_rigger.skills import MemoryItem, SkillBank


@pytest.fixture
def registry_with_skills() -> Any:
    previous = get_registry()
    reg = make_plugin_manager(entry_points=False, plugins=[envh_rigger.hooks])
    set_registry(reg)  # the wrapper resolves its inner policy through the process registry
    yield reg
    set_registry(previous)


@pytest.fixture
def bank_dir(tmp_path: Path, embedder: Any) -> Path:
    bank = SkillBank(embedder_name=embedder.name)
    bank.add([
        MemoryItem(title="Multiply the larger numbers first", when_to_use="When numbers must reach 24",
                   content="Products get close to 24 quickly; sums rarely do."),
        MemoryItem(title="Open a container before taking from it", when_to_use="When an object is in a cabinet",
                   content="Taking from a closed cabinet fails."),
    ], embedder)
    return bank.save(tmp_path / "bank")


def test_skills_reach_the_system_prompt(registry_with_skills: Any, bank_dir: Path, replay: Any) -> None:
    replay.add(tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}),
               tool_reply("combine", {"i": 0, "j": 1, "op": "mul"}), tool_reply("stop", {}))
    spec = {"bridge": "toy24", "config": {}, "layers": []}
    req = EpisodeRequest(key="k", spec=spec, spec_id=spec_id(spec), seed=0, max_steps=5,
                         task=TaskRef(suite="toy24", split="easy", instance_id="2,3,4"),
                         policy="skills:openai:replay-model",
                         policy_options={"bank": str(bank_dir), "k": 1, "base_url": replay.base_url})
    from envh.rollout.warm import Warm

    traj = run_episode(req, Warm(registry_with_skills))
    assert traj.error is None and traj.success
    digest = SkillBank.load(bank_dir).digest[:12]
    assert traj.policy_id.startswith(f"skills[{digest},k=1]+openai")
    systems = {b["messages"][0]["content"] for b in replay.chat_requests}
    assert len(systems) == 1  # retrieved once per episode: every step sees the same block
    (system,) = systems
    assert "Skills from earlier episodes:\n1. Multiply the larger numbers first" in system
    assert "Open a container" not in system  # k=1, and the arithmetic lesson is the relevant one


def test_wrapper_needs_a_bank_and_a_chat_policy(registry_with_skills: Any, bank_dir: Path) -> None:
    from envh_rigger.skills import SkilledPolicy

    with pytest.raises(errors.PolicyError, match="bank=DIR"):
        SkilledPolicy("openai:m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(errors.PolicyError, match="skills:POLICY"):
        SkilledPolicy(None, bank=str(bank_dir))
