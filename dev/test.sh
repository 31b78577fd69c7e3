#!/usr/bin/env bash
# The whole test suite: sets up what it needs (dev/setup.sh), checks lint (ruff over the
# tree) and types (mypy on core, config in core/pyproject.toml), then runs every package's
# tests and the cross-package tests in one pytest session, on ENVH_TEST_WORKERS parallel
# pytest-xdist workers (default 2: one per core of the machines this runs on), each module
# whole on one worker and the minutes-long ones first (conftest.py); ENVH_TEST_WORKERS=0
# runs them serially in this process.
# Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$ROOT/dev/setup.sh"
cd "$ROOT"
echo "envh test: ruff"
"$ROOT/.venv/bin/ruff" check core/src core/tests plugins bench tests
echo "envh test: mypy (core, envh-ui, envh-adaptive)"
(cd core && "$ROOT/.venv/bin/mypy" src/envh ../plugins/envh-ui/src/envh_ui ../plugins/envh-adaptive/src/envh_adaptive)
# free disk where the checkout and the tests' temporary files live (a full disk fails
# everything after it: the figure makes such a run diagnosable)
df -h "$ROOT" "${TMPDIR:-/tmp}" | sed 's/^/envh test: disk: /'
exec "$PY" -m pytest -n "${ENVH_TEST_WORKERS:-2}" --dist loadfile "$@"
