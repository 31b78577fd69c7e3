"""MiniWoB++ in Chromium: scripted solvers succeed, wrong actions fail, seeds reproduce,
every registered task resets (through env.reset)."""

from __future__ import annotations

import re

import pytest
from envh import Action, TaskRef
from envh_webarena.axtree import find_bid as bid_of
from envh_webarena.axtree import find_bids as bids_of


def A(tool: str, **args: object) -> Action:  # noqa: N802 - reads like the action
    return Action(tool=tool, args=args)


def T(name: str) -> TaskRef:  # noqa: N802
    return TaskRef(suite="miniwob", instance_id=name)


def quoted(goal: str) -> list[str]:
    return re.findall(r'"([^"]+)"', goal)


def solve(name: str, text: str, goal: str) -> list[Action]:
    """A scripted solver reading only the first observation."""
    q = quoted(goal)
    if name == "click-button":
        return [A("click", bid=bid_of(text, "button", q[0]))]
    if name == "click-link":
        return [A("click", bid=bid_of(text, "StaticText", q[0]))]
    if name == "enter-text":
        return [A("fill", bid=bid_of(text, "textbox"), value=q[0]), A("click", bid=bid_of(text, "button", "Submit"))]
    if name == "enter-password":
        boxes = bids_of(text, "textbox")
        return [A("fill", bid=boxes[0], value=q[0]), A("fill", bid=boxes[1], value=q[0]),
                A("click", bid=bid_of(text, "button", "Submit"))]
    if name == "login-user":
        boxes = bids_of(text, "textbox")
        return [A("fill", bid=boxes[0], value=q[0]), A("fill", bid=boxes[1], value=q[1]),
                A("click", bid=bid_of(text, "button", "Login"))]
    if name == "click-checkboxes":
        wanted = re.match(r"Select (.*) and click Submit", goal).group(1)  # type: ignore[union-attr]
        names = [] if wanted == "nothing" else [w.strip() for w in wanted.split(",")]
        return [A("click", bid=bid_of(text, "checkbox", n)) for n in names] + [
            A("click", bid=bid_of(text, "button", "Submit"))]
    if name == "choose-list":
        item = re.match(r"Select (.*) from the list", goal).group(1)  # type: ignore[union-attr]
        return [A("select_option", bid=bid_of(text, "combobox"), options=item),
                A("click", bid=bid_of(text, "button", "Submit"))]
    if name == "click-tab":
        tab = re.match(r"Click on (Tab #\d+)", goal).group(1)  # type: ignore[union-attr]
        return [A("click", bid=bid_of(text, "link", tab))]
    if name == "click-dialog":
        return [A("click", bid=bid_of(text, "button", "Close"))]
    raise AssertionError(name)


SOLVED = ["click-button", "click-link", "enter-text", "enter-password", "login-user", "click-checkboxes",
          "choose-list", "click-tab", "click-dialog"]


@pytest.fixture(scope="module")
def env():
    from envh_webarena.miniwob import MiniwobEnv

    e = MiniwobEnv()
    yield e
    e.close()


@pytest.mark.parametrize("name", SOLVED)
def test_scripted_solver_succeeds(env, name: str) -> None:
    for seed in (11,):
        first = env.reset(task=T(name), seed=seed).observation
        assert first.data["goal"] and first.text.startswith("Goal: " + first.data["goal"])
        for action in solve(name, first.text, first.data["goal"]):
            resp = env.step(action)
            assert not resp.info.get("error"), resp.info
        assert resp.terminated and resp.reward == 1.0
        verdict = env.evaluate()
        assert verdict.success and verdict.score == 1.0 and verdict.metrics["raw_reward"] == 1.0


def test_wrong_actions_fail(env) -> None:
    first = env.reset(task=T("click-button"), seed=3).observation
    target = quoted(first.data["goal"])[0]
    others = [b for b in re.findall(r"\[(\w+)\] button '([^']*)'", first.text) if b[1] != target]
    resp = env.step(A("click", bid=others[0][0]))
    assert resp.terminated and resp.reward < 0
    assert not env.evaluate().success
    first = env.reset(task=T("enter-text"), seed=3).observation
    env.step(A("fill", bid=bid_of(first.text, "textbox"), value="definitely wrong"))
    resp = env.step(A("click", bid=bid_of(first.text, "button", "Submit")))
    assert resp.terminated and not env.evaluate().success


def test_seeds_reproduce_instances(env) -> None:
    goals = [env.reset(task=T("click-checkboxes"), seed=s).observation.data["goal"] for s in (1, 2, 1)]
    assert goals[0] == goals[2] != goals[1]
    a = env.reset(task=T("choose-list"), seed=5).observation.text
    assert env.reset(task=T("choose-list"), seed=5).observation.text == a


def test_unknown_task_is_named(env) -> None:
    from envh import errors

    with pytest.raises(errors.UnknownNameError, match="click-buton"):
        env.reset(task=T("click-buton"))


@pytest.mark.slow
def test_every_registered_task_resets() -> None:
    """Every registered task resets through the bridge (``env.reset``: fresh context, the
    page from the wheel, seeded start, goal, tree; about 0.5 s a task): its first
    observation has a goal and an accessibility tree."""
    from envh_webarena.miniwob import MiniwobEnv

    env = MiniwobEnv()
    refs = env.list_tasks()
    assert len(refs) >= 125
    failures = []
    try:
        for ref in refs:
            try:
                obs = env.reset(task=ref, seed=0).observation
                if not obs.data["goal"] or "RootWebArea" not in obs.text:
                    failures.append((ref.instance_id, obs.data["goal"], obs.text[:200]))
            except Exception as exc:  # noqa: BLE001 - collect every failing task
                failures.append((ref.instance_id, repr(exc)[:200]))
    finally:
        env.close()
    assert not failures, failures


def test_iframe_content_has_frame_prefixed_bids(env) -> None:
    """flight.* tasks run their form in an iframe: its elements carry BrowserGym's
    frame-prefixed bids and take actions like the main frame's."""
    obs = env.reset(task=T("flight.AA"), seed=1).observation
    to_box = bid_of(obs.text, "textbox", "To , required.")
    assert to_box.startswith("a")
    resp = env.step(A("fill", bid=to_box, value="Boston"))
    assert not resp.info.get("error")
    assert re.search(r"textbox 'To , required\.', value='Boston'", resp.observation.text)


def test_partial_credit_is_the_reward_but_not_success_and_binary_mode_pays_minus_one() -> None:
    """click-checkboxes seed 8 wants 2 of 6 boxes: Submit with none checked scores raw 0.33.
    That is the step reward (the task's own), not a success; ``reward: binary`` pays -1."""
    from envh import errors
    from envh_webarena.miniwob import MiniwobEnv

    for mode, expected in (("raw", None), ("binary", -1.0)):
        env = MiniwobEnv(tasks=["click-checkboxes"], reward=mode)
        try:
            text = env.reset(task=T("click-checkboxes"), seed=8).observation.text
            resp = env.step(A("click", bid=bid_of(text, "button", "Submit")))
            verdict = env.evaluate()
            assert resp.terminated and 0 < verdict.metrics["raw_reward"] < 1
            assert not verdict.success
            assert resp.reward == (verdict.metrics["raw_reward"] if expected is None else expected)
        finally:
            env.close()
    with pytest.raises(errors.SpecError, match="reward"):
        MiniwobEnv(tasks=["click-checkboxes"], reward="shaped")
    with pytest.raises(errors.SpecError, match="success_threshold"):
        MiniwobEnv(tasks=["click-checkboxes"], success_threshold=0)


def test_flight_form_loaded_ahead_is_the_episodes_form() -> None:
    """A flight task's next episode gets its form loaded ahead into the frame (spare.py's
    warm step): the start keeps it, the episode is the seed's (same goal and same page as a
    start that loads the form itself) and the form reports to the task (Search with the
    required fields empty ends the episode with raw reward -1)."""
    from envh_webarena.miniwob import MiniwobEnv
    from envh_webarena.runtime import shared_runtime

    env = MiniwobEnv(tasks=["flight.AA"])
    runtime = shared_runtime()
    try:
        runtime.make_ahead = False  # a context made at reset: the start loads the form itself
        try:
            cold = env.reset(task=T("flight.AA"), seed=4).observation
        finally:
            runtime.make_ahead = True
        assert env.session.page.evaluate("window.__envhWarm === true") is False
        env.reset(task=T("flight.AA"), seed=9)  # the task repeats: the next context is preloaded
        warm = env.reset(task=T("flight.AA"), seed=4).observation
        assert env.session.page.evaluate("window.__envhWarm === true") is True
        # the form was loaded before the episode started, and not again by the start
        env.session.page.wait_for_timeout(500)  # a second load the start set off would be over
        assert env.session.page.evaluate("window.__envhFrameLoads") == 1
        assert warm.data["goal"] == cold.data["goal"] and warm.text == cold.text
        resp = env.step(A("click", bid=bid_of(warm.text, "button", "Search")))
        assert resp.terminated and env.evaluate().metrics["raw_reward"] == -1.0
        other = env.reset(task=T("flight.AA"), seed=5).observation  # another seed, another question
        assert other.data["goal"] != cold.data["goal"]
    finally:
        env.close()


def test_unicode_test_shows_its_labels_in_utf8(env) -> None:
    """The task server declares UTF-8: unicode-test's labels read as written, and the one
    the goal names can be clicked."""
    first = env.reset(task=T("unicode-test"), seed=3).observation
    target = quoted(first.data["goal"])[0]
    assert target == "确定" and "button '确定'" in first.text
    assert "ç¡®" not in first.text and "Ã" not in first.text
    resp = env.step(A("click", bid=bid_of(first.text, "button", target)))
    assert resp.terminated and env.evaluate().success


def test_drag_box_is_solved_with_drag_and_drop(env) -> None:
    """BrowserGym's drag_and_drop(from_bid, to_bid): the small box onto the large one."""
    for seed in (0, 5):
        first = env.reset(task=T("drag-box"), seed=seed).observation
        resp = env.step(A("drag_and_drop", from_bid=bid_of(first.text, "StaticText", "s"),
                          to_bid=bid_of(first.text, "StaticText", "L")))
        assert not resp.info.get("error"), resp.info
        resp = env.step(A("click", bid=bid_of(resp.observation.text, "button", "Submit")))
        assert resp.terminated and env.evaluate().success, seed


def test_drag_box_is_solved_with_mouse_coordinates(env) -> None:
    """BrowserGym's coordinate actions (viewport pixels, as a screenshot shows them)."""
    first = env.reset(task=T("drag-box"), seed=3).observation
    small, large = env.session.page.evaluate("""() => ['#draggableSmall', '#draggableLarge'].map(s => {
        const r = document.querySelector(s).getBoundingClientRect();
        return [r.x + r.width / 2, r.y + r.height / 2]; })""")
    for tool, args in [("mouse_down", {"x": small[0], "y": small[1]}),
                       ("mouse_move", {"x": (small[0] + large[0]) / 2, "y": (small[1] + large[1]) / 2}),
                       ("mouse_move", {"x": large[0], "y": large[1]}),
                       ("mouse_up", {"x": large[0], "y": large[1]})]:
        assert not env.step(A(tool, **args)).info.get("error")
    resp = env.step(A("click", bid=bid_of(first.text, "button", "Submit")))
    assert resp.terminated and env.evaluate().success


@pytest.mark.parametrize("threshold", [1.0, 0.8])
def test_success_is_miniwobs_own_binary_reward(threshold: float) -> None:
    """Success equals ``miniwob.reward.get_thresholded_reward`` (``get_binary_reward`` at 1)
    of the installed package on the task's raw reward, partial credit included."""
    from envh_webarena.miniwob import MiniwobEnv
    from miniwob.reward import get_binary_reward, get_thresholded_reward

    env = MiniwobEnv(tasks=["click-button"], success_threshold=threshold)
    for done in (True, False):
        for raw in (1.0, 0.99, 0.8, 0.33, 0.1, 0.0, -0.5, -1.0):
            env.status = {"done": done, "raw": raw, "reward": raw, "reason": None}
            meta = {"done": done, "raw_reward": raw, "env_reward": raw}
            official = get_thresholded_reward(meta, threshold=threshold)
            assert env.evaluate().success == (official == 1.0), (done, raw)
            if threshold == 1.0:
                assert official == get_binary_reward(meta)
