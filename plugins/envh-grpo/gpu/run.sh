#!/usr/bin/env bash
# Run on the GPU machine (device tool), in the repository root, with .gpu/ carried (prepare.sh).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl \
  || exit 3
export PYTHONPATH=/tmp/site PATH="/tmp/site/bin:$PATH" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 plugins/envh-grpo/gpu/proof.py --out "${OUT:-/tmp/gpu-proof}" 2>&1 | tee "${OUT:-/tmp}/proof.log"
