"""Repository-wide test policy: in CI (``CI=true``) nothing may skip.

Tests skip locally when a system part (dockerd, alfworld, ray, a model) is missing, to
keep a partial checkout usable. In CI the test script installs and starts every part, so
a skip there means a part is missing: it is reported as a failure instead.
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


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
#: built image) assume; see ``pytest_collection_modifyitems``.
SPLIT_MODULES = frozenset({
    "plugins/envh-experiment/tests/test_experiment.py",
    "plugins/envh-grpo/tests/test_gpu_paths.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's ``--dist loadgroup`` (dev/test.sh): each module is one group,
    run whole by one worker, except ``SPLIT_MODULES``; a test's own ``xdist_group`` mark
    wins. Without xdist this changes nothing."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    root = config.rootpath
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        try:
            module = item.path.relative_to(root).as_posix()
        except ValueError:
            module = str(item.path)
        if module not in SPLIT_MODULES:
            item.add_marker(pytest.mark.xdist_group(name=module))
