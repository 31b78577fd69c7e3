"""The LLM designer against the local replay server (real openai SDK, real HTTP).

Recorded replies cover a valid candidate, malformed output (broken JSON, wrong fields),
code that fails the sandbox's static check, and a contract that makes the task
unsolvable; the last three must come back to the model as typed feedback without
spending rollouts.
"""

from __future__ import annotations

import json

from envh.testing_llm import LLMReplayServer, text_reply, tool_reply
from envh_rigger.journal import Journal
from envh_rigger.run import RigConfig, rig

TASK = "medium/1,2,6,6"
EXPLAIN = tool_reply("explain", {"failure_axis": "S0", "rationale": "it blunders from four numbers"})
STAGE = [{"kind": "stage", "id": "two-steps", "actions": [
    {"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}},
    {"tool": "combine", "args": {"i": 0, "j": 2, "op": "mul"}}]}]
VALID = tool_reply("propose_candidate", {"diagnosis": "cannot start", "rationale": "stage two solver steps",
                                         "layers": STAGE})
SANDBOX = tool_reply("propose_candidate", {"diagnosis": "d", "rationale": "r", "layers": [
    {"kind": "contract", "code": "import os\ndef filter_action(action, state, memo):\n    return None\n"}]})
UNSOLVABLE = tool_reply("propose_candidate", {"diagnosis": "d", "rationale": "r", "layers": [
    {"kind": "contract", "code": "def filter_action(action, state, memo):\n"
                                 "    if action.tool == 'combine':\n"
                                 "        return Block(reason='no combining')\n    return None\n"}]})


def _run(server, tmp_path, **kw):
    config = RigConfig(policy="coin", tasks=TASK, designer="llm:test-model", out=str(tmp_path / "run"),
                       designer_options={"base_url": server.base_url, "api_key": "k"}, **kw)
    return config


def test_valid_candidate_is_validated_and_accepted(registry, tmp_path):
    with LLMReplayServer([EXPLAIN, VALID]) as server:
        summary = rig(_run(server, tmp_path), registry=registry)
        requests = server.chat_requests
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "accepted"}
    assert summary["usage"]["llm_calls"] == 2 and summary["usage"]["prompt_tokens"] > 0
    first = requests[0]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "explain"}}
    assert requests[1]["tool_choice"]["function"]["name"] == "propose_candidate"
    system, user = first["messages"][0]["content"], first["messages"][1]["content"]
    assert "Never make the task unsolvable" in system and "keep its working code" in system
    # the prompt is built from what the bridge exposes, and from real trajectories
    assert '"name": "combine"' in user and "reached_target" in user and "FAILURE" in user
    assert "success rate in [0.4, 0.6]" in user


def test_malformed_output_is_fed_back_and_retried(registry, tmp_path):
    broken = tool_reply("propose_candidate", '{"diagnosis": "x", "layers": [')
    wrong_kind = tool_reply("propose_candidate", {"diagnosis": "d", "rationale": "r",
                                                  "layers": [{"kind": "stagee", "actions": []}]})
    with LLMReplayServer([EXPLAIN, text_reply("I think we should scaffold."), broken, wrong_kind,
                          VALID]) as server:
        summary = rig(_run(server, tmp_path), registry=registry)
        requests = server.chat_requests
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "accepted"}
    assert summary["usage"]["retries"] == 3  # no call, broken JSON, unknown kind; then valid
    feedback = [m["content"] for m in requests[-1]["messages"] if m["role"] in ("tool", "user")]
    assert any("not valid JSON" in f for f in feedback)
    assert any("Unknown component kind 'stagee'" in f for f in feedback)


def test_sandbox_violation_and_unsolvable_candidates_cost_no_rollouts(registry, tmp_path):
    with LLMReplayServer([EXPLAIN, SANDBOX, EXPLAIN, UNSOLVABLE, EXPLAIN, VALID]) as server:
        summary = rig(_run(server, tmp_path), registry=registry)
        requests = server.chat_requests
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "accepted"}
    attempts = [e["attempt"] for e in Journal(tmp_path / "run").events(kind="attempt")]
    assert [a["verdict"] for a in attempts] == ["invalid", "invalid", "accepted"]
    assert [a["cascade"]["stage"] for a in attempts[:2]] == ["static", "unsolvable"]
    assert all(a["result"] is None for a in attempts[:2])  # no rollouts were spent on them
    # each failure reached the model in the next prompt, typed
    assert "static: Contract code error" in requests[2]["messages"][1]["content"]
    assert "unsolvable: the reference solution no longer wins" in requests[4]["messages"][1]["content"]
    validated = attempts[2]["result"]["n"] + attempts[2]["result"]["confirmation"]["n"]
    # and the base's episodes that showed the accepted candidate differs from it (its far run)
    against_base = attempts[2]["result"]["differs"]["base_episodes"]
    assert summary["usage"]["rollouts"] == 5 + validated + against_base


def test_model_that_never_complies_ends_in_typed_rejections(registry, tmp_path):
    junk = [text_reply("no")] * 40
    with LLMReplayServer([EXPLAIN, *junk]) as server:
        config = _run(server, tmp_path, rounds=1)
        summary = rig(config, registry=registry)
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "rounds"}
    attempts = [e["attempt"] for e in Journal(tmp_path / "run").events(kind="attempt")]
    assert attempts and all(a["verdict"] == "invalid" for a in attempts)
    assert all("malformed" in a["meta"] for a in attempts)
    assert json.dumps(summary)  # the summary is plain data


def test_refinement_sees_trajectories_played_under_the_last_candidate(registry, tmp_path):
    """Round 2's prompt holds episodes of round 1's candidate, not only the baseline's."""
    weak = tool_reply("propose_candidate", {"diagnosis": "d", "rationale": "one step", "layers": [
        {"kind": "stage", "id": "one-step", "actions": [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]}]})
    with LLMReplayServer([EXPLAIN, weak, EXPLAIN, VALID]) as server:
        summary = rig(_run(server, tmp_path), registry=registry)
        requests = server.chat_requests
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "accepted"}
    first_user = requests[0]["messages"][1]["content"]
    later_user = requests[2]["messages"][1]["content"]
    assert "Trajectories played under your last measured candidate" not in first_user
    assert "Trajectories played under your last measured candidate" in later_user


def test_llm_diagnoser_names_the_axis_over_the_stats_evidence(registry, tmp_path, monkeypatch):
    diagnosis = tool_reply("explain", {"failure_axis": "A", "rationale": "episode seed 0 step 0: it subtracts"})
    with LLMReplayServer([diagnosis]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        rig(RigConfig(policy="coin", tasks=TASK, diagnoser="llm:diag-model", rounds=1, out=str(tmp_path / "d")),
            registry=registry)
        requests = server.chat_requests
    assert "Claims per failed episode" in requests[0]["messages"][1]["content"]
    (base,) = Journal(tmp_path / "d").events("toy24/medium/1,2,6,6", "baseline")
    d = base["diagnosis"]
    assert d["failure_axis"] == "A" and d["model"] == "diag-model" and d["claims"]
