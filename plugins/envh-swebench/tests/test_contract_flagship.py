"""The paper's flagship contract, end to end through ``envh.make``: submit is refused
until the tests were run, with the git-hook style message."""

from __future__ import annotations

import envh
from envh import Action, TaskRef

MESSAGE = "git hook: pre-commit hook 'verify-tests' failed. Run the test suite before submitting."
CODE = (
    "def filter_action(action, state, memo):\n"
    "    if action.tool == 'submit' and not state['tests_run']:\n"
    f"        return Block(reason={MESSAGE!r})\n"
)
TASK = TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")


def test_submit_blocked_until_tests_ran(instances_path, docker_client, fix_action):
    spec = {"bridge": "swebench", "config": {"instances": instances_path},
            "layers": [{"kind": "contract", "id": "verify-tests", "code": CODE}]}
    with envh.make(spec) as env:
        env.reset(task=TASK, seed=0)
        fix = env.step(fix_action)
        assert not fix.info.get("error")

        blocked = env.step(Action(tool="submit"))
        assert not blocked.terminated
        assert MESSAGE in blocked.observation.text
        assert blocked.info["error"]["type"] == "blocked"
        assert env.unwrapped.get_env_state()["submitted"] is False

        ran = env.step(Action(tool="bash", args={"command": "python3 -m pytest -q tests"}))
        assert "passed" in ran.observation.text
        state = env.unwrapped.get_env_state()
        assert state["tests_run"] and state["last_test_exit_code"] == 0

        done = env.step(Action(tool="submit"))
        assert done.terminated and done.reward == 1.0
        verdict = env.evaluate()
        assert verdict.success and verdict == env.unwrapped.evaluate()
