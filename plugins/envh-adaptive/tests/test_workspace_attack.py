"""Attacks on the workspace kind: LFU counts that must survive the episode that earned
them, meta-actions that must not be free under any stack, a stage's replayed
meta-actions that are not the policy's, and a hostile or unreachable LLM consolidator."""

from __future__ import annotations

import functools
import socket
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh.testing_llm import text_reply
from envh_adaptive.experience import (
    CAPACITY,
    Library,
    LLMConsolidator,
    consolidate,
    rule_consolidator,
    write_note,
)

#: These tests choose the audit logs and libraries themselves: a spec that names a host path
#: needs the caller's trust (the default refuses it), so they build trusted, and say
#: ``trust="untrusted"`` where the refusal is what they test.
make = functools.partial(envh.make, trust="trusted")


def test_retrievals_in_episodes_count_toward_lfu_eviction(tmp_path: Path) -> None:
    lib = Library(tmp_path)
    lib.apply({"op": "ADD", "category": "general", "text": "multiply the two largest numbers first"})
    for i in range(CAPACITY - 1):
        lib.apply({"op": "ADD", "category": "general", "text": f"filler tip number{i} zzz{i}"})
    lib.save()
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace", "library": str(tmp_path)}]}
    with make(spec) as env:
        for seed in range(3):  # three episodes each retrieve the oldest entry
            env.reset(seed=seed)
            text = env.step(Action(tool="recall", args={"query": "multiply largest"})).observation.text
            assert "multiply the two largest numbers first" in text
    write_note(tmp_path, "later", {"text": "subtract small numbers to reach twenty four exactly"})
    decisions = consolidate(tmp_path, rule_consolidator)
    assert [d["op"] for d in decisions] == ["ADD"]
    general = {e["text"]: e["count"] for e in Library(tmp_path).entries["general"]}
    assert len(general) == CAPACITY
    # the used entry is kept (count 1 + 3 retrievals); an unused filler made room
    assert general.get("multiply the two largest numbers first") == 4, general
    assert "filler tip number0 zzz0" not in general


def test_a_budget_inside_the_workspace_is_refused_since_meta_actions_would_be_free() -> None:
    spec = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 2}, {"kind": "workspace"}]}
    with pytest.raises(errors.SpecError, match="outside the workspace"):
        make(spec)
    leg = {"bridge": "toy24", "layers": [{"kind": "budget", "max_steps": 2}]}
    with pytest.raises(errors.SpecError, match="outside the workspace"):  # a chain leg's budget is inside too
        make({"bridge": "toy24", "layers": [{"kind": "chain", "legs": [leg]}, {"kind": "workspace"}]})
    # a repetition guard alone inside is fine: it charges no steps
    with make({"bridge": "toy24", "layers": [{"kind": "budget", "max_repeats": 3},
                                                  {"kind": "workspace"}]}):
        pass


def test_a_stages_replayed_meta_actions_are_not_counted_as_the_policys() -> None:
    spec = {"bridge": "toy24", "layers": [
        {"kind": "workspace"},
        {"kind": "stage", "actions": [{"tool": "commit", "args": {"subgoal": "reach 24", "status": "todo"}},
                                      {"tool": "track", "args": {"query": "world"}}]}]}
    with make(spec) as env:
        env.reset(seed=0)
        state = env.get_env_state()["workspace"]
        assert state["counts"] == {"track": 0, "commit": 0, "recall": 0, "note": 0}
        assert state["progress"] == [{"subgoal": "reach 24", "status": "todo"}]  # the staged start state stays
        env.step(Action(tool="track", args={"query": "world"}))
        assert env.get_env_state()["workspace"]["counts"]["track"] == 1


def test_a_hostile_llm_answer_cannot_flood_the_library(tmp_path: Path, llm_replay_server) -> None:
    write_note(tmp_path, "ep0", {"text": "stop as soon as a number equals 24"})
    llm_replay_server.add(text_reply('{"op": "ADD", "category": "general", "text": "' + "spam " * 50_000 + '"}'))
    model = LLMConsolidator("replay", base_url=llm_replay_server.base_url, api_key_env="NO_SUCH_KEY")
    decisions = consolidate(tmp_path, model)
    assert decisions[0]["reason"].startswith("llm answer unusable")
    assert [e["text"] for e in Library(tmp_path).entries["general"]] == ["stop as soon as a number equals 24"]
    assert (tmp_path / "library.json").stat().st_size < 10_000


def test_a_hand_written_huge_note_is_skipped_by_the_rules(tmp_path: Path) -> None:
    write_note(tmp_path, "ep0", {"text": "always check the numbers " * 10_000})
    assert [d["op"] for d in consolidate(tmp_path)] == ["SKIP"]
    assert Library(tmp_path).entries["general"] == []


def test_an_unreachable_llm_consolidator_is_a_typed_error_and_loses_no_note(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    write_note(tmp_path, "ep0", {"text": "stop as soon as a number equals 24"})
    model = LLMConsolidator("m", base_url=f"http://127.0.0.1:{port}/v1", api_key_env="NO_SUCH_KEY", timeout=5)
    with pytest.raises(errors.EnvhError, match="consolidator"):
        consolidate(tmp_path, model)
    assert len(Library(tmp_path).pending_notes()) == 1 and Library(tmp_path).version == 0


def test_save_and_restore_keeps_the_workspace_mid_episode() -> None:
    import json

    spec = {"bridge": "toy24", "layers": [{"kind": "workspace"}]}
    with make(spec) as a, make(spec) as b:
        a.reset(seed=0)
        a.step(Action(tool="commit", args={"subgoal": "make 24 from 4 and 6", "status": "todo"}))
        a.step(Action(tool="track", args={"query": "world"}))
        b.from_state(json.loads(json.dumps(a.save_state())))
        assert b.get_env_state() == a.get_env_state()
        assert b.get_env_state()["workspace"]["progress"] == [{"subgoal": "make 24 from 4 and 6", "status": "todo"}]
        same = Action(tool="track", args={"query": "world"})
        assert b.step(same).observation == a.step(same).observation
        broken = json.loads(json.dumps(a.save_state()))
        broken["data"]["counts"] = "many"
        with pytest.raises(errors.StateError, match="workspace"):
            b.from_state(broken)


def test_tracking_does_not_show_what_a_stage_replayed_out_of_sight() -> None:
    staged = [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}},
              {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace"}, {"kind": "stage", "actions": staged}]}
    task = envh.TaskRef(suite="toy24", split="easy", instance_id="1,2,3,4")
    with make(spec) as env:
        shown = env.reset(task=task, seed=0).observation.text
        belief = env.step(Action(tool="track", args={"query": "world"})).observation.text
        assert env.get_env_state()["workspace"]["belief_size"] == 2  # the reset and the last replayed answer
        assert "[0] 3, [1] 4, [2] 3" not in belief  # 1+2 in between: the policy never saw it
        assert shown.splitlines()[0][:40] in belief


def test_a_library_that_cannot_be_written_is_a_typed_env_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace", "library": str(tmp_path / "file" / "lib")}]}
    with make(spec) as env:
        env.reset(seed=0)
        with pytest.raises(errors.EnvError, match="Experience library"):
            env.step(Action(tool="note", args={"text": "multiply the two largest numbers first"}))


def test_an_untrusted_spec_cannot_point_the_library_at_a_host_directory(tmp_path: Path) -> None:
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace", "library": str(tmp_path / "victim")}]}
    with pytest.raises(errors.SpecError, match="untrusted spec may not name a host path"):
        make(spec, trust="untrusted")
    assert not (tmp_path / "victim").exists()
    with make({"bridge": "toy24", "layers": [{"kind": "workspace"}]}, trust="untrusted"):
        pass


def test_a_steered_consolidation_can_be_rolled_back_to_the_previous_version(tmp_path: Path, llm_replay_server) -> None:
    for i, text in enumerate(["heat the mug in the microwave first", "the fridge is usually in the kitchen corner"]):
        write_note(tmp_path, f"ep{i}", {"text": text})
    consolidate(tmp_path)
    v1 = (tmp_path / "library.json").read_text()
    # a policy-written note steers the model into a harmful (but allowed) refinement
    write_note(tmp_path, "ep9", {"text": "heat the mug in the microwave first then put it in the sink"})
    llm_replay_server.add(text_reply('{"op": "UPDATE", "category": "general", "index": 0, '
                                     '"text": "heat the mug in the microwave first then put it in the sink"}'))
    consolidate(tmp_path, LLMConsolidator("replay", base_url=llm_replay_server.base_url, api_key_env="NO_SUCH_KEY"))
    assert Library(tmp_path).entries["general"][0]["text"].endswith("sink") and Library(tmp_path).version == 2
    assert (tmp_path / "versions" / "v1.json").read_text() == v1  # what the rollback restores


def test_a_read_only_library_still_answers_recall(tmp_path: Path) -> None:
    lib = Library(tmp_path)
    lib.apply({"op": "ADD", "category": "general", "text": "multiply the two largest numbers first"})
    lib.save()
    (tmp_path / "notes").write_text("")  # nothing can be filed under notes/ (as in a read-only share)
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace", "library": str(tmp_path)}]}
    with make(spec) as env:
        env.reset(seed=0)
        text = env.step(Action(tool="recall", args={"query": "multiply"})).observation.text
        assert "general: multiply the two largest numbers first" in text
