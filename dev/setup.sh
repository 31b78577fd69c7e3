#!/usr/bin/env bash
# Set up everything envh's tests and main job need on a fresh Debian machine:
# a virtualenv in .venv, core and every plugin installed editable, the system parts
# (dev/system.sh: Docker and the test images, Chromium, LibreOffice, bubblewrap; beside the
# pip work) and each plugin's own parts (dev/setup.d/*.sh: its extras, the local models).
# Idempotent: a stamp of the inputs skips the pip work when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Rollout workers (pool, Ray) run as nobody and the contract jail as uid 65534: both read the
# installation under the checkout, so a checkout made by `mktemp -d` (mode 0700) must open up
if [ "$(id -u)" = 0 ] && [ -z "$(find "$ROOT" -maxdepth 0 -perm -o+x)" ]; then
  chmod o+rx "$ROOT"
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

# Build tools first: some plugin dependencies ship as sdists (ALFWorld's planner, jericho).
missing=()
for tool in gcc g++ cmake make; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "envh setup: apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    gcc g++ cmake make libc6-dev python3-venv >/dev/null
fi

# The system parts (Debian packages, dockerd, the test images: dev/system.sh) never touch the
# venv: they install in the background beside the pip work, and the snippets wait for them.
# A set-up that stops early (a pip failure, Ctrl-C) still waits for them, so that no apt or
# image build goes on unseen. Where the venv's Python is Debian's own (/usr), its packages
# could be upgraded under pip (python3-uno pins libpython3.x): there they run first.
system_log="$(mktemp /tmp/envh-setup-system.XXXXXX)"
bash dev/system.sh >"$system_log" 2>&1 &
system_pid=$!
envh_system_wait() {
  [ -n "${system_pid:-}" ] || return 0
  local pid=$system_pid
  system_pid=
  trap - EXIT
  if ! wait "$pid"; then
    echo "envh setup: the system parts (dev/system.sh) failed; the end of its log ($system_log):" >&2
    tail -30 "$system_log" >&2
    return 1
  fi
  sed 's/^/envh setup: /' "$system_log"
  rm -f "$system_log"
}
trap 'echo "envh setup: stopped; waiting for the system parts (dev/system.sh, log $system_log)" >&2
      envh_system_wait || true' EXIT
base_python="$(readlink -f "$(command -v python3)")"
[ -f .venv/pyvenv.cfg ] && base_python="$(sed -n 's/^home = //p' .venv/pyvenv.cfg)"
case "$base_python" in
  /usr/*) envh_system_wait || exit 1 ;;
esac

if [ ! -x .venv/bin/python ]; then
  echo "envh setup: creating .venv"
  python3 -m venv .venv
fi
export PY="$ROOT/.venv/bin/python"
export PATH="$ROOT/.venv/bin:$PATH"

# pip's "Location ... is ignored" notes about optional local indexes are noise here
pip_install() { "$PY" -m pip install -q "$@" 2> >(grep -v "is neither a file nor a directory" >&2); }

stamp=".venv/.envh-setup-stamp"
inputs="$(cat core/pyproject.toml plugins/*/pyproject.toml dev/setup.sh dev/setup.d/*.sh 2>/dev/null | sha256sum | cut -d' ' -f1)"
phase_start=$SECONDS
# one line per set-up phase with its time (CI's log shows where the set-up's minutes go)
phase_done() { echo "envh setup: $1 took $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
if [ "$(cat "$stamp" 2>/dev/null)" != "$inputs" ]; then
  echo "envh setup: installing packages"
  pip_install -U pip setuptools wheel
  pip_install -e "core[test,openai,export,ray]" nox ruff mypy types-PyYAML
  # one resolve for every plugin: some depend on others of this repository (envh-experiment
  # on envh-grpo and envh-rigger), which are not on the package index
  plugin_args=()
  for plugin in plugins/*/; do
    [ -f "$plugin/pyproject.toml" ] && plugin_args+=(-e "$plugin")
  done
  pip_install "${plugin_args[@]}"
  fresh=1
else
  fresh=0
fi
phase_done packages

envh_system_wait || exit 1
phase_done "waiting for the system parts"

# Per-plugin parts. Each snippet is idempotent and cheap when done.
for snippet in dev/setup.d/*.sh; do
  [ -f "$snippet" ] || continue
  echo "envh setup: $(basename "$snippet")"
  # shellcheck disable=SC1090
  source "$snippet"
  phase_done "$(basename "$snippet" .sh)"
done
[ "$fresh" = 1 ] && echo "$inputs" > "$stamp"
true
