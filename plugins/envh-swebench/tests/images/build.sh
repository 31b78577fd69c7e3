#!/usr/bin/env bash
# Build the local images the envh-swebench tests and benchmark run on; no registry needed.
#
#   envh/swebench-base:bookworm   Debian minbase + python3, python3-pytest, git, made with
#                                 debootstrap and `docker import` (skipped when present,
#                                 so local runs build it once; ~80 s, ~220 MB)
#   sweb.eval.<arch>.envh__mathx-1:latest
#                                 a SWE-style instance image FROM the base: a tiny repo
#                                 at a pinned base commit in /testbed (docker layer cache)
#   envh-swebench/mathx-nopython:latest
#                                 the same without python3 (the exec fallback's test)
#   envh-swebench/mathx-env:latest
#                                 the same plus an environment its tests need, which
#                                 only its activate script puts on the path
#
# Env: ENVH_DEBIAN_MIRROR (default deb.debian.org), ENVH_SWEBENCH_BASE_IMAGE.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base="${ENVH_SWEBENCH_BASE_IMAGE:-envh/swebench-base:bookworm}"
mirror="${ENVH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
case "$(uname -m)" in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) arch="$(uname -m)" ;;
esac

if docker image inspect "$base" >/dev/null 2>&1; then
  echo "envh-swebench: base image $base present, not rebuilding"
else
  echo "envh-swebench: building base image $base with debootstrap"
  rootfs="$(mktemp -d /tmp/envh-swebench-rootfs.XXXXXX)"
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include=python3,python3-pytest,git \
    bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
    || { tail -20 "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  # Documentation, locales and apt lists are dead weight inside a test image.
  rm -rf "$rootfs"/usr/share/{doc,man,info,locale}/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    -c 'CMD ["/bin/bash"]' - "$base" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

image="sweb.eval.${arch}.envh__mathx-1:latest"
# The legacy builder prints a deprecation notice on stderr; show the log only on failure.
docker build --build-arg "BASE_IMAGE=$base" -t "$image" "$here/mathx" >/tmp/envh-swebench-build.log 2>&1 \
  || { tail -20 /tmp/envh-swebench-build.log; exit 1; }
want="$(sed -n 's/.*"base_commit": *"\([0-9a-f]*\)".*/\1/p' "$here/mathx/instances.json" 2>/dev/null || true)"
got="$(docker run --rm --network none "$image" git rev-parse HEAD)"
if [ -n "$want" ] && [ "$want" != "$got" ]; then
  echo "envh-swebench: $image has base commit $got, instances.json expects $want" >&2
  exit 1
fi
echo "envh-swebench: instance image $image at $got"
docker build --build-arg "BASE_IMAGE=$image" -t envh-swebench/mathx-nopython:latest "$here/nopython" \
  >/tmp/envh-swebench-build.log 2>&1 || { tail -20 /tmp/envh-swebench-build.log; exit 1; }
echo "envh-swebench: python-less image envh-swebench/mathx-nopython:latest"
docker build --build-arg "BASE_IMAGE=$image" -t envh-swebench/mathx-env:latest "$here/mathx-env" \
  >/tmp/envh-swebench-build.log 2>&1 || { tail -20 /tmp/envh-swebench-build.log; exit 1; }
echo "envh-swebench: image with an environment to activate envh-swebench/mathx-env:latest"
