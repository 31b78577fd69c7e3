#!/usr/bin/env bash
# The whole test suite: sets up what it needs (dev/setup.sh), checks lint (ruff over the
# tree) and types (mypy on core, config in core/pyproject.toml), then runs every package's
# tests and the cross-package tests in one pytest session. ENVH_TEST_WORKERS=2 runs them on
# two parallel workers, each module whole on one (conftest.py): 23.5 min of tests on 2 cores;
# each such run so far found a test that the load (4-6) broke (each fixed since), so the
# default (0) runs them in this process until parallel runs stay green.
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
exec "$PY" -m pytest -n "${ENVH_TEST_WORKERS:-0}" --dist loadfile "$@"
