#!/usr/bin/env bash
# The system parts of the set-up, which never touch the virtualenv: Debian packages
# (Docker, debootstrap, Chromium, LibreOffice with its Python bridge, bubblewrap), a
# running dockerd, and the test images (envh-swebench's, envh-office's sandbox).
# dev/setup.sh runs this in the background beside its pip work and waits for it before
# the dev/setup.d snippets, which then find these parts present; each snippet still checks
# and installs its own parts, so it works on its own too. One apt-get for everything:
# apt holds one lock, and each extra `apt-get update` costs seconds.
# Idempotent: on a machine that has all of it this only checks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# one at a time: a second set-up started while the first still installs waits here
exec 9>/tmp/envh-system.lock
flock 9
start=$SECONDS

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io ca-certificates iptables xz-utils)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap debian-archive-keyring)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v soffice >/dev/null 2>&1 || need+=(libreoffice-calc-nogui)
/usr/bin/python3 -c "import uno" 2>/dev/null || need+=(python3-uno)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ "${#need[@]}" -gt 0 ]; then
  echo "system: apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  echo "system: packages took $((SECONDS - start)) s"
fi

# 9>&-: the daemon must not inherit the lock, or it would hold it for its whole life and
# every later set-up would wait here forever
bash dev/dockerd.sh 9>&-

bash plugins/envh-swebench/tests/images/build.sh
bash plugins/envh-office/images/build.sh
echo "system: done in $((SECONDS - start)) s"
