"""What the app renders for people rather than as JSON, checked on the functions that build
it: the playground's step answers (layer effects as badges, the verdict with its metrics,
each tool's parameter schema for its form), a trajectory step's env error, prompt tokens,
env latency and observation diff, and the editor's YAML and bridge problems on their lines."""

from __future__ import annotations

from envh.rollout.trajectory import StepRecord, Trajectory, trajectory_to_data
from envh.types import Action, Observation
from envh_ui import editor, pages, steps
from envh_ui.compare import Badge, badge, badge_parts
from envh_ui.playground import DEFAULT_SPEC, Playground

BLOCKS_DIV = DEFAULT_SPEC.replace("max_steps: 12", "max_steps: 2")  # division blocked, two steps


def test_a_playground_step_answers_badges_the_ending_and_the_verdict_with_its_metrics() -> None:
    play = Playground()
    try:
        new = play.new(BLOCKS_DIV, "medium/1,2,6,6")
        combine = next(t for t in new["tools"] if t["name"] == "combine")
        assert combine["parameters"]["required"] == ["i", "j", "op"]  # the form is built from this schema
        assert combine["parameters"]["properties"]["op"]["enum"] == ["add", "sub", "mul", "div"]
        blocked = play.step(new["session"], '{"tool": "combine", "args": {"i": 0, "j": 1, "op": "div"}}')
        assert blocked["badges"][0]["cls"] == "blocked"
        assert blocked["badges"][0]["text"].startswith("contract")
        assert "blocked “division is disabled in this world”" in blocked["badges"][0]["text"]
        assert (blocked["terminated"], blocked["truncated"]) == (False, False)
        last = play.step(new["session"], "combine i=0 j=1 op=add")
        assert last["truncated"] is True and last["done"] is True  # the budget's second step
        assert last["verdict"]["success"] is False
        assert last["verdict"]["metrics"]["numbers"] == ["6", "6", "3"]  # 1 + 2 appended at the end
    finally:
        play.close()


def test_badge_html_is_its_parts_escaped() -> None:
    effect = {"layer": "0:contract", "kind": "contract", "action": "blocked", "reason": "<b>no</b>"}
    parts = badge_parts(effect)
    assert parts == Badge("blocked", "contract: blocked “<b>no</b>”", parts.title)
    assert "&lt;b&gt;no&lt;/b&gt;" in badge(effect) and "<b>" not in badge(effect)


def _step_html(step: StepRecord) -> str:
    t = Trajectory(key="k", spec_id="s", steps=(step,), stop="error")
    return pages.trajectory_html(steps.steps_page(trajectory_to_data(t), 0), 0, 1)


def test_a_trajectory_step_shows_its_env_error_tokens_latency_and_the_observation_diff() -> None:
    step = StepRecord(index=0, proposed=Action(tool="look", args={}), executed=Action(tool="look", args={}),
                      observation=Observation(text="a red door\nHint: 3 left"),
                      base_observation=Observation(text="a red door"),
                      error={"type": "EnvError", "message": "the page did not load"},
                      usage={"prompt_tokens": 1234, "completion_tokens": 5}, env_s=0.25,
                      effects=[{"layer": "0:contract", "kind": "contract", "observation": True}])
    html = _step_html(step)
    assert "<span class='tag bad env-error'" in html and "env error: the page did not load" in html
    assert "<tr class='step env-error'>" in html  # the whole row is marked too
    assert "1,234 prompt tokens" in html and "env 250 ms" in html
    assert "<pre class='seen'>a red door<mark class='ins'>\nHint: 3 left</mark></pre>" in html  # the layers' words
    assert "<span class='badge acted'" in html and "contract: changed the observation" in html


def test_a_step_without_records_shows_no_meta_and_no_error() -> None:
    html = _step_html(StepRecord(index=0, observation=Observation(text="x")))
    assert "step-meta" not in html and "env-error" not in html and "<mark" not in html


def test_a_yaml_error_is_marked_on_the_line_it_is_about() -> None:
    play = Playground()
    cases = {  # text -> the line a person would fix
        "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps 3\n  - kind: budget\n": 4,  # key without ':'
        "bridge: toy24\nlayers\n  - kind: budget\n": 2,
        'bridge: "toy24\nlayers: []\n': 1,  # the unclosed quote
        "bridge: toy24\nlayers: [\n": 2,  # not the blank line after the end
        "bridge: toy24\nlayers:\n  - kind: budget\n   max_steps: 3\n": 4,  # the misindented line itself
    }
    for text, line in cases.items():
        answer = play.check(text, build=False)
        assert [m["line"] for m in answer["markers"]] == [line], text


def test_yaml_line_without_a_place() -> None:
    assert editor.yaml_line("x", None) is None


def test_an_unknown_bridge_is_flagged_by_the_check_made_while_typing() -> None:
    answer = Playground().check("bridge: nosuchbridge\nlayers: []\n", build=False)
    assert answer["ok"] is False
    assert answer["markers"][0]["line"] == 1 and answer["markers"][0]["path"] == "$.bridge"
    assert "Unknown bridge 'nosuchbridge'" in answer["markers"][0]["message"]
