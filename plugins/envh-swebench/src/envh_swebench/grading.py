"""The sealed verifier: grade a patch in a fresh container with swebench's own code.

It follows ``swebench.harness.run_evaluation``: apply the patch (trying SWE-bench's
apply commands in turn), run the instance's eval script (which applies the test patch
and runs the tests between the start/end markers), then hand the log to
``swebench.harness.grading.get_eval_report`` and its registered log parser. The
episode container is never used, so nothing the policy left behind can leak in.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from envh import EvaluationResult, errors

from .containers import Limits, Sandbox
from .instances import Instance

PATCH_PATH = "/tmp/patch.diff"  # swebench.harness.constants.CONTAINER_PATCH_FILE
FALLBACK_APPLY = ["git apply --verbose", "git apply --verbose --3way",
                  "git apply --verbose --reject", "patch --batch --forward --fuzz=5 -p1 -i"]
LOG_LIMIT = 4_000_000


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
    constants, _, _, _ = _swebench()
    fail_only = inst.repo in getattr(constants, "FAIL_ONLY_REPOS", set())
    return {**inst.raw, "instance_id": inst.instance_id, "image": inst.image, "repo": inst.repo,
            "version": inst.version, "FAIL_TO_PASS": inst.fail_to_pass,
            "PASS_TO_PASS": inst.pass_to_pass, "eval_script": inst.eval_script(),
            "log_parser": inst.raw.get("log_parser") or "parse_log_pytest",
            "eval_type": inst.raw.get("eval_type") or ("fail_only" if fail_only else "pass_and_fail")}


def _apply(box: Sandbox, patch: str, apply_cmds: list[str]) -> tuple[bool, str]:
    box.write_file(PATCH_PATH, patch.encode())
    out = ""
    for attempt, cmd in enumerate(apply_cmds):
        if attempt:  # a failed attempt (notably --reject) can leave partial state
            box.run("git checkout -- . ; git clean -fdq", timeout=120, limit=4000)
        res = box.run(f"{cmd} {PATCH_PATH}", timeout=120, limit=20000)
        out = res["output"]
        if res["exit_code"] == 0:
            return True, out
    check = box.run(f"git apply --check --reverse {PATCH_PATH}", timeout=120, limit=4000)
    return check["exit_code"] == 0, out


def grade(client: Any, inst: Instance, patch: str | None, *, limits: Limits,
          timeout: float = 1800) -> EvaluationResult:
    """Resolved = every FAIL_TO_PASS and PASS_TO_PASS test passes, per swebench."""
    constants, grading, utils, apply_cmds = _swebench()
    row = swebench_row(inst)
    spec = utils.make_test_spec(row)
    prediction = {"instance_id": inst.instance_id, "model_name_or_path": "envh", "model_patch": patch}
    log: list[str] = []
    metrics: dict[str, Any] = {"instance_id": inst.instance_id, "patch_chars": len(patch or "")}
    box = Sandbox.start(client, inst.image, workdir=inst.workdir, limits=limits,
                        instance_id=inst.instance_id, purpose="eval")
    try:
        if patch and patch.strip():
            applied, out = _apply(box, patch, apply_cmds)
            log.append(f"{constants.APPLY_PATCH_PASS if applied else constants.APPLY_PATCH_FAIL}:\n{out}")
            metrics["patch_applied"] = applied
        if metrics.get("patch_applied", True):
            box.write_file("/eval.sh", spec.eval_script.encode(), mode=0o755)
            res = box.run("/bin/bash /eval.sh", timeout=timeout, limit=LOG_LIMIT)
            log.append(res["output"])
            metrics["tests_timed_out"] = res["timed_out"]
            if res["timed_out"]:
                log.append(f"{constants.TESTS_TIMEOUT}\n\nTimeout error: {int(timeout)} seconds exceeded.")
            state = box.status()
            if state.get("OOMKilled") or state.get("Status") != "running":
                raise box.infra_error("the evaluation container stopped while the tests ran")
    finally:
        box.close()
    with tempfile.TemporaryDirectory(prefix="envh-swebench-eval-") as tmp:
        log_path = Path(tmp) / "test_output.txt"
        log_path.write_text("\n".join(log))
        report = grading.get_eval_report(spec, prediction, str(log_path), include_tests_status=True)
    entry = report[inst.instance_id]
    if entry.get("infra_failure"):
        raise errors.InfraError(
            f"Evaluating {inst.instance_id} hit an environment failure "
            f"({entry.get('infra_failure_reason')}), not a verdict on the patch.")
    status = entry.get("tests_status") or {}
    f2p, p2p = status.get(constants.FAIL_TO_PASS, {}), status.get(constants.PASS_TO_PASS, {})
    resolved = bool(entry.get("resolved"))
    metrics.update(
        resolved=resolved, patch_exists=bool(entry.get("patch_exists")),
        patch_successfully_applied=bool(entry.get("patch_successfully_applied")),
        FAIL_TO_PASS={"success": list(f2p.get("success", [])), "failure": list(f2p.get("failure", []))},
        PASS_TO_PASS={"success": list(p2p.get("success", [])), "failure": list(p2p.get("failure", []))},
        fail_to_pass_rate=grading.compute_fail_to_pass(status) if status else 0.0,
        pass_to_pass_rate=grading.compute_pass_to_pass(status) if status else 0.0,
        test_exit_code=grading.parse_test_exit_code("\n".join(log)))
    return EvaluationResult(success=resolved, score=1.0 if resolved else 0.0, metrics=metrics)
