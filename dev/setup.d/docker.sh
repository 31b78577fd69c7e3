# Docker for envh-swebench: sourced by the test script with $PY (the venv's python) set
# and the repository root as the working directory. Idempotent and quick on a machine
# that already ran it (dev/system.sh, run before this, has done 1, 2 and 4):
#   1. apt-get install docker.io and debootstrap when missing (Debian, run as root);
#   2. start dockerd in the background when no daemon answers (no systemd here) and
#      wait for its socket;
#   3. pip install -e plugins/envh-swebench;
#   4. build the test images (the debootstrap base is built once and kept; the small
#      instance image comes from docker's layer cache).

envh_docker_setup() {
  local need=()
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  if [ "${#need[@]}" -gt 0 ]; then
    echo "docker.sh: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${need[@]}" ca-certificates iptables debian-archive-keyring xz-utils >/dev/null || return 1
  fi

  bash dev/dockerd.sh || return 1

  # envh itself must come from this checkout, never from an index; dev/setup.sh has
  # usually installed both already, and then this costs one import.
  "$PY" -c "import envh" 2>/dev/null || "$PY" -m pip install -q -e core || return 1
  "$PY" -c "import envh_swebench.bridge, swebench.harness.grading" 2>/dev/null \
    || "$PY" -m pip install -q -e plugins/envh-swebench || return 1

  bash plugins/envh-swebench/tests/images/build.sh || return 1
}

envh_docker_setup
