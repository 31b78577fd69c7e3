# LibreOffice and the workbook sandbox image for envh-office: sourced by dev/setup.sh with
# $PY (the venv's python) set and the repository root as the working directory.
# Idempotent and quick once done (dev/system.sh, run before this, has done 1 and 3):
#   1. apt-get install libreoffice-calc-nogui (headless Calc: recalculation) and python3-uno
#      (the system python drives one warm soffice per process) and bubblewrap (it runs
#      jailed: no network, no host files) when missing;
#   2. pip install -e plugins/envh-office when it does not import;
#   3. build envh-office/sandbox:bookworm (python3 + openpyxl + pandas) FROM the
#      debootstrap base image docker.sh builds; docker's layer cache makes a re-run instant.

envh_office_setup() {
  if ! command -v soffice >/dev/null 2>&1 || ! command -v bwrap >/dev/null 2>&1 \
      || ! /usr/bin/python3 -c "import uno" 2>/dev/null; then
    echo "office.sh: installing libreoffice-calc-nogui python3-uno bubblewrap"
    if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends libreoffice-calc-nogui python3-uno bubblewrap >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null || return 1
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends libreoffice-calc-nogui python3-uno bubblewrap >/dev/null || return 1
    fi
  fi
  "$PY" -c "import envh_office.sheet_bridge, re2, openpyxl" 2>/dev/null \
    || "$PY" -m pip install -q -e plugins/envh-office || return 1
  if ! docker info >/dev/null 2>&1; then
    echo "office.sh: no Docker daemon answers (dev/setup.d/docker.sh starts it)" >&2
    return 1
  fi
  bash plugins/envh-office/images/build.sh || return 1
}

envh_office_setup
