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
