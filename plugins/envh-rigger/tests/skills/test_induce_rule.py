"""The offline inducer on real Toy24 trajectories read back from a real store."""

from __future__ import annotations

from pathlib import Path

from envh import Action, ToolSpec
from envh_rigger.skills import EpisodeView, StepView, cases_from, make_inducer, read_episodes
from envh_rigger.skills.induce import abstract_action


def _cases(run: Path) -> dict[str, object]:
    return {c.task.split("/")[-1]: c for c in cases_from(read_episodes(run))}


def test_cases_pair_shortest_success_with_longest_failure(toy_run: Path) -> None:
    cases = _cases(toy_run)
    assert {k: c.method for k, c in cases.items()} == {  # type: ignore[attr-defined]
        "2,3,4": "contrast", "1,3,8": "failure", "4,4,5": "success"}
    pair = cases["2,3,4"]
    assert len(pair.success.steps) == 3  # type: ignore[attr-defined]
    assert len(pair.failure.steps) == 5  # the longer of the two failures  # type: ignore[attr-defined]
    assert pair.success.tools and pair.success.goal.startswith("Target: 24")  # type: ignore[attr-defined]


def test_contrast_names_the_step_the_failure_never_took(toy_run: Path) -> None:
    items = make_inducer("rule").induce(_cases(toy_run)["2,3,4"])  # type: ignore[arg-type]
    lesson = items[0]
    assert lesson.title == 'Do combine(op="mul")'
    assert 'combine(i=0, j=1, op="mul") → combine(i=0, j=1, op="mul") → stop()' in lesson.content
    assert "Target: 24" in lesson.when_to_use
    prov = lesson.provenance[0]
    assert (prov.method, prov.inducer, prov.source) == ("contrast", "rule", "baseline")
    assert len(prov.trajectories) == 2 and all(t.startswith("run/") for t in prov.trajectories)


def test_repeated_rejections_become_an_avoid_item(toy_run: Path) -> None:
    items = make_inducer("rule").induce(_cases(toy_run)["1,3,8"])  # type: ignore[arg-type]
    avoid = [it for it in items if it.title.startswith("Avoid")]
    assert len(avoid) == 1
    assert avoid[0].title == "Avoid invalid combine(): positions must be two different integers in N..N; got i=N, j=N."
    assert avoid[0].content.startswith('2 combine() call(s) were rejected in a failed episode, e.g. '
                                       'combine(i=7, j=0, op="add")')
    assert "positions must be two different integers in 0..1" in avoid[0].content  # after one combine
    assert avoid[0].provenance[0].method == "failure"


def test_single_success_gives_its_plan(toy_run: Path) -> None:
    (item,) = make_inducer("rule").induce(_cases(toy_run)["4,4,5"])  # type: ignore[arg-type]
    assert item.title == 'A plan that worked: combine(op="mul") → combine(op="add") → stop()'
    assert 'combine(i=1, j=2, op="mul") → combine(i=0, j=1, op="add") → stop()' in item.content


def test_order_matters_when_both_used_the_same_moves() -> None:
    tools = (ToolSpec(name="do", description="run a command", parameters={
        "type": "object", "properties": {"command": {"type": "string"}}}),)

    def ep(cmds: list[str], success: bool) -> EpisodeView:
        return EpisodeView(trajectory_id=f"t{success}", task="house/1", success=success, goal="Put a mug in the sink",
                           tools=tools, steps=tuple(StepView(action=Action(tool="do", args={"command": c}))
                                                   for c in cmds))

    from envh_rigger.skills import cases_from as group

    (case,) = group([ep(["go to sink 1", "take mug 1 from cabinet 2", "open cabinet 2"], False),
                     ep(["open cabinet 2", "take mug 1 from cabinet 2", "go to sink 1"], True)])
    (item, *_) = make_inducer("rule").induce(case)
    # every verb occurs in both; opening before taking is what only the success did
    assert item.title == 'Do do(command="open …") → do(command="take …")'


def test_abstraction_keeps_enums_and_verbs_and_drops_ids() -> None:
    tools = {"t": ToolSpec(name="t", description="", parameters={"type": "object", "properties": {
        "mode": {"type": "string", "enum": ["a", "b"]}, "n": {"type": "integer"}, "text": {"type": "string"}}})}
    action = Action(tool="t", args={"mode": "b", "n": 3, "text": "Open drawer 4", "flag": True})
    assert abstract_action(action, tools) == 't(mode="b", text="open …", flag=True)'
    assert abstract_action(None, tools) == "<unparsable output>"


def test_only_final_policy_attributable_episodes_are_read(toy_run: Path) -> None:
    from envh import spec_id
    from envh.rollout.runner import infra_failure
    from envh.rollout.store import TrajectoryStore
    from envh.rollout.trajectory import EpisodeRequest

    spec = {"bridge": "toy24", "config": {}, "layers": []}
    req = EpisodeRequest(key="crashed", spec=spec, spec_id=spec_id(spec), run_id="run", policy="scripted")
    with TrajectoryStore(toy_run) as store:
        store.append(infra_failure(req, "worker killed", final=False))
        store.append(infra_failure(req, "worker killed again", final=True))
    views = list(read_episodes(toy_run))
    assert len(views) == 5 and not any(v.trajectory_id.endswith("crashed") for v in views)
