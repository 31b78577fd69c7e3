#!/usr/bin/env bash
# The main job on embedded defaults: set up (dev/setup.sh), then run the designer loop on
# Toy24 with the local SmolLM2 policy and the template designer. It observes the policy,
# scaffolds the tasks it fails until its success rate lands in the target band, and
# writes the harness pool and a report (markdown + plots) to runs/main/.
# Extra arguments go to `envh rig` (e.g. --tasks split:hard:2 --target sr:0.2-0.4).
# ENVH_MAIN_SKIP_SETUP=1 skips the set-up on a machine that has it (the job alone is timed).
# Run again with the same arguments to resume; other arguments need another output
# directory (ENVH_MAIN_OUT=runs/other) or the old one removed: a run is never silently
# resumed under arguments it was not started with.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${ENVH_MAIN_DRY_RUN:-}" ] && [ -z "${ENVH_MAIN_SKIP_SETUP:-}" ]; then
  # shellcheck disable=SC1091
  source "$ROOT/dev/setup.sh"
fi
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH"
out="${ENVH_MAIN_OUT:-runs/main}"
args="$*"
resume=()
if [ -f "$out/rig.json" ]; then
  stored="$(cat "$out/main.args" 2>/dev/null || echo "(unknown: started without dev/main.sh)")"
  if [ "$stored" != "$args" ]; then
    echo "$out holds a run started with arguments '$stored', not '$args'." >&2
    echo "Resume it with those arguments, remove $out, or set ENVH_MAIN_OUT to another directory." >&2
    exit 2
  fi
  resume=(--resume)  # the same arguments: continue (or re-report) the stored run
fi
# The main job's own settings (the user's arguments come after and win): a band of width 0.4,
# where the validator needs about 7 rollouts for a candidate at its centre (about 14 at width
# 0.2) with the same kind of guarantee (P(judged in | 0.5) = 0.93, P(judged in | p <= 0.1 or
# >= 0.9) <= 0.08); episodes of at most 8 policy turns; the policy sees the task and its last
# exchange and writes at most 24 tokens a turn (an action is about 12), which bounds the
# prompt a small model re-reads every turn.
main_opts=(--target sr:0.3-0.7 --max-steps 8 --policy-option max_turns=1 --policy-option max_new_tokens=24)
cmd=(envh rig toy24 --out "$out" "${main_opts[@]}" "${resume[@]}" "$@")
if [ -n "${ENVH_MAIN_DRY_RUN:-}" ]; then
  echo "${cmd[*]}"
  exit 0
fi
# remember the arguments once the run exists (a refused command leaves no run behind)
trap '[ -f "$out/rig.json" ] && [ ! -f "$out/main.args" ] && printf "%s\n" "$args" > "$out/main.args"' EXIT
start=$(date +%s)
"${cmd[@]}"
echo "report: $out/report.md (plots beside it); accepted harnesses: envh pool $out ($(( $(date +%s) - start )) s)"
