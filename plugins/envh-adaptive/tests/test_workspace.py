"""The workspace kind on the real Toy24 bridge: meta-actions cost steps and never reach
the bridge; bounded Progress and Belief; the Experience library's LFU eviction and its
consolidation (rules, and an OpenAI-compatible endpoint via the replay server); notes
from pool workers sharing one library; stacks with stage and contract."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import envh
import pytest
from envh import Action, errors
from envh.testing_llm import text_reply
from envh_adaptive.experience import Library, LLMConsolidator, consolidate, rule_consolidator, write_note

#: These tests choose the audit logs and libraries themselves: a spec that names a host path
#: needs the caller's trust (the default refuses it), so they build trusted, and say
#: ``trust="untrusted"`` where the refusal is what they test.
make = functools.partial(envh.make, trust="trusted")


def ws(**layer):
    return {"bridge": "toy24", "layers": [{"kind": "workspace", **layer}, {"kind": "budget", "max_steps": 4}]}


def commit(subgoal: str, status: str = "todo") -> Action:
    return Action(tool="commit", args={"subgoal": subgoal, "status": status})


def test_meta_actions_cost_steps_of_the_same_budget_and_never_reach_the_bridge() -> None:
    with make(ws()) as env:
        env.reset(task=envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4"), seed=0)
        assert {"track", "commit", "recall", "note"} <= {t.name for t in env.tools()}
        r1 = env.step(Action(tool="track", args={"query": "world"}))
        r2 = env.step(commit("multiply everything"))
        r3 = env.step(Action(tool="combine", args={"i": 0, "j": 1, "op": "mul"}))
        r4 = env.step(Action(tool="recall", args={"query": "multiply"}))
        assert [r.truncated for r in (r1, r2, r3, r4)] == [False, False, False, True]
        base = env.unwrapped
        assert base.steps == 1 and base.history == [{"i": 0, "j": 1, "op": "mul", "result": "6"}]
        state = env.get_env_state()
        assert state["workspace"]["counts"] == {"track": 1, "commit": 1, "recall": 1, "note": 0}
        assert "Numbers: [0] 4, [1] 6" in r4.observation.text  # the world is still shown after a meta-action
        assert not env.evaluate().success


def test_bad_meta_calls_are_error_observations() -> None:
    with make(ws()) as env:
        env.reset(seed=0)
        for bad in (Action(tool="commit", args={"subgoal": "x"}), Action(tool="commit", args={"subgoal": "x",
                    "status": "maybe"}), Action(tool="track", args={"query": 3}),
                    Action(tool="note", args={"text": "y" * 501})):
            resp = env.step(bad)
            assert resp.observation.text.startswith("Error:") and resp.info["error"]["type"] == "invalid_arguments"
        assert env.get_env_state()["workspace"]["counts"]["commit"] == 0


def test_progress_and_belief_are_bounded() -> None:
    spec = {"bridge": "toy24", "layers": [{"kind": "workspace", "progress_capacity": 2, "belief_capacity": 3}]}
    with make(spec) as env:
        env.reset(seed=0)
        env.step(commit("a"))
        env.step(commit("b"))
        full = env.step(commit("c"))
        assert "progress is full (2 open sub-goals)" in full.observation.text
        env.step(commit("a", "done"))
        env.step(commit("c"))
        assert [p["subgoal"] for p in env.get_env_state()["workspace"]["progress"]] == ["b", "c"]
        for _ in range(5):
            env.step(Action(tool="reset"))
        assert env.get_env_state()["workspace"]["belief_size"] == 3
        assert "Belief (3 facts)" in env.step(Action(tool="track", args={"query": "world"})).observation.text


def test_the_library_evicts_the_least_used_entry(tmp_path: Path) -> None:
    lib = Library(tmp_path, capacity=3)
    for text in ("heat the mug in the microwave", "open the fridge first", "look in the cabinet"):
        lib.apply({"op": "ADD", "category": "general", "text": text})
    assert lib.recall("microwave mug")["general"][0] == "heat the mug in the microwave"
    lib.recall("fridge")
    lib.apply({"op": "ADD", "category": "general", "text": "check the countertop"})
    texts = [e["text"] for e in lib.entries["general"]]
    assert "look in the cabinet" not in texts and len(texts) == 3  # count 1, the least used
    assert {e["text"]: e["count"] for e in lib.entries["general"]}["check the countertop"] == 1


def test_rule_consolidation_adds_updates_removes_and_skips(tmp_path: Path) -> None:
    for i, text in enumerate(["the mug is usually in the cabinet", "ok", "avoid dividing before the end",
                              "the mug is usually in the cabinet near the sink"]):
        write_note(tmp_path, f"ep{i}", {"text": text})
    decisions = consolidate(tmp_path, rule_consolidator)
    assert [d["op"] for d in decisions] == ["ADD", "SKIP", "ADD", "UPDATE"]
    lib = Library(tmp_path)
    assert lib.version == 1 and lib.entries["locations"][0]["text"].endswith("near the sink")
    assert lib.entries["mistakes"][0]["text"] == "avoid dividing before the end"
    assert not list((tmp_path / "notes").glob("*.jsonl"))  # filed under notes/done/v1
    write_note(tmp_path, "ep9", {"text": "forget: avoid dividing before the end"})
    assert [d["op"] for d in consolidate(tmp_path)] == ["SKIP"]  # a note never removes an entry
    assert len(Library(tmp_path).entries["mistakes"]) == 1 and Library(tmp_path).version == 2


def test_llm_consolidation_through_an_openai_compatible_endpoint(tmp_path: Path, llm_replay_server) -> None:
    write_note(tmp_path, "ep0", {"text": "stop as soon as a number equals 24"})
    write_note(tmp_path, "ep1", {"text": "always stop as soon as any number equals 24"})
    write_note(tmp_path, "ep2", {"text": "a note the model answers badly"})
    llm_replay_server.add(
        text_reply('{"op": "ADD", "category": "general", "text": "stop as soon as a number equals 24"}'),
        text_reply('Sure! {"op": "UPDATE", "category": "general", "index": 0, '
                   '"text": "always stop as soon as any number equals 24"}'),
        text_reply("I think this is fine"))
    model = LLMConsolidator("replay", base_url=llm_replay_server.base_url, api_key_env="NO_SUCH_KEY")
    decisions = consolidate(tmp_path, model)
    assert [d["op"] for d in decisions] == ["ADD", "UPDATE", "ADD"]
    assert decisions[2]["reason"].startswith("llm answer unusable")
    assert Library(tmp_path).entries["general"][0]["text"] == "always stop as soon as any number equals 24"
    assert "a note the model answers badly" in llm_replay_server.requests[2]["body"]["messages"][0]["content"]


def test_the_library_is_frozen_during_episodes_and_recall_reads_it(tmp_path: Path) -> None:
    lib = Library(tmp_path)
    lib.apply({"op": "ADD", "category": "mistakes", "text": "never divide by a difference of equal numbers"})
    lib.save()
    before = (tmp_path / "library.json").read_bytes()
    with make(ws(library=str(tmp_path))) as env:
        env.reset(seed=0)
        text = env.step(Action(tool="recall", args={"query": "divide numbers"})).observation.text
        assert "mistakes: never divide by a difference" in text
        env.step(Action(tool="note", args={"text": "multiplying the two largest numbers helps"}))
    assert (tmp_path / "library.json").read_bytes() == before  # episodes never write it
    assert len(Library(tmp_path).pending_notes()) == 1


def test_workspace_under_stage_and_contract_in_pool_workers_with_a_shared_library(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    spec = {"bridge": "toy24", "layers": [
        {"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "mul"}}]},
        {"kind": "contract", "code": "def filter_observation(observation, state, memo):\n"
                                     "    return observation.text + ' [contract]'\n"},
        {"kind": "workspace", "library": str(lib)}, {"kind": "budget", "max_steps": 6}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    script = [{"tool": "note", "args": {"text": "start by multiplying the first two numbers"}},
              {"tool": "track", "args": {"query": "world"}}, {"tool": "stop"}]
    (tmp_path / "script.json").write_text(json.dumps(script))
    proc = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "run", str(tmp_path / "spec.json"),
                           "--split", "easy", "-k", "1", "--policy", f"scripted:{tmp_path / 'script.json'}",
                           "--executor", "pool", "--workers", "2", "--out", str(tmp_path / "run"),
                           # workers keep root's uid (own namespaces): the library lives in a private tmp dir;
                           # the library is a host path this test chose, which only a trusted run may name
                           "--isolation", "namespace", "--trust-code"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = Library(lib).pending_notes()
    assert len(notes) == 10 and len({p for p, _ in notes}) == 10  # one file per episode, from both workers
    decisions = consolidate(lib)
    assert [d["op"] for d in decisions].count("ADD") == 1 and Library(lib).version == 1


def test_consolidate_cli(tmp_path: Path) -> None:
    write_note(tmp_path, "ep", {"text": "the key is usually on the shelf"})
    cli = [sys.executable, "-c", "from envh.cli import main; main()", "workspace", "consolidate"]
    ok = subprocess.run([*cli, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "ADD" in ok.stdout and "locations" in ok.stdout
    bad = subprocess.run([*cli, str(tmp_path), "--consolidator", "gpt"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Unknown consolidator 'gpt'" in bad.stderr


def test_meta_tools_cannot_shadow_the_inner_envs_tools() -> None:
    inner = {"bridge": "toy24", "layers": [{"kind": "workspace"}]}
    with pytest.raises(errors.SpecError, match="already has tools named"):
        make({**inner, "layers": [{"kind": "workspace"}, {"kind": "workspace"}]})


def test_two_consolidations_at_once_lose_nothing(tmp_path: Path) -> None:
    import threading

    for i in range(40):
        write_note(tmp_path, f"ep{i}", {"text": f"alpha{i} bravo{i} charlie{i} delta{i}"})
    failures: list[BaseException] = []

    def run() -> None:
        try:
            consolidate(tmp_path)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    lib = Library(tmp_path)
    assert lib.version == 2 and sum(len(v) for v in lib.entries.values()) == 40
    log = [json.loads(line) for line in (tmp_path / "consolidations.jsonl").read_text().splitlines()]
    assert sorted(len(r["decisions"]) for r in log) == [0, 40]


def test_hostile_notes_and_decisions_are_refused_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "x.jsonl").write_text('[1, 2]\n"text"\n{"text": {"a": 1}}\n{"text": "open the drawer before looking inside it"}\n')
    decisions = consolidate(tmp_path)
    assert [d["op"] for d in decisions] == ["ADD"]
    lib = Library(tmp_path)
    for bad in ({"op": "UPDATE", "category": lib_cat(lib), "index": "0", "text": "a longer text for it"},
                {"op": "REMOVE", "category": lib_cat(lib), "index": True},
                {"op": "ADD", "category": "general", "text": {"not": "text"}},
                {"op": "DROP"}):
        with pytest.raises(errors.StateError):
            lib.apply(bad)
    # a hand-edited library fails on load, not in the middle of an episode's recall
    data = json.loads((tmp_path / "library.json").read_text())
    data["entries"][lib_cat(lib)][0].pop("count")
    (tmp_path / "library.json").write_text(json.dumps(data))
    with pytest.raises(errors.StateError, match="integer count"):
        Library(tmp_path)


def lib_cat(lib: Library) -> str:
    return next(c for c, v in lib.entries.items() if v)


def test_the_workspace_answers_through_cores_public_hook() -> None:
    """Meta-actions are answered through ``EnvHarness.answer_action`` (no step() override,
    no private key): the audit has nothing to report and the answer's step earns 0."""
    from envh.harness import audit_stack
    from envh_adaptive.components.workspace import Workspace

    assert "step" not in vars(Workspace) and "answer_action" in vars(Workspace)
    with make({"bridge": "toy24", "layers": [{"kind": "workspace"}]}) as env:
        env.reset(task=envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4"), seed=0)
        resp = env.step(Action(tool="commit", args={"subgoal": "make 24", "status": "todo"}))
        assert resp.reward == 0.0 and resp.info["envh"][-1]["action"] == "answered"
        assert resp.info["envh"][-1]["meta"] == "commit"
        assert audit_stack(env) == []
