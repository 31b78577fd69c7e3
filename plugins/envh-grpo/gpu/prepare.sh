#!/usr/bin/env bash
# Run here (a machine with the package index), in the repository root, before a GPU session:
# collects into .gpu/ (ignored by git) what plugins/envh-grpo/gpu/proof.py needs on a bare GPU
# machine that has Python 3.12, PyTorch, transformers and tokenizers but no index: wheels of
# envh, envh-grpo and their missing dependencies (DeepSpeed built as a pure wheel, no ops),
# and SmolLM2's config and tokenizer (no weights: the proof builds random-init weights there).
# Then, through the device tool: carry [".gpu"], command
#   bash plugins/envh-grpo/gpu/run.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
rm -rf .gpu && mkdir -p .gpu/whl .gpu/smollm2
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux_2_24_x86_64)
# what the GPU image lacks (KINDS.md's package list): envh's and DeepSpeed's needs
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .gpu/whl cattrs gymnasium farama-notifications google-re2 hjson pydantic pydantic-core annotated-types \
  typing-inspection
# DeepSpeed is an sdist: a pure wheel without compiled ops (they JIT-build where needed)
DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w .gpu/whl "deepspeed==$("$PY" -c \
  'from importlib.metadata import version; print(version("deepspeed"))')"
"$PY" -m pip wheel -q --no-deps -w .gpu/whl ./core ./plugins/envh-grpo
model="$("$PY" -c 'from envh.rollout.policies.localmodels import cache_root; print(cache_root() / "smollm2-135m")')"
for f in "$model"/*; do  # everything but the weights
  case "$(basename "$f")" in model*.safetensors|*.bin|*.gguf) ;; *) cp "$f" .gpu/smollm2/ ;; esac
done
du -sh .gpu && ls .gpu/whl
