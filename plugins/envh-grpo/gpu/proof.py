"""The GPU paths of envh-grpo, run for real on one GPU: what a CPU cannot show.

1. Plain ``envh train`` (DeepSpeed on by ``auto`` because CUDA is there, one process, no
   launcher): two steps with a checkpoint after each.
2. ``--resume`` of that run to a third step: the rows are 1, 2, 3, each once.
3. ZeRO-3 (``deepspeed.zero_stage=3``, the reference sharded, ``hf`` generation on the
   gathered policy): two steps.
4. The memory estimate against the allocator: ``--dry-run``'s ``allocated_peak`` for a
   ~1.5B model (Qwen2-1.5B's shape, random weights) beside the ``memory/max_allocated_gib``
   the same settings' training step logs (the issue's target: within 15 %).

Weights are random (initialised here from the configs: no weights travel and nothing is
downloaded); the tokenizer is SmolLM2's. ``--cpu`` rehearses steps 1-3 on a CPU with
DeepSpeed forced on. The last line printed is one JSON object of every figure; it is also
written to ``OUT/proof.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SMALL = ["group_size=2", "groups_per_step=2", "max_turns=2", "max_response_tokens=16", "micro_batch=2",
         "log.progress=false", "log.tensorboard=false", "log.wandb=false", "envs=[{spec: toy24, split: easy}]",
         "seed=1", "engine=hf", "temperature=1.0"]
QWEN2_1_5B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1536,
              "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
              "num_key_value_heads": 2, "max_position_embeddings": 32768, "vocab_size": 151936,
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
              "hidden_act": "silu", "torch_dtype": "bfloat16"}


def build_models(work: Path, tokenizer_dir: Path) -> dict[str, Path]:
    """Random-init SmolLM2-135M (its own config) and a Qwen2-1.5B-shaped model, saved in
    bf16 with SmolLM2's tokenizer files (their ids fit both vocabularies)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = {}
    for name, config in (("smollm2", AutoConfig.from_pretrained(str(tokenizer_dir))),
                         ("qwen1.5b", AutoConfig.for_model("qwen2", **{k: v for k, v in QWEN2_1_5B.items()
                                                                       if k not in ("architectures", "model_type")}))):
        folder = work / name
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
        model.save_pretrained(str(folder), safe_serialization=True)
        for f in tokenizer_dir.iterdir():
            if f.name != "config.json" and not f.name.startswith("model"):
                shutil.copy(f, folder / f.name)
        out[name] = folder
        del model
    return out


def train(*args: str, timeout: int = 900) -> tuple[int, str, str, float]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env |= {"HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "train", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    return proc.returncode, proc.stdout, proc.stdout[-1500:] + proc.stderr[-3000:], time.monotonic() - t0


def rows(out: Path) -> list[dict[str, Any]]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def sets(*pairs: str) -> list[str]:
    return [a for p in pairs for a in ("--set", p)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tokenizer", type=Path, default=ROOT / ".gpu" / "smollm2")
    p.add_argument("--cpu", action="store_true", help="rehearse steps 1-3 on a CPU")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/envh-gpu-proof")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    import torch

    figures: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
                               "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    models = build_models(work, args.tokenizer)
    extra = ['deepspeed.enabled="true"', "threads=1"] if args.cpu else []
    base = [*SMALL, *extra, f"model={models['smollm2']}", "save_every=1"]

    def step(name: str, *argv: str, expect: list[int]) -> None:
        code, _out, tail, seconds = train(*argv)
        got = [r["step"] for r in rows(Path(argv[argv.index("--output-dir") + 1])) if "loss" in r]
        figures[name] = {"exit": code, "steps": got, "seconds": round(seconds, 1), "ok": code == 0 and got == expect}
        if not figures[name]["ok"]:
            figures[name]["tail"] = tail
        print(name, json.dumps({k: v for k, v in figures[name].items() if k != "tail"}), flush=True)
        if "tail" in figures[name]:
            print(tail, flush=True)

    plain = work / "plain"
    step("plain", "--steps", "2", "--output-dir", str(plain), *sets(*base), expect=[1, 2])
    step("resume", "--resume", "--steps", "3", "--output-dir", str(plain), *sets(*base), expect=[1, 2, 3])
    z3 = work / "zero3"
    step("zero3", "--steps", "2", "--output-dir", str(z3), *sets(*base, "deepspeed.zero_stage=3", "loss.kl_coef=0.01"),
         expect=[1, 2])
    if not args.cpu:
        big = [*SMALL, f"model={models['qwen1.5b']}", "max_response_tokens=128", "max_turns=3", "group_size=4",
               "groups_per_step=2", "micro_batch=4", "loss.kl_coef=0.01", "save_every=0"]
        code, stdout, tail, _ = train("--dry-run", "--steps", "1", *sets(*big))
        estimate = json.loads(stdout) if code == 0 else {"error": tail}
        out15 = work / "qwen1.5b"
        step("qwen1.5b", "--steps", "1", "--output-dir", str(out15), *sets(*big), expect=[1])
        measured = next((r.get("memory/max_allocated_gib") for r in rows(out15) if "loss" in r), None)
        predicted = (estimate.get("memory_gib_per_gpu") or {}).get("allocated_peak")
        figures["memory"] = {"estimate_allocated_peak_gib": predicted, "measured_max_allocated_gib": measured,
                             "ratio": None if not (predicted and measured) else round(predicted / measured, 3),
                             "estimate": estimate.get("memory_gib_per_gpu")}
        print("memory", json.dumps(figures["memory"]), flush=True)
    line = json.dumps({"bench": "gpu_proof", **figures,
                       "ratio": (figures.get("memory") or {}).get("ratio")})
    (args.out / "proof.json").write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
