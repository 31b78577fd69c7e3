# ALFWorld for envh-alfworld: sourced by the test script with $PY (the venv's python) set
# and the repository root as the working directory. Idempotent and quick on a machine
# that already ran it:
#   1. apt-get install the C/C++ toolchain when missing: alfworld's dependencies
#      fast-downward-textworld (cmake) and jericho (make, gcc) ship as sdists only;
#   2. pip install -e plugins/envh-alfworld, which pulls alfworld 0.4.x and
#      textworld[pddl] (the TextWorld engine and fast-downward, the planner the game
#      builder uses for its expert walkthroughs).
# No game data is downloaded: the tests build their own ALFWorld games.

envh_alfworld_setup() {
  local py="${PY:-python3}"
  if "$py" -c "import alfworld, textworld, fast_downward, envh_alfworld" >/dev/null 2>&1 \
      && "$py" -m pip show -q envh-alfworld >/dev/null 2>&1; then
    return 0
  fi
  local need=()
  command -v gcc >/dev/null 2>&1 || need+=(gcc)
  command -v g++ >/dev/null 2>&1 || need+=(g++)
  command -v cmake >/dev/null 2>&1 || need+=(cmake)
  command -v make >/dev/null 2>&1 || need+=(make)
  if [ "${#need[@]}" -gt 0 ]; then
    echo "alfworld.sh: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${need[@]}" libc6-dev >/dev/null || return 1
  fi
  local targets=(-e plugins/envh-alfworld)
  # The plugin depends on envh; take the repository's core rather than a registry's.
  "$py" -c "import envh" >/dev/null 2>&1 || targets=(-e core "${targets[@]}")
  echo "alfworld.sh: pip install ${targets[*]} (builds fast-downward; a few minutes the first time)"
  "$py" -m pip install -q "${targets[@]}" || return 1
  "$py" -c "import alfworld, textworld, fast_downward" || return 1
}

envh_alfworld_setup || { echo "alfworld.sh: setup failed" >&2; return 1 2>/dev/null || exit 1; }
