"""The sealed verifier: grade a patch in a fresh container with swebench's own code.

It follows ``swebench.harness.run_evaluation.run_instance``: a container from the
instance image (as root, no resource limits unless configured), the patch applied with
swebench's apply commands in turn, the instance's eval script run as ``/bin/bash
/eval.sh``, and the whole output handed to ``swebench.harness.grading.get_eval_report``
with the TestSpec ``make_test_spec`` builds from the row. The output is read on the host
from the exec's stream, as ``exec_run_with_timeout`` reads it: the tests write to pipes
that code under test cannot seek or rewrite (a log file in the container could be
truncated and replaced by the patch's root code). It is kept whole, never cut in the
middle; a log over ``LOG_MAX_BYTES`` is refused. As upstream, a patch that does not
apply or tests that time out are errors, not a parsed verdict: they grade unresolved
with ``metrics["error"]`` saying which. The episode container is never used, so nothing
the policy left behind can leak in.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import Any

import attrs
import docker
from envh import EvaluationResult, errors

from . import logwitness
from .containers import Limits, Sandbox
from .instances import Instance, created_files

PATCH_PATH = "/tmp/patch.diff"  # swebench.harness.constants.CONTAINER_PATCH_FILE
FALLBACK_APPLY = ["git apply --verbose", "git apply --verbose --3way",
                  "git apply --verbose --reject", "patch --batch --forward --fuzz=5 -p1 -i"]
LOG_MAX_BYTES = 512 * 2**20  # a larger test log is refused, never shortened


def _swebench() -> tuple[Any, Any, Any, list[str]]:
    """swebench's grading entry points, imported on first use (it is heavy)."""
    from swebench.harness import constants, grading, utils
    try:
        from swebench.harness.run_evaluation import GIT_APPLY_CMDS as apply_cmds
    except ImportError:  # older layouts keep the list elsewhere; the commands are stable
        apply_cmds = FALLBACK_APPLY
    return constants, grading, utils, list(apply_cmds)


def swebench_row(inst: Instance) -> dict[str, Any]:
    """The instance as ``swebench.harness.utils.make_test_spec`` expects it."""
    return {**inst.raw, "instance_id": inst.instance_id, "image": inst.image, "repo": inst.repo,
            "version": inst.version, "FAIL_TO_PASS": inst.fail_to_pass,
            "PASS_TO_PASS": inst.pass_to_pass, "eval_script": inst.eval_script(),
            "log_parser": inst.log_parser, "eval_type": inst.eval_type}


def make_spec(inst: Instance) -> Any:
    """swebench's own TestSpec for the instance."""
    _, _, utils, _ = _swebench()
    return utils.make_test_spec(swebench_row(inst))


def _apply(box: Sandbox, patch: str, apply_cmds: list[str]) -> tuple[bool, str]:
    box.write_file(PATCH_PATH, patch.encode())
    out = ""
    for attempt, cmd in enumerate(apply_cmds):
        if attempt:  # a failed attempt (notably --reject) can leave partial state
            box.run("git checkout -- . ; git clean -fd", timeout=120, limit=4000)
        res = box.run(f"{cmd} {PATCH_PATH}", timeout=120, limit=20000)
        out = res["output"]
        if res["exit_code"] == 0:
            return True, out
    check = box.run(f"git apply --check --reverse {PATCH_PATH}", timeout=120, limit=4000)
    return check["exit_code"] == 0, out


def contradictions(inst: Instance, log: str) -> dict[str, Any]:
    """Signs that code under test printed result lines of its own (see ``logwitness``):
    empty for an honest log. A patch that rewrites the repository's own test runner so
    the real result is never printed is not caught: nothing in the log tells it apart."""
    graded = set(inst.fail_to_pass) | set(inst.pass_to_pass)
    return logwitness.forgery_signs(log, parser_name=inst.log_parser, spec=make_spec(inst), graded=graded)


def report_from_log(inst: Instance, patch: str | None, log: str, *,
                    metrics: dict[str, Any] | None = None) -> EvaluationResult:
    """Grade a recorded test log (what ``run_instance`` writes to test_output.txt) with
    swebench's TestSpec, log parser and report code: the verdict is swebench's, with one
    refusal beyond it. A log with result lines the test runner cannot have printed
    (``contradictions``) is unresolved whatever swebench says, and swebench's verdict is
    kept in ``metrics["swebench_resolved"]``."""
    constants, grading, _, _ = _swebench()
    spec = make_spec(inst)
    prediction = {"instance_id": inst.instance_id, "model_name_or_path": "envh", "model_patch": patch}
    out: dict[str, Any] = {"instance_id": inst.instance_id, "patch_chars": len(patch or ""),
                           "log_parser": spec.log_parser, "eval_type": spec.eval_type, **(metrics or {})}
    with tempfile.TemporaryDirectory(prefix="envh-swebench-eval-") as tmp:
        log_path = Path(tmp) / "test_output.txt"
        log_path.write_text(log)
        report = grading.get_eval_report(spec, prediction, str(log_path), include_tests_status=True)
    entry = report[inst.instance_id]
    if entry.get("infra_failure_reason"):
        # Advisory, as upstream: the log is unresolved either way. The patch under test ran
        # in that container, so "Cannot allocate memory", a line "Killed" or a missing
        # display may be its own doing; it is never an InfraError (which would replay it).
        out.update(infra_failure=bool(entry.get("infra_failure")),
                   infra_failure_reason=entry["infra_failure_reason"])
    status = entry.get("tests_status") or {}
    f2p, p2p = status.get(constants.FAIL_TO_PASS, {}), status.get(constants.PASS_TO_PASS, {})
    resolved = bool(entry.get("resolved"))
    out.update(
        resolved=resolved, patch_exists=bool(entry.get("patch_exists")),
        patch_successfully_applied=bool(entry.get("patch_successfully_applied")),
        FAIL_TO_PASS={"success": list(f2p.get("success", [])), "failure": list(f2p.get("failure", []))},
        PASS_TO_PASS={"success": list(p2p.get("success", [])), "failure": list(p2p.get("failure", []))},
        fail_to_pass_rate=grading.compute_fail_to_pass(status) if status else 0.0,
        pass_to_pass_rate=grading.compute_pass_to_pass(status) if status else 0.0,
        test_exit_code=grading.parse_test_exit_code(log))
    forged = contradictions(inst, log)
    if forged:
        out.update(resolved=False, swebench_resolved=resolved, error="contradictory_test_results",
                   contradictions=forged,
                   refused="the log holds test results the test runner cannot have printed")
        resolved = False
    return EvaluationResult(success=resolved, score=1.0 if resolved else 0.0, metrics=out)


def _unresolved(inst: Instance, patch: str | None, metrics: dict[str, Any]) -> EvaluationResult:
    return EvaluationResult(success=False, score=0.0, metrics={
        "instance_id": inst.instance_id, "patch_chars": len(patch or ""), "resolved": False,
        "patch_exists": patch is not None, "patch_successfully_applied": False,
        "log_parser": inst.log_parser, "eval_type": inst.eval_type, **metrics})


def _stopped(box: Sandbox) -> bool:
    """The container stopped or was OOM-killed; False when its state cannot be read (a
    daemon fault: the caller's InfraError stands)."""
    try:
        state = box.status()
    except (OSError, docker.errors.DockerException):
        return False
    return state.get("Status") != "running" or bool(state.get("OOMKilled"))


def grade(client: Any, inst: Instance, patch: str | None, *, limits: Limits,
          timeout: float = 1800) -> EvaluationResult:
    """Resolved = every FAIL_TO_PASS and PASS_TO_PASS test passes, per swebench."""
    constants, _, _, apply_cmds = _swebench()
    spec = make_spec(inst)
    metrics: dict[str, Any] = {}
    # No disk bound on evaluation (as run_instance): a read-only root with a tmpfs
    # workspace would also refuse the eval script where the harness puts it (/eval.sh).
    limits = attrs.evolve(limits, disk=None)
    box = Sandbox.start(client, inst.image, workdir=inst.workdir, limits=limits,
                        instance_id=inst.instance_id, purpose="eval")
    try:
        if patch and patch.strip():
            applied, out = _apply(box, patch, apply_cmds)
            metrics["patch_applied"] = applied
            if not applied:
                return _unresolved(inst, patch, {**metrics, "error": "patch_apply_failed",
                                                 "apply_output": f"{constants.APPLY_PATCH_FAIL}:\n{out[-4000:]}"})
            # A file the test patch creates that the patch made too: the eval script's
            # `git apply` of the test patch fails, as in run_instance, and the patch's own
            # file is what runs. Recorded, and refused below (see _own_test_files).
            present = _present(box, created_files(inst.test_patch))
            if present:
                metrics["test_files_preexisting"] = present
        box.write_file("/eval.sh", spec.eval_script.encode(), mode=0o755)
        # Who is at fault is decided by when it happened. Up to here no code of the patch
        # has run (git apply only), so a container that is not running now, or a daemon
        # that fails, is the environment's: InfraError, and the episode is replayed.
        # From here on the patch's code runs as root in this container: a container that
        # stops (killed, out of memory) is the patch's failure, as in run_instance (an
        # error, unresolved), never a replay.
        if box.status().get("Status") != "running":
            raise box.infra_error("the evaluation container stopped before the tests ran")
        try:
            res = box.capture(["/bin/bash", "/eval.sh"], timeout=timeout, max_bytes=LOG_MAX_BYTES)
        except errors.InfraError:
            if not _stopped(box):
                raise
            return _unresolved(inst, patch, {**metrics, "error": "eval_container_stopped"})
        metrics["tests_timed_out"] = res["timed_out"]
        if res["too_large"]:  # the tests printed it: never shortened, never a replay
            return _unresolved(inst, patch, {**metrics, "error": "test_log_too_large",
                                             "log_bytes": len(res["output"])})
        if not res["timed_out"] and _stopped(box):
            return _unresolved(inst, patch, {**metrics, "error": "eval_container_stopped"})
        log = res["output"].decode("utf-8", "replace")  # as exec_run_with_timeout decodes
    finally:
        box.close()
    if res["timed_out"]:  # run_instance: an EvaluationError, no report
        return _unresolved(inst, patch, {**metrics, "error": "tests_timed_out",
                                         "log_tail": f"{log[-2000:]}\n\nTimeout error: {int(timeout)} seconds exceeded."})
    result = report_from_log(inst, patch, log, metrics=metrics)
    return _own_test_files(result) if metrics.get("test_files_preexisting") else result


def _present(box: Sandbox, paths: list[str]) -> list[str]:
    """Which of ``paths`` exist in the container (a link counts, dangling or not)."""
    if not paths:
        return []
    quoted = " ".join(shlex.quote(f) for f in paths)
    res = box.run(f'for f in {quoted}; do if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\\0" "$f"; fi; done',
                  timeout=120, limit=200_000)
    return [f for f in res["output"].split("\0") if f]


def _own_test_files(result: EvaluationResult) -> EvaluationResult:
    """The patch made a file the test patch creates, so the benchmark's tests never ran:
    swebench grades the patch's own file in its place (resolved if that passes). Never
    rewarded here; swebench's verdict is kept in ``swebench_resolved``."""
    m = dict(result.metrics)
    m.update(resolved=False, swebench_resolved=bool(result.metrics.get("resolved")),
             error=m.get("error") or "test_patch_not_applied",
             refused="the patch created a file the test patch creates, so the test patch did not apply")
    return EvaluationResult(success=False, score=0.0, metrics=m)
