#!/usr/bin/env bash
# Start dockerd in the background when no daemon answers (no systemd here) and wait up to
# 60 s for its socket; on failure, dockerd's last log lines. Used by dev/system.sh and
# dev/setup.d/docker.sh.
set -euo pipefail
docker info >/dev/null 2>&1 && exit 0
echo "dockerd.sh: starting dockerd"
# setsid: the daemon outlives this shell and ignores its job control.
setsid dockerd >/tmp/envh-dockerd.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "dockerd.sh: dockerd did not come up within 60 s; last log lines:" >&2
tail -20 /tmp/envh-dockerd.log >&2
exit 1
