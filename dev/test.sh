#!/usr/bin/env bash
# The whole test suite: sets up what it needs (dev/setup.sh), then runs every package's
# tests and the cross-package tests in one pytest session. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$ROOT/dev/setup.sh"
cd "$ROOT"
exec "$PY" -m pytest "$@"
