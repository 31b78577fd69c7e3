"""Attacks on round 2 of the rigger: each test failed before its fix.

* a stage that walks Toy24 into a dead end left no reference from the candidate's start, and
  the cascade took "no reference" for "the bridge has none" and passed the candidate;
* ``repeats:²`` passed the argument check (``'²'.isdigit()``; the empty probe episode never
  reads the count) and then raised ``ValueError`` on the first real episode;
* a pattern with nested quantifiers (``calls:bash:(a+)+$``, from a user or a designer's
  reading of plain words) passed the check and then hung the rigger's process on one long
  argument (catastrophic backtracking; Python's ``re`` has no timeout): patterns now run
  in RE2, linear in the text, and one RE2 cannot run is refused;
* ``repeats:1`` was accepted: it shows in every episode that takes any action, so the
  "weakness" was plain failure;
* spares counted against ``--max-rollouts`` made a pool stop earlier than one worker.
"""

from __future__ import annotations

import time

import envh
import pytest
from envh import Action, errors
from envh.rollout import Trajectory
from envh.rollout.trajectory import StepRecord
from envh.types import Observation
from envh_rigger.cascade import check
from envh_rigger.weakness import resolve

TASK = envh.TaskRef(suite="toy24", split="medium", instance_id="1,2,6,6")


def _episode(*actions: Action) -> Trajectory:
    obs = Observation(text="x")
    steps = tuple(StepRecord(index=i, proposed=a, executed=a, observation=obs) for i, a in enumerate(actions))
    return Trajectory(key="k", spec_id="s", steps=steps)


def test_a_stage_walking_into_a_dead_end_is_unsolvable_not_reference_free(registry):
    # 6 - 6 = 0 leaves 1, 2, 0: 24 is out of reach, so the solver has no plan from there
    dead_end = [{"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 2, "j": 3, "op": "sub"}}]}]
    result = check({"bridge": "toy24"}, dead_end, TASK, registry=registry)
    assert not result.ok and result.stage == "unsolvable", result
    # a stage on the solver's own path keeps a reference and passes
    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        first = env.unwrapped.solve()[0]
    good = [{"kind": "stage", "actions": [{"tool": first.tool, "args": dict(first.args)}]}]
    assert check({"bridge": "toy24"}, good, TASK, registry=registry).ok


def test_a_candidate_start_without_a_reference_is_rejected_on_any_bridge(registry, monkeypatch):
    """ALFWorld's and SWE-bench's references now come from any state, so "none from the
    candidate's start where the current start has one" no longer only happens on a bridge
    declaring ``reference_complete``: it is rejected everywhere (nothing shows the task can
    still be won), and a dead end is named as one only where "none" means "no win"."""
    from envh.bridges.toy24 import Toy24Env

    monkeypatch.setattr(Toy24Env, "reference_complete", False)
    dead_end = [{"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 2, "j": 3, "op": "sub"}}]}]
    result = check({"bridge": "toy24"}, dead_end, TASK, registry=registry)
    assert not result.ok and result.stage == "unsolvable" and "nothing shows" in result.message, result


def test_a_reference_that_raises_is_named_and_never_passes_as_no_reference(registry, monkeypatch):
    """A crashing reference (a planner failing) was read as "the bridge has no reference":
    the candidate passed on the probe and the report said "none"."""
    from envh.bridges.toy24 import Toy24Env

    original = Toy24Env.reference_actions

    def flaky(self):
        if self.history:  # fine at the bare start, broken from the candidate's start
            raise RuntimeError("planner crashed")
        return original(self)

    monkeypatch.setattr(Toy24Env, "reference_actions", flaky)
    stage = [{"kind": "stage", "actions": [{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}]}]
    result = check({"bridge": "toy24"}, stage, TASK, registry=registry)
    assert not result.ok and result.stage == "unsolvable", result
    assert result.reference == "error: RuntimeError: planner crashed" and "planner crashed" in result.message


@pytest.mark.parametrize("count", ["²", "٣x", "0", "1"])
def test_a_count_int_cannot_read_is_refused_before_the_loop(registry, count):
    with pytest.raises(errors.EnvhError):
        w = resolve(f"repeats:{count}", registry=registry, bridge="toy24")
        w.shows(_episode(Action(tool="stop"), Action(tool="stop")))  # before: ValueError here


@pytest.mark.parametrize("predicate", ["calls:bash:(a+)+$", "calls:bash:(a|aa)*b", "submits-before-test:(x*)*y",
                                       "calls:bash:((a)+)+$", "calls:bash:(a{1,}){2,}$"])
def test_a_pattern_that_backtracks_catastrophically_in_re_reads_in_linear_time(registry, predicate):
    """Each of these held Python's ``re`` for hours on a 40-character argument."""
    w = resolve(predicate, registry=registry, bridge="toy24")
    start = time.monotonic()
    for n in (40, 10_000):
        w.shows(_episode(Action(tool="bash", args={"cmd": "a" * n + "!"})))
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!x)y", "a" * 201])
def test_a_pattern_re2_cannot_run_or_too_long_is_refused(registry, pattern):
    with pytest.raises(errors.EnvhError, match="RE2|longer than 200"):
        resolve(f"calls:bash:{pattern}", registry=registry, bridge="toy24")


def test_ordinary_patterns_still_read(registry):
    w = resolve("calls:bash:pytest|tox", registry=registry, bridge="toy24")
    assert w.shows(_episode(Action(tool="bash", args={"cmd": "pytest -x"})))
    assert resolve("calls:combine:(div|sub)", registry=registry, bridge="toy24").shows(
        _episode(Action(tool="combine", args={"i": 0, "j": 1, "op": "div"})))


def test_a_rollout_budget_stops_the_same_run_on_any_worker_count(registry, tmp_path):
    """Spares counted against --max-rollouts: with a budget the one-worker run exactly fits
    (three rounds), two workers spent one on a spare in round 1 and stopped before round 3
    (``budget:rollouts``): the run's outcome depended on the worker count."""
    from envh_rigger.budget import Budget
    from envh_rigger.journal import Journal
    from envh_rigger.run import RigConfig, rig

    with envh.make({"bridge": "toy24"}, registry=registry) as env:
        env.reset(task=TASK, seed=0)
        plan = [{"tool": a.tool, "args": dict(a.args)} for a in env.unwrapped.solve() if a.tool == "combine"]
    spec = {"bridge": "toy24", "layers": [{"kind": "stage", "actions": plan}]}

    def run(name, workers, budget):
        cfg = RigConfig(spec=spec, tasks="medium/1,2,6,6", out=str(tmp_path / name), max_steps=6,
                        workers=workers, policy="random:3", target="sr:0.7-0.9", rounds=3,
                        designer="template:guide", budget=budget)
        summary = rig(cfg, registry=registry)
        results = [e["attempt"]["result"] for e in Journal(tmp_path / name).events(kind="attempt")]
        return summary, [(r["decision"], r["n"], r["successes"]) for r in results]

    one, one_attempts = run("one", 1, Budget())
    two, two_attempts = run("two", 2, Budget(max_rollouts=one["usage"]["rollouts"]))
    assert len(one_attempts) == 3
    assert two["stops"] == one["stops"] and two_attempts == one_attempts
    assert two["usage"]["rollouts"] == one["usage"]["rollouts"]


@pytest.mark.parametrize("bad_args", [["three"], ["(a)\\1"], ["a:b"]])
def test_the_llm_reading_a_name_with_unusable_arguments_is_asked_again(registry, tmp_path, bad_args):
    """Only the name was checked inside the designer's retry loop: an unusable argument
    ended the command (``not a usable predicate``) instead of being fed back."""
    import json

    from envh.testing_llm import LLMReplayServer, tool_reply
    from envh_rigger.run import RigConfig, prepare

    name = "calls" if bad_args != ["three"] else "repeats"
    args = ["combine", *bad_args] if name == "calls" else bad_args
    wrong = tool_reply("name_predicate", {"name": name, "args": args, "rationale": "?"})
    right = tool_reply("name_predicate", {"name": "toy24.revisits", "args": ["2"], "rationale": "r"})
    with LLMReplayServer([wrong, right]) as server:
        cfg = RigConfig(policy="divider", tasks="medium/1,2,6,6", designer="llm:test-model", out=str(tmp_path / "r"),
                        target='weakness:"keeps coming back to where it began"',
                        designer_options={"base_url": server.base_url, "api_key": "k"})
        ready = prepare(cfg, registry)
        ready["designer"].close()
        requests = server.chat_requests
    assert ready["weakness"].predicate == "toy24.revisits:2"
    assert len(requests) == 2 and "invalid" in json.dumps(requests[1]["messages"][-1])


def test_a_plugin_focus_re2_cannot_run_means_anywhere():
    """guide runs the focus pattern on every off-reference action, in this process: one RE2
    cannot run is dropped like one that does not compile; one that would backtrack in ``re``
    runs (RE2 is linear) and a spec's guide contract may use it."""
    from envh_rigger.guidance import GuideContract
    from envh_rigger.weakness import _checked_focus

    assert _checked_focus({"tools": ["do"], "pattern": "(a)\\1"}) is None
    assert _checked_focus({"tools": ["do"], "pattern": "(a+)+$"}) == {"tools": ["do"], "pattern": "(a+)+$"}
    assert _checked_focus({"tools": ["do"], "pattern": "go to"}) == {"tools": ["do"], "pattern": "go to"}
    with pytest.raises(ValueError, match="RE2"):
        GuideContract(envh.make({"bridge": "toy24"}), rate=0.5, focus={"pattern": "(?=a)"})


def test_a_pattern_the_check_lets_through_still_cannot_hold_the_rigger(registry):
    """Three ``.*`` took ``re`` 47 s on 1,000 characters; RE2 reads it at once."""
    w = resolve("calls:bash:.*.*.*b", registry=registry, bridge="toy24")
    start = time.monotonic()
    assert not w.shows(_episode(Action(tool="bash", args={"cmd": "a" * 1000})))
    assert w.shows(_episode(Action(tool="bash", args={"cmd": "a" * 10 + "b"})))
    assert time.monotonic() - start < 5


def test_the_mask_passes_the_cascade_because_the_reference_replayed(registry):
    """test_knobs checks only ``ok`` for mask m = 1, which also holds when no reference ran
    (the probe fallback): the pass must come from the replayed reference."""
    layers = [{"kind": "contract", "id": "mask", "cls": "envh_rigger.masking:ObservationMask", "config": {"rate": 1.0}}]
    result = check({"bridge": "toy24"}, layers, TASK, registry=registry)
    assert result.ok and result.reference.startswith("replayed"), result


@pytest.mark.parametrize("words", ["never stops, keeps going forever", "doesn't stop when it should",
                                   "submits the latest answer", "plays nonstop"])
def test_keywords_do_not_read_the_opposite_or_a_word_inside_another(registry, words):
    """Substring keywords read "never stops" as stops-early (the opposite), "latest" as a
    test run and "nonstop" as a stop: a weakness measured is then not the one named."""
    with pytest.raises(errors.EnvhError, match="Cannot read"):
        resolve(words, registry=registry, bridge="toy24")


def test_keywords_still_read_plain_words(registry):
    assert resolve("stops without reaching the goal", registry=registry).predicate == "stops-early"
    assert resolve("submits before running the tests", registry=registry).predicate == "submits-before-test"
    assert resolve("gives up early", registry=registry).predicate == "stops-early"
    assert resolve("revisits old states", registry=registry, bridge="toy24").predicate == "toy24.revisits"


def test_a_focus_of_several_words_needs_them_all_without_lookahead():
    """A class of two word arguments was one pattern of lookaheads, which RE2 cannot run: it
    is a list now, every pattern of which must match, and a spec's list is bounded."""
    from envh_rigger.divergence import class_focus
    from envh_rigger.guidance import GuideContract
    from envh_rigger.weakness import _checked_focus, focus_matcher

    focus = class_focus("move:north:fast:north")
    assert focus["pattern"] == ['(?:"north"|"north\\s)', '(?:"fast"|"fast\\s)']
    assert _checked_focus(focus) == focus
    match = focus_matcher(focus["pattern"])
    assert match('{"dir": "north", "speed": "fast"}') and match('{"a": "fast", "b": "north west"}')
    assert not match('{"dir": "north", "speed": "slow"}')
    GuideContract(envh.make({"bridge": "toy24"}), rate=0.5, focus=focus)  # accepted
    for bad in (["a"] * 9, [], ["ok", 3]):
        assert _checked_focus({"tools": ["do"], "pattern": bad}) is None
        with pytest.raises(ValueError, match="list of 1-8 patterns"):
            GuideContract(envh.make({"bridge": "toy24"}), rate=0.5, focus={"pattern": bad})
