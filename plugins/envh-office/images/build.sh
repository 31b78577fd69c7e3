#!/usr/bin/env bash
# Build the SpreadsheetBench sandbox image (envh-office/sandbox:bookworm) FROM the
# debootstrap base that dev/setup.d/docker.sh builds (envh/swebench-base:bookworm); no
# registry is needed, apt inside the build fetches python3-openpyxl and python3-pandas.
# Docker's layer cache makes a re-run take a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base="${ENVH_OFFICE_BASE_IMAGE:-envh/swebench-base:bookworm}"
image="${ENVH_OFFICE_IMAGE:-envh-office/sandbox:bookworm}"
if ! docker image inspect "$base" >/dev/null 2>&1; then
  echo "envh-office: base image $base missing; building it with envh-swebench's debootstrap script"
  bash "$here/../../envh-swebench/tests/images/build.sh" >/dev/null || exit 1
fi
log="$(mktemp /tmp/envh-office-build.XXXXXX)"
if ! docker build --build-arg "BASE_IMAGE=$base" -t "$image" "$here/sandbox" >"$log" 2>&1; then
  tail -20 "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
docker run --rm --network none "$image" python3 -c "import openpyxl, pandas" \
  || { echo "envh-office: $image lacks openpyxl/pandas" >&2; exit 1; }
echo "envh-office: sandbox image $image ready"
