"""Repository-wide test policy: in CI (``CI=true``) nothing may skip.

Tests skip locally when a system part (dockerd, alfworld, ray, a model) is missing, to
keep a partial checkout usable. In CI the test script installs and starts every part, so
a skip there means a part is missing: it is reported as a failure instead.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Parallel workers share the machine's cores: a torch (OpenMP/MKL) process that starts
    # one thread per core beside another busy worker waits on its slowest thread at every
    # matmul. Measured on 2 cores beside one busy process: GRPO training 101 s with two
    # threads, 62 s with one (idle: 43 and 61). Set before any test imports torch, and
    # inherited by the processes tests start (a trainer, DeepSpeed ranks, a vLLM server).
    # A count the caller set for any of them is theirs: MKL's would override OMP's.
    _THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    if not any(name in os.environ for name in _THREADS):
        os.environ.update(dict.fromkeys(_THREADS, "1"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every system part must be present: {reason}"


#: Modules whose tests run on any parallel worker, one by one: long, independent tests
#: (each in its own tmp_path, no fixture wider than a test). Every other module runs whole
#: on one worker, as its module- and session-wide resources (a vLLM server, a Chromium, a
#: built image, a DeepSpeed run) assume; see ``pytest_xdist_make_scheduler``.
SPLIT_MODULES = frozenset({
    "plugins/envh-experiment/tests/test_experiment.py",
    "plugins/envh-grpo/tests/test_gpu_paths.py",
})
#: Modules that take minutes (a DeepSpeed or vLLM start, GRPO training on CPU), started
#: first so that none of them is left to run alone at the end. Every other module follows
#: in xdist's order (most tests first).
FIRST = (
    "plugins/envh-grpo/tests/test_deepspeed.py",
    "plugins/envh-experiment/tests/test_experiment.py",
    "plugins/envh-grpo/tests/test_gpu_paths.py",
    "core/tests/vllm/test_vllm_policy.py",
    "core/tests/vllm/test_vllm_outage.py",
    "plugins/envh-grpo/tests/test_vllm.py",
    "plugins/envh-webarena/tests/test_runtime.py",
    "plugins/envh-webarena/tests/test_miniwob.py",
    "plugins/envh-rigger/tests/test_alfworld_slipper.py",
    "tests/test_wheels.py",
)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under pytest-xdist (``ENVH_TEST_WORKERS`` in dev/test.sh): each test module is one unit of work,
    run whole by one worker, except ``SPLIT_MODULES``, whose tests are spread one by one.
    (xdist's own ``loadgroup`` marks have no effect under pytest 9: the group rides on a
    node id attribute pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPLIT_MODULES else module

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is complete at the first assignment
                self.ordered = True
                rank = {module: i for i, module in enumerate(FIRST)}
                units = sorted(self.workqueue.items(), key=lambda unit: rank.get(unit[0].split("::")[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return ModuleScheduling(config, log)
