"""Run by test_remote.py under ``torchrun --nproc_per_node 2`` on gloo: the two ranks share
one executor (rank 0's pool) while each generates its own episodes' turns.

Each rank plays its own scripted episodes (its own seed and replies) through
``play_remote(..., exchange=...)`` and checks them against the same jobs played in
process. Rank 0 writes which episode requests its executor ran. With ``CRASH_RANK=r``,
rank r dies (``os._exit``) when its first turn-1 batch reaches its engine.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import envh  # noqa: E402
import torch.distributed as dist  # noqa: E402
from envh_grpo import remote  # noqa: E402
from envh_grpo.generation import SamplingConfig  # noqa: E402
from envh_grpo.rollout import PREFILL, Job, play  # noqa: E402
from envh_grpo.sequences import ChatSegments  # noqa: E402
from envh_grpo.trainer import resolve_model  # noqa: E402
from grpo_scripted import REPLIES, Script, assert_equal  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

SPECS = ["toy24", {"bridge": "toy24", "layers": [{"kind": "workspace"}]}]
TASK = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


class Recording:
    """Rank 0's executor, recording the key of every request it runs."""

    def __init__(self, inner):
        self.inner, self.keys = inner, []

    @property
    def workers(self):
        return self.inner.workers

    def run(self, requests):
        requests = list(requests)
        self.keys += [r.key for r in requests]
        yield from self.inner.run(requests)


def main() -> None:
    out, crash = Path(sys.argv[1]), int(os.environ.get("CRASH_RANK", "-1"))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    exchange = remote.Exchange(rank, world, dist.new_group(backend="gloo"))
    tok = AutoTokenizer.from_pretrained(str(resolve_model("smollm2")))
    seg = ChatSegments(tok, PREFILL)
    replies, seed = REPLIES[rank:] + REPLIES[:rank], 11 + rank  # each rank its own episodes
    jobs = [(SPECS[j // 2], TASK, 100 * rank + j, j // 2) for j in range(4)]
    sampling = SamplingConfig(max_new_tokens=64)
    options = {"max_turns": 6, "max_context": 4096, "seed": seed}
    inproc = play([Job(env=envh.make(spec), task=task, seed=s, group=g, spec=str(g)) for spec, task, s, g in jobs],
                  Script(tok, replies, seed), seg, sampling, **options)

    class Engine(Script):
        def generate(self, prompts, sampling, seeds):
            if rank == crash and any(self.turn_of[s] == 1 for s in seeds):
                os._exit(7)  # this process dies in the middle of the rollout
            return super().generate(prompts, sampling, seeds)

    executor = None
    if rank == 0:
        executor = Recording(envh.get_registry().executor("pool").load()(2, isolation="none", memory_mb=4096))
    try:
        pooled = remote.play_remote([remote.RemoteJob(spec=spec, task=task, seed=s, group=g, name=str(g))
                                     for spec, task, s, g in jobs], executor, Engine(tok, replies, seed), seg,
                                    sampling, run_id="shared", exchange=exchange, **options)
    finally:
        if executor is not None:
            executor.inner.close()
    assert_equal(inproc, pooled, atol=0)
    report = {"rank": rank, "episodes": len(pooled), "keys": executor.keys if executor is not None else None}
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
