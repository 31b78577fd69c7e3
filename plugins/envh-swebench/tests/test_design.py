"""Designer templates: their layers build with envh.make and do what they say."""

from __future__ import annotations

import envh
from envh import Action, TaskRef, make_plugin_manager

TASK = TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")
RUN_TESTS = Action(tool="bash", args={"command": "python3 -m pytest -q tests"})


def _stack(instances_path, name, magnitude=None):
    info = make_plugin_manager().templates()[name]
    template = info.load()()
    base = envh.make({"bridge": "swebench", "config": {"instances": instances_path}})
    try:
        base.reset(task=TASK, seed=0)
        mags = template.magnitudes(base, TASK)
        layers = template.instantiate(base, TASK, mags[-1] if magnitude is None else magnitude)
    finally:
        base.close()
    return mags, envh.make({"bridge": "swebench", "config": {"instances": instances_path}, "layers": layers})


def test_templates_are_registered_for_the_bridge():
    templates = make_plugin_manager().templates()
    ours = {n: t for n, t in templates.items() if n.startswith("swebench.")}
    assert set(ours) == {"swebench.verify-tests", "swebench.truncate-output", "swebench.reveal-failing-tests"}
    assert all(t.bridge == "swebench" for t in ours.values())


def test_verify_tests_after_the_last_edit(instances_path, fix_action):
    mags, env = _stack(instances_path, "swebench.verify-tests", 2)
    with env:
        assert mags == [1, 2]
        env.reset(task=TASK, seed=0)
        env.step(RUN_TESTS)
        env.step(fix_action)
        refused = env.step(Action(tool="submit"))
        assert refused.info["error"]["type"] == "blocked" and "verify-tests" in refused.observation.text
        env.step(RUN_TESTS)
        # An edit through bash counts as much as one through the editor.
        env.step(Action(tool="bash", args={"command": "sed -i 's/Middle value/The middle value/' mathx/stats.py"}))
        sneaky = env.step(Action(tool="submit"))
        assert sneaky.info["error"]["type"] == "blocked"
        env.step(Action(tool="bash", args={"command": "python3 -m pytest --version"}))  # runs no test
        assert env.step(Action(tool="submit")).info["error"]["type"] == "blocked"
        env.step(RUN_TESTS)
        done = env.step(Action(tool="submit"))
        assert done.terminated and done.reward == 1.0


def test_truncate_output(instances_path):
    mags, env = _stack(instances_path, "swebench.truncate-output")
    with env:
        env.reset(task=TASK, seed=0)
        text = env.step(Action(tool="bash", args={"command": "seq 1 5000"})).observation.text
        assert text.startswith(f"[... output cut to its last {mags[-1]} characters ...]")
        assert text.rstrip().endswith("5000") and len(text) < mags[-1] + 100


def test_reveal_failing_tests(instances_path):
    mags, env = _stack(instances_path, "swebench.reveal-failing-tests")
    with env:
        assert mags == [1]
        first = env.reset(task=TASK, seed=0).observation.text
        assert "tests/test_stats.py::test_median_even" in first
        assert "test_median_even" not in env.step(Action(tool="bash", args={"command": "true"})).observation.text
