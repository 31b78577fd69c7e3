#!/usr/bin/env bash
# The main job on embedded defaults: set up (dev/setup.sh), then run the designer loop on
# Toy24 with the local SmolLM2 policy and the template designer. It observes the policy,
# scaffolds the tasks it fails until its success rate lands in the target band, and
# writes the harness pool and a report (markdown + plots) to runs/main/.
# Extra arguments go to `envh rig` (e.g. --tasks split:hard:2 --target sr:0.2-0.4).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$ROOT/dev/setup.sh"
cd "$ROOT"
out="${ENVH_MAIN_OUT:-runs/main}"
resume=()
[ -f "$out/rig.json" ] && resume=(--resume)  # a second run continues (or re-reports) the first
envh rig toy24 --out "$out" "${resume[@]}" "$@"
echo "report: $out/report.md (plots beside it); accepted harnesses: envh pool $out"
