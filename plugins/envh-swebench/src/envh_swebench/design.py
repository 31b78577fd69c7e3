"""SWE-bench templates for designers (contributed with ``bridge="swebench"``).

Each has a ``name``, a ``direction`` (scaffold or pressure), ``magnitudes(env, task)``
(solvable settings, weakest first) and ``instantiate(env, task, magnitude)`` returning
env-spec layer dicts; contract code reads only ``get_env_state()`` fields.

* ``VerifyTests`` (pressure): the paper's flagship contract; submit is refused until
  tests ran (magnitude 2: until they ran after the last change to the working tree, made
  by the editor or by any bash command such as ``sed -i``).
* ``TruncateOutput`` (pressure): bash observations cut to their last N characters.
* ``RevealFailingTests`` (scaffold): the first observation names the first n
  FAIL_TO_PASS tests, which the hidden grader will run.
"""

from __future__ import annotations

from typing import Any

from envh import ActionableEnv, TaskRef

MESSAGE = "git hook: pre-commit hook 'verify-tests' failed. Run the test suite before submitting."

VERIFY_CODE = '''MESSAGE = {message!r}
AFTER_EDITS = {after_edits!r}


def filter_action(action, state, memo):
    if action.tool == "submit":
        if not state["tests_run"]:
            return Block(reason=MESSAGE)
        if AFTER_EDITS and state["edits"] and not state["tests_since_last_edit"]:
            return Block(reason=MESSAGE)
    return None
'''

TRUNCATE_CODE = '''LIMIT = {limit!r}


def filter_observation(observation, state, memo):
    text = observation.text
    if state["last_tool"] == "bash" and len(text) > LIMIT:
        return "[... output cut to its last " + str(LIMIT) + " characters ...]\\n" + text[-LIMIT:]
    return None
'''

REVEAL_CODE = '''TESTS = {tests!r}


def filter_observation(observation, state, memo):
    if state["steps"] == 0:
        return (observation.text + "\\n\\nThese tests must pass after your fix: "
                + ", ".join(TESTS) + ".")
    return None
'''


class VerifyTests:
    """Refuse submit until the tests ran (1) or ran after the last edit (2)."""

    name = "swebench.verify-tests"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [1, 2]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        code = VERIFY_CODE.format(message=MESSAGE, after_edits=int(magnitude) >= 2)
        return [{"kind": "contract", "id": f"verify-tests-{magnitude}", "code": code}]


class TruncateOutput:
    """Keep only the last N characters of bash output; N shrinks with the magnitude."""

    name = "swebench.truncate-output"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [4000, 2000, 1000, 500]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "contract", "id": f"truncate-output-{magnitude}",
                 "code": TRUNCATE_CODE.format(limit=int(magnitude))}]


class RevealFailingTests:
    """Name the first n FAIL_TO_PASS tests in the first observation."""

    name = "swebench.reveal-failing-tests"
    direction = "scaffold"

    def _tests(self, env: ActionableEnv, task: TaskRef) -> list[str]:
        instances = getattr(env.unwrapped, "instances", {})
        inst = instances.get(task.instance_id)
        return list(inst.fail_to_pass) if inst is not None else []

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return list(range(1, len(self._tests(env, task)) + 1))

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        tests = self._tests(env, task)[: int(magnitude)]
        return [{"kind": "contract", "id": f"reveal-failing-tests-{magnitude}",
                 "code": REVEAL_CODE.format(tests=tests)}]
