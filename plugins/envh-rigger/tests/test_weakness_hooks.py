"""Bridges' own weakness predicates (through ``envh_weakness_predicates``) and plain words
read by the LLM designer when no keyword fits (the real openai SDK against the replay server)."""

from __future__ import annotations

import json

import attrs
import envh
import envh_alfworld.weakness
import envh_rigger.hooks
import pytest
import rig_policies
from envh import Action, TaskRef, errors
from envh.rollout import Trajectory
from envh.rollout.trajectory import StepRecord
from envh.testing_llm import LLMReplayServer, tool_reply
from envh.types import Observation
from envh_rigger.budget import Budget
from envh_rigger.rollouts import Rollouts
from envh_rigger.run import RigConfig, prepare, rig
from envh_rigger.weakness import resolve

TASK = TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")


def _episodes(registry, tmp_path, policy, seeds=range(4), **options):
    rollouts = Rollouts(tmp_path / policy, policy=policy, registry=registry, policy_options=options, max_steps=10)
    try:
        return rollouts.run({"bridge": "toy24"}, TASK, list(seeds), "observe")
    finally:
        rollouts.close()


def test_toy24_ships_its_predicates_and_they_read_real_episodes(registry, tmp_path):
    found = registry.weakness_predicates()
    assert {"toy24.bad-position", "toy24.revisits"} <= set(found)
    assert found["toy24.bad-position"].bridge == "toy24"
    bad, revisit = resolve("toy24.bad-position", registry=registry, bridge="toy24"), \
        resolve("toy24.revisits", registry=registry, bridge="toy24")
    # the divider tries combine(0, 1, div): 1/2 is fine, so it then resets: a revisit, no bad position
    divider = _episodes(registry, tmp_path, "divider", q=1.0)
    assert all(revisit.shows(t) and not bad.shows(t) for t in divider)
    solver = _episodes(registry, tmp_path, "solver")
    assert not any(revisit.shows(t) or bad.shows(t) for t in solver)


def test_bad_position_shows_when_the_bridge_refuses_a_position(registry, tmp_path):
    rollouts = Rollouts(tmp_path / "w", policy="scripted", registry=registry, max_steps=4,
                        policy_options={"actions": [{"tool": "combine", "args": {"i": 0, "j": 0, "op": "add"}},
                                                    {"tool": "stop", "args": {}}]})
    try:
        (t,) = rollouts.run({"bridge": "toy24"}, TASK, [0], "observe")
    finally:
        rollouts.close()
    assert t.steps[0].error["type"] == "bad_position"
    assert resolve("toy24.bad-position", registry=registry, bridge="toy24").bites(t)
    assert not resolve("toy24.bad-position:2", registry=registry, bridge="toy24").shows(t)


def test_a_bridges_predicates_apply_to_that_bridge_only_and_bad_arguments_are_refused(registry):
    with pytest.raises(errors.EnvhError, match="Cannot read the weakness"):
        resolve("toy24.revisits", registry=registry, bridge="alfworld")
    with pytest.raises(errors.EnvhError, match="do not fit"):
        resolve("toy24.revisits:many", registry=registry, bridge="toy24")
    with pytest.raises(errors.EnvhError, match="whole number"):
        resolve("repeats:0", registry=registry, bridge="toy24")
    with pytest.raises(errors.EnvhError, match="do not fit"):  # a count of 0 would show in every episode
        resolve("toy24.bad-position:0", registry=registry, bridge="toy24")
    # plain words name a bridge's predicate by its keywords
    assert resolve("it keeps revisiting old numbers", registry=registry, bridge="toy24").predicate == "toy24.revisits"


def _alfworld_step(i, command, error=None):
    action = Action(tool="do", args={"command": command})
    return StepRecord(index=i, proposed=action, executed=action, error=error,
                      observation=Observation(text="ok"))


def test_alfworld_revisits_counts_returns_with_nothing_done_since():
    reg = envh.make_plugin_manager(entry_points=False, plugins=[envh_rigger.hooks, envh_alfworld.weakness])
    w = resolve("revisits a location", registry=reg, bridge="alfworld")
    assert w.predicate == "alfworld.revisits" and w.focus == {"tools": ["do"], "pattern": "go to"}

    def traj(commands):
        return Trajectory(key="k", spec_id="s", steps=tuple(_alfworld_step(i, c) for i, c in enumerate(commands)))

    circles = traj(["go to fridge 1", "go to shelf 1", "go to fridge 1", "go to shelf 1"])
    purposeful = traj(["go to fridge 1", "take apple 1 from fridge 1", "go to shelf 1", "go to fridge 1"])
    assert w.shows(circles) and not w.shows(purposeful)
    assert resolve("alfworld.revisits:2", registry=reg, bridge="alfworld").shows(circles)
    assert not resolve("alfworld.revisits:3", registry=reg, bridge="alfworld").shows(circles)
    with pytest.raises(errors.EnvhError, match="do not fit"):
        resolve("alfworld.revisits:0", registry=reg, bridge="alfworld")


def _config(server, tmp_path, target, **kw):
    return RigConfig(policy="divider", tasks="medium/1,2,6,6", designer="llm:test-model", target=target,
                     out=str(tmp_path / "run"), designer_options={"base_url": server.base_url, "api_key": "k"}, **kw)


def test_the_llm_designer_reads_plain_words_no_keyword_fits(registry, tmp_path):
    wrong = tool_reply("name_predicate", {"name": "sulks", "args": [], "rationale": "?"})
    right = tool_reply("name_predicate", {"name": "toy24.revisits", "args": ["2"],
                                          "rationale": "going back to the start numbers is coming back"})
    with LLMReplayServer([wrong, right]) as server:
        ready = prepare(_config(server, tmp_path, 'weakness:"keeps coming back to where it began"'), registry)
        ready["designer"].close()
        requests = server.chat_requests
    w = ready["weakness"]
    assert (w.predicate, w.translated_by) == ("toy24.revisits:2", "designer")
    assert requests[0]["tool_choice"]["function"]["name"] == "name_predicate"
    assert "toy24.revisits" in requests[0]["tools"][0]["function"]["parameters"]["properties"]["name"]["enum"]
    assert "must be one of" in json.dumps(requests[1]["messages"])  # the bad name was fed back
    assert not (tmp_path / "run").exists()  # reading the words wrote nothing


def test_the_translation_is_stored_and_a_resume_keeps_it(registry, tmp_path):
    right = tool_reply("name_predicate", {"name": "toy24.revisits", "args": [], "rationale": "r"})
    with LLMReplayServer([right]) as server:
        cfg = attrs.evolve(_config(server, tmp_path, 'weakness:"keeps coming back to where it began"'),
                           budget=Budget(max_rollouts=0))  # stop before any rollout
        summary = rig(cfg, registry=registry)
        assert len(server.chat_requests) == 1
        stored = json.loads((tmp_path / "run" / "rig.json").read_text())
        assert stored["weakness"] == {"predicate": "toy24.revisits", "by": "designer"}
        assert summary["usage"]["llm_calls"] == 1
        # a resume measures the stored predicate: the model is not asked again
        again = prepare(attrs.evolve(cfg, resume=True), registry)
        again["designer"].close()
        assert len(server.chat_requests) == 1 and again["weakness"].predicate == "toy24.revisits"


def test_words_nobody_can_read_are_refused_before_any_state(registry, tmp_path):
    never = tool_reply("name_predicate", {"name": "nope", "args": [], "rationale": "r"})
    with LLMReplayServer([never] * 4) as server:
        with pytest.raises(errors.EnvhError, match="Cannot read the weakness"):
            rig(_config(server, tmp_path, 'weakness:"is sad"'), registry=registry)
    assert not (tmp_path / "run").exists()


assert rig_policies  # the conftest registers it; imported here for the scripted policies' names


def test_a_malformed_focus_from_a_plugin_means_anywhere_not_broken_episodes():
    class Bad:
        @envh.hookimpl
        def envh_weakness_predicates(self):
            return [envh.WeaknessInfo(name="bad.pattern", factory="envh_rigger.weakness:stops_early",
                                      focus={"tools": ["stop"], "pattern": "(unclosed"}),
                    envh.WeaknessInfo(name="bad.tools", factory="envh_rigger.weakness:stops_early",
                                      focus={"tools": "stop"})]

    reg = envh.make_plugin_manager(entry_points=False, plugins=[envh_rigger.hooks, Bad()])
    assert resolve("bad.pattern", registry=reg, bridge="toy24").focus is None
    assert resolve("bad.tools", registry=reg, bridge="toy24").focus is None
