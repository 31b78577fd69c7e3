"""The GRPO trainer: rollouts → rewards → group advantages → clipped updates, repeated.

One process per device, launched by ``deepspeed`` or ``torchrun`` (or plain ``envh train``
for one process, which sets up its own group of one when DeepSpeed is on). Each process plays its share of the step's groups (a group never
spans processes, so its advantages are local), packs them into token-faithful samples
and takes the optimizer step together with the others under DeepSpeed ZeRO (gloo on CPU,
NCCL on GPU). Without DeepSpeed (one process) a plain AdamW does the same.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import checkpoint, data
from .advantages import group_advantages, turn_advantages
from .config import TrainConfig, check, deepspeed_bf16, weights_dtype
from .generation import Generation, HFEngine, SamplingConfig, VLLMEngine
from .loss import grpo_loss, token_logprobs
from .metrics import Metrics
from .rewards import cost_aware, turn_rewards
from .rollout import PREFILL, Episode, Job, derive_seed, play, played
from .sequences import ChatSegments, Sample, pack

#: The generation engine ``engine: auto`` picks on CPU; see bench/grpo_step.py and the README.
CPU_ENGINE = "hf"
#: How long the other ranks may wait for rank 0's executor to finish a rollout (hours).
ROLLOUT_WAIT_H = 6
#: Sampling-mismatch metrics (means over policy tokens) and the ``LossParts`` field of each:
#: the TIS weight, the share of tokens whose weight hit ``loss.tis_cap``, |logπ_old − logπ_vllm|.
TIS_METRICS = {"sampling/is_weight": "is_weight", "sampling/is_clipped": "is_clipped",
               "sampling/logp_diff": "logp_diff"}


def resolve_model(name: str) -> Path:
    """A local HF folder for ``name`` (embedded name, folder, .gguf, or a hub id already in
    the local HF cache). Nothing is downloaded."""
    from envh import errors
    from envh.rollout.policies import localmodels

    try:
        return localmodels.model_dir(name)
    except errors.EnvhError:
        if "/" not in name or Path(name).exists():
            raise
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any miss means: not available offline
        raise errors.SpecError(f"Model {name!r} is neither a local folder nor in the local Hugging Face cache; "
                               "models are never downloaded at run time (fetch it first).") from exc


class GRPOTrainer:
    """Train ``config.model`` with GRPO on ``config.envs``.

    :param config: a checked ``TrainConfig``.
    :param resume: continue from the latest checkpoint in ``output_dir`` (refuses a
        different configuration).
    :param echo: where per-step lines go (rank 0 only).
    :param chooser: picks each group's task instead of ``data.draw`` (an adaptive task
        distribution, e.g. a curriculum over whole groups): ``draw(sources, position)``
        returns (source index, task) and ``record(position, successes)`` gets the group's
        outcomes after it was played; it must be a pure function of what it was told, so a
        resumed run draws what a continuous one would have.
    """

    def __init__(self, config: TrainConfig, *, resume: bool = False, echo: Callable[[str], None] | None = None,
                 chooser: Any = None, save_final: bool = True) -> None:
        self.config = config
        self.chooser = chooser
        # save_final=False: the last step's checkpoint is not written. For a caller that deletes
        # the checkpoints once the run is done (``envh experiment``): the write (~1.6 GB for a
        # 135M model with its optimizer) is waste there; a kill after the last step then
        # redoes that step from the one before.
        self.save_final = save_final
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.echo = echo if self.rank == 0 else None
        self.cuda = torch.cuda.is_available()
        self.device = torch.device(f"cuda:{self.local_rank}" if self.cuda else "cpu")
        self.model_dir = resolve_model(config.model)
        model_config = checkpoint.read_json(self.model_dir / "config.json")
        check(config, world_size=self.world, model_config=model_config)
        self.sources = data.resolve(config.envs)
        self.eval_sources = data.resolve(config.eval.envs) if config.eval.every and config.eval.envs else []
        ds = config.deepspeed.enabled
        self.use_ds = ds == "true" or (ds == "auto" and (self.world > 1 or self.cuda))
        if self.world > 1 and not self.use_ds:
            from envh import errors

            raise errors.SpecError("Several processes need DeepSpeed: set deepspeed.enabled to auto or true")
        # ZeRO-3 over several processes: each forward gathers parameters from every process,
        # so every process must run as many forwards as the others (see ``_idle_forward``)
        self.zero3 = self.use_ds and config.deepspeed.zero_stage == 3 and self.world > 1
        if chooser is not None and self.world > 1:
            from envh import errors

            raise errors.SpecError("A task chooser (an adaptive task distribution) needs one process: each "
                                   "process would see only its own groups' outcomes")
        if resume:  # refuse a missing or mismatched checkpoint before loading anything
            checkpoint.require(config, self.world)
        self.step_no = 0
        self.position = 0  # groups drawn so far (the data position)
        self._envs: dict[tuple[int, int], Any] = {}
        self._exec: Any = None
        self._xchg: Any = None
        self._lost = 0  # episodes of this process's last rollout left out (their group lost one)
        self._signal = (0, 0, 0)  # groups of the last scored step: unequal rewards, all, mixed verdicts
        self._setup_model()
        self.metrics = Metrics(config, Path(config.output_dir), rank=self.rank)
        if resume:
            self.load()

    # -- setup ---------------------------------------------------------------------------
    def _setup_model(self) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        c = self.config
        if self.cuda:  # before NCCL and vLLM: both work on the current device
            torch.cuda.set_device(self.local_rank)
        if self.use_ds:
            import deepspeed

            if self.world == 1:  # no launcher: a group of one, never DeepSpeed's MPI discovery
                one_process_group()
            deepspeed.init_distributed(dist_backend="nccl" if self.cuda else "gloo")
        if c.threads:
            torch.set_num_threads(c.threads)
        torch.manual_seed(c.seed)
        dtype_name = weights_dtype(c, cuda=self.cuda)
        self.dtype = getattr(torch, dtype_name)
        self.tok = AutoTokenizer.from_pretrained(str(self.model_dir))
        model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=self.dtype).to(self.device)
        if c.deepspeed.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        model.config.use_cache = not c.deepspeed.gradient_checkpointing
        self.ref = None
        if c.loss.kl_coef > 0:  # coefficient 0: no reference model at all
            self.ref = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=self.dtype).to(self.device)
            self.ref.eval().requires_grad_(False)
            if self.use_ds and c.deepspeed.zero_stage == 3:
                self.ref = self._shard_reference(self.ref)
        opt = torch.optim.AdamW(model.parameters(), lr=c.optim.lr, betas=c.optim.betas,
                                weight_decay=c.optim.weight_decay)
        warm = max(c.optim.warmup_steps, 0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        if self.use_ds:
            import deepspeed

            self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
                model=model, optimizer=opt, lr_scheduler=sched, config=self.ds_config())
            self.model = self.engine.module
        else:
            self.engine, self.model, self.optimizer, self.scheduler = None, model, opt, sched
        self.model.train()
        self.segments = ChatSegments(self.tok, PREFILL)
        self.sampling = SamplingConfig(max_new_tokens=c.max_response_tokens, temperature=c.temperature,
                                       top_p=c.top_p, stop=c.stop)
        # auto: vLLM on GPU where it is installed (weights load in place), transformers otherwise
        import importlib.util

        has_vllm = importlib.util.find_spec("vllm") is not None
        name = c.engine if c.engine != "auto" else ("vllm" if self.cuda and has_vllm else CPU_ENGINE)
        if name == "vllm":
            self.gen: Any = VLLMEngine(str(self.model_dir), dtype=dtype_name,
                                       gpu_memory_utilization=c.vllm.gpu_memory_utilization,
                                       enforce_eager=c.vllm.enforce_eager, tensor_parallel=c.vllm.tensor_parallel,
                                       max_model_len=c.max_prompt_tokens + c.max_response_tokens, seed=c.seed,
                                       external_launcher=self.cuda and self.world > 1)
        else:
            self.gen = HFEngine(self.model, self.tok)

    def _shard_reference(self, ref: Any) -> Any:
        """The frozen reference under ZeRO-3, partitioned over the processes like the policy
        (as TRL's ``prepare_deepspeed``, trl/models/utils.py, v1.16.0): the training config
        without its optimizer blocks, with TRL's bucket sizes for the hidden size. Under
        ZeRO-0/1/2 every process keeps a full copy, as TRL does."""
        import deepspeed

        config = self.ds_config()
        hidden = getattr(ref.config, "hidden_size", None)
        zero = config["zero_optimization"]
        zero.pop("offload_optimizer", None)
        if isinstance(hidden, int):
            zero |= {"reduce_bucket_size": hidden * hidden, "stage3_param_persistence_threshold": 10 * hidden,
                     "stage3_prefetch_bucket_size": int(0.9 * hidden * hidden)}
        engine, *_ = deepspeed.initialize(model=ref, config=config)
        engine.eval()
        return engine

    def _generating(self) -> Any:
        """Where rollouts generate with ``HFEngine``: under ZeRO-3 over several processes,
        the policy's parameters gathered whole on each process and DeepSpeed's fetch hooks
        taken off for the time (TRL's ``unwrap_model_for_generation``), so ``generate`` runs
        locally: each process makes as many calls as its episodes need, which differ
        between processes in multi-turn rollouts (a per-forward gather would wait forever)."""
        import contextlib

        if not (self.zero3 and isinstance(self.gen, HFEngine)):
            return contextlib.nullcontext()
        return _gathered_for_generation(self.engine)

    def _idle_forward(self, model: Any) -> torch.Tensor:
        """A one-token forward whose result is 0: under ZeRO-3 a process without rows left
        still joins the others' parameter gathers (and, in training, their gradient
        reduction)."""
        ids = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        return model(input_ids=ids, use_cache=False).logits.float().sum() * 0.0

    def ds_config(self) -> dict[str, Any]:
        c, ds = self.config, self.config.deepspeed
        zero: dict[str, Any] = {"stage": ds.zero_stage, "overlap_comm": False, "contiguous_gradients": True}
        if ds.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu"}
        if ds.offload_params:
            zero["offload_param"] = {"device": "cpu"}
        bf16 = deepspeed_bf16(c, cuda=self.cuda)  # follows the weights' dtype
        return {"train_micro_batch_size_per_gpu": c.micro_batch, "gradient_accumulation_steps": 1,
                "gradient_clipping": c.optim.grad_clip, "zero_optimization": zero,
                "bf16": {"enabled": bf16}, "zero_allow_untested_optimizer": True,
                "steps_per_print": 1 << 30, "wall_clock_breakdown": False}

    # -- rollouts ------------------------------------------------------------------------
    def _env(self, source: int, slot: int) -> Any:
        import envh

        key = (source, slot)
        if key not in self._envs:
            self._envs[key] = envh.make(self.sources[source].spec)
        return self._envs[key]

    def rollouts(self, step: int) -> tuple[list[Episode], list[int], float, int]:
        """This process's episodes of ``step``; (episodes, global group ids, seconds, tokens)."""
        c = self.config
        per_rank = c.groups_per_step // self.world
        drawn, groups = [], []
        for g in range(per_rank):
            global_g = self.position + self.rank * per_rank + g
            if self.chooser is not None:
                k, task = self.chooser.draw(self.sources, global_g)
            else:
                k, task = data.draw(self.sources, c.seed, global_g)
            for i in range(c.group_size):
                drawn.append((k, g * c.group_size + i, task, global_g, derive_seed(c.seed, "reset", global_g, i)))
                groups.append(global_g)
        t0 = time.perf_counter()
        options = {"max_turns": c.max_turns, "max_context": c.max_prompt_tokens + c.max_response_tokens,
                   "history": c.history, "seed": derive_seed(c.seed, "sample", step, self.rank)}
        if c.rollout.executor is None:
            jobs = [Job(env=self._env(k, slot), task=task, group=gg, seed=seed, spec=self.sources[k].name)
                    for k, slot, task, gg, seed in drawn]
            with self._generating():
                episodes = play(jobs, self._counting(), self.segments, self.sampling, **options)
        else:
            from .remote import RemoteJob, play_remote

            remote = [RemoteJob(spec=self.sources[k].spec, task=task, group=gg, seed=seed, name=self.sources[k].name)
                      for k, _slot, task, gg, seed in drawn]
            with self._generating():
                episodes = play_remote(remote, self._executor(), self._counting(), self.segments, self.sampling,
                                       run_id=f"grpo-step{step}", linger_s=c.rollout.linger_s,
                                       host=c.rollout.host, exchange=self._exchange(), **options)
        episodes, self._lost = played(episodes)
        return episodes, groups, time.perf_counter() - t0, self._generated

    def _executor(self) -> Any:
        """The envh executor whose workers step the envs (warm across steps): one per job,
        on rank 0, which plays every rank's episodes (see ``remote``); ``None`` elsewhere."""
        if self._exec is None and self.rank == 0:
            import envh

            ro = self.config.rollout
            factory = envh.get_registry().executor(str(ro.executor)).load()
            self._exec = factory(ro.workers, **ro.options)
        return self._exec

    def _exchange(self) -> Any:
        """The job's processes around rank 0's executor (``None`` for one process)."""
        if self.world == 1:
            return None
        if self._xchg is None:
            local = int(os.environ.get("LOCAL_WORLD_SIZE", self.world))
            if local < self.world and self.config.rollout.host in ("127.0.0.1", "localhost", "::1"):
                from envh import errors

                raise errors.SpecError(f"rollout.host is {self.config.rollout.host} but the job spans nodes "
                                       f"({self.world} processes, {local} on this node): rank 0's workers could "
                                       "not reach the other nodes' generation servers; set rollout.host: 0.0.0.0")
            import datetime

            import torch.distributed as dist

            from .remote import Exchange

            # its own gloo group: trajectories are Python objects, and a rank waits in it for
            # the whole rollout (an NCCL collective would time out long before a long one ends)
            group = dist.new_group(backend="gloo", timeout=datetime.timedelta(hours=ROLLOUT_WAIT_H))
            self._xchg = Exchange(self.rank, self.world, group)
        return self._xchg

    def _counting(self) -> Any:
        self._generated = 0
        trainer = self

        class Counting:
            def generate(self, prompts: Any, sampling: SamplingConfig, seeds: Any) -> list[Generation]:
                out: list[Generation] = trainer.gen.generate(prompts, sampling, seeds)
                trainer._generated += sum(len(g.ids) for g in out)
                return out

        return Counting()

    def score(self, episodes: list[Episode], step: int) -> tuple[list[Sample], list[dict[str, float]]]:
        """Rewards (term by term), advantages within each group, packed samples."""
        c = self.config
        terms = [cost_aware(ep.facts, c.reward, epoch=step) for ep in episodes]
        by_group: dict[int, list[int]] = {}
        for i, ep in enumerate(episodes):
            by_group.setdefault(ep.group, []).append(i)
        per_turn: list[list[float]] = [[] for _ in episodes]
        for idx in by_group.values():
            if c.loss.credit == "trajectory":
                adv = group_advantages(torch.tensor([terms[i].total for i in idx], dtype=torch.float64),
                                       baseline=c.loss.baseline).tolist()
                for i, a in zip(idx, adv):
                    per_turn[i] = [float(a)] * len(episodes[i].turns)
            else:
                rewards = [turn_rewards(episodes[i].facts, terms[i], c.reward, episodes[i].invalid_turns)
                           for i in idx]
                for i, a in zip(idx, turn_advantages(rewards, baseline=c.loss.baseline, gamma=c.loss.gamma)):
                    per_turn[i] = a
        samples = [s for i, ep in enumerate(episodes) for s in pack(ep.turns, per_turn[i], episode=i)]
        # a group whose rewards are all equal has zero advantage everywhere: no learning signal
        self._signal = (sum(len({terms[i].total for i in idx}) > 1 for idx in by_group.values()), len(by_group),
                        # groups where some rollouts solved the task and some did not: the verifier's own signal
                        sum(len({episodes[i].success for i in idx}) > 1 for idx in by_group.values()))
        if self.chooser is not None:
            for g, idx in by_group.items():
                self.chooser.record(g, [episodes[i].success for i in idx])
        rows = [{"reward": t.total, "solved": t.solved, "efficiency": t.efficiency, "diversity": t.diversity,
                 "spam": t.spam, "invalid": t.invalid, "div_weight": t.div_weight} for t in terms]
        return samples, rows

    # -- optimisation --------------------------------------------------------------------
    def _batch(self, samples: list[Sample]) -> dict[str, torch.Tensor]:
        width = max(len(s.ids) for s in samples)
        pad = self.gen.pad if isinstance(self.gen, HFEngine) else (self.tok.pad_token_id or 0)
        ids = torch.full((len(samples), width), pad, dtype=torch.long)
        att = torch.zeros((len(samples), width), dtype=torch.long)
        mask = torch.zeros((len(samples), width))
        adv = torch.zeros((len(samples), width))
        behavior = torch.zeros((len(samples), width))  # the engine's log-probs of the sampled ids
        for r, s in enumerate(samples):
            n = len(s.ids)
            ids[r, :n] = torch.tensor(s.ids)
            att[r, :n] = 1
            mask[r, :n] = torch.tensor(s.mask, dtype=torch.float32)
            adv[r, :n] = torch.tensor(s.advantages, dtype=torch.float32)
            behavior[r, :n] = torch.tensor(s.engine_logprobs, dtype=torch.float32)
        # position t predicts token t+1: shift targets, mask and advantages by one
        return {"ids": ids.to(self.device), "att": att.to(self.device), "targets": ids[:, 1:].to(self.device),
                "mask": mask[:, 1:].to(self.device), "adv": adv[:, 1:].to(self.device),
                "behavior": behavior[:, 1:].to(self.device)}

    def _logp(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Log-probs of the targets, [B, T-1]; 0 where no row of the batch trains.

        Only the positions some row trains on go through the LM head (``logits_to_keep``, as
        TRL does): a prompt of hundreds of tokens times a vocabulary of 50k-150k is most of
        the logits' memory traffic and none of the loss."""
        keep = batch["mask"].any(dim=0).nonzero().squeeze(-1)
        out = torch.zeros(batch["targets"].shape, dtype=torch.float32, device=batch["targets"].device)
        if keep.numel() == 0:
            if self.zero3:  # the other processes' forward gathers need this one's part
                return out + self._idle_forward(model)
            return out + 0.0 * sum(p.sum() for p in model.parameters() if p.requires_grad)
        try:
            logits = model(input_ids=batch["ids"], attention_mask=batch["att"], use_cache=False,
                           logits_to_keep=keep).logits
        except TypeError:  # a model without logits_to_keep: every position, then pick
            logits = model(input_ids=batch["ids"], attention_mask=batch["att"], use_cache=False).logits[:, keep]
        lp = token_logprobs(logits, batch["targets"][:, keep], self.config.temperature)
        return out.index_copy(1, keep, lp)

    def _no_grad_logp(self, model: Any, samples: list[Sample]) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        size = self.config.logprob_micro_batch
        chunks = -(-len(samples) // size)
        if self.zero3:  # as many forwards as the process with the most samples, agreed first
            chunks = self._allreduce_max(chunks)
        with torch.no_grad():
            for k in range(0, chunks * size, size):
                part = samples[k:k + size]
                if not part:
                    self._idle_forward(model)
                    continue
                lp = self._logp(model, self._batch(part))
                out += [lp[r] for r in range(len(part))]
        return out

    def _allreduce(self, values: list[float]) -> list[float]:
        if self.world == 1:
            return values
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device)  # NCCL reduces device tensors only
        dist.all_reduce(t)
        return t.cpu().tolist()

    def optimise(self, samples: list[Sample]) -> dict[str, float]:
        """PPO epochs over mini-batches of episodes; returns loss statistics."""
        c = self.config
        episodes = sorted({s.episode for s in samples})
        n_local = c.episodes_per_step // self.world
        mb_eps = min(c.ppo_mini_batch or c.episodes_per_step, c.episodes_per_step) // self.world or 1
        chunks = [set(range(k, k + mb_eps)) for k in range(0, n_local, mb_eps)]
        several = c.ppo_epochs > 1 or len(chunks) > 1
        old = self._no_grad_logp(self.model, samples) if several else None
        ref = self._no_grad_logp(self.ref, samples) if self.ref is not None else None
        stats: dict[str, float] = {"loss": 0.0, "policy_loss": 0.0, "kl": 0.0, "clip_fraction": 0.0,
                                   "grad_norm": 0.0, **dict.fromkeys(TIS_METRICS, 0.0)}
        updates = 0
        del episodes
        for _epoch in range(c.ppo_epochs):
            for chunk in chunks:
                idx = [i for i, s in enumerate(samples) if s.episode in chunk]
                stats_mb = self._update([samples[i] for i in idx],
                                        None if old is None else [old[i] for i in idx],
                                        None if ref is None else [ref[i] for i in idx])
                for key in stats:
                    stats[key] += stats_mb[key]
                updates += 1
        return {k: v / max(updates, 1) for k, v in stats.items()} | {"updates": float(updates)}

    def _update(self, samples: list[Sample], old: list[torch.Tensor] | None,
                ref: list[torch.Tensor] | None) -> dict[str, float]:
        c = self.config
        tokens = float(sum(sum(s.mask) for s in samples))
        seqs = float(sum(1 for s in samples if any(s.mask)))
        micro = [list(range(k, min(k + c.micro_batch, len(samples)))) for k in range(0, len(samples), c.micro_batch)]
        g_tokens, g_seqs = self._allreduce([tokens, seqs])
        if self.world > 1:  # every process takes the same number of backward passes
            micro += [[] for _ in range(self._allreduce_max(len(micro)) - len(micro))]
        if not micro:
            micro = [[]]
        norm = (g_tokens if c.loss.aggregation == "token" else g_seqs) / self.world
        total = {"loss": 0.0, "policy_loss": 0.0, "kl": 0.0, "clip_fraction": 0.0,
                 **dict.fromkeys(TIS_METRICS, 0.0)}
        # vLLM samples with its own kernels: weight by the truncated importance ratio (loss.tis_cap)
        tis_cap = c.loss.tis_cap if getattr(self.gen, "name", "") == "vllm" else None
        for m, rows in enumerate(micro):
            last = m == len(micro) - 1
            if rows:
                part = [samples[r] for r in rows]
                batch = self._batch(part)
                logp = self._logp(self.engine or self.model, batch)
                width = logp.shape[1]
                old_lp = logp.detach() if old is None else _stack([old[r] for r in rows], width)
                ref_lp = None if ref is None else _stack([ref[r] for r in rows], width)
                parts = grpo_loss(logp, old_lp, batch["adv"], batch["mask"], ref_logp=ref_lp,
                                  kl_coef=c.loss.kl_coef, epsilon=c.loss.epsilon,
                                  epsilon_high=c.loss.epsilon_high, aggregation=c.loss.aggregation,
                                  normalizer=max(norm, 1.0), behavior_logp=batch["behavior"], tis_cap=tis_cap)
                loss = parts.loss
                weight = parts.tokens / max(tokens, 1.0)
                total["loss"] += float(loss.detach())
                for key in ("policy_loss", "kl", "clip_fraction"):
                    total[key] += getattr(parts, key) * weight
                for key, field in TIS_METRICS.items():
                    total[key] += getattr(parts, field) * weight
            elif self.zero3:  # padding pass: a forward that joins the others' gathers, loss 0
                loss = self._idle_forward(self.engine)
            else:  # padding pass: a zero loss that still touches every parameter
                loss = sum(p.sum() for p in self.model.parameters()) * 0.0
            if not torch.isfinite(loss):
                from envh import errors

                raise errors.EnvhError(f"The GRPO loss is not finite at step {self.step_no}: {float(loss)}")
            if self.engine is not None:
                self.engine.set_gradient_accumulation_boundary(last)
                self.engine.backward(loss)
            else:
                loss.backward()
        if self.engine is not None:
            self.engine.step()
            grad_norm = float(self.engine.get_global_grad_norm() or 0.0)
        else:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.optim.grad_clip))
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
        summed = self._allreduce([total["loss"], total["policy_loss"] * tokens, total["kl"] * tokens,
                                  total["clip_fraction"] * tokens, *(total[k] * tokens for k in TIS_METRICS)])
        return {"loss": summed[0] / self.world, "policy_loss": summed[1] / max(g_tokens, 1.0), "kl": summed[2] / max(g_tokens, 1.0),
                "clip_fraction": summed[3] / max(g_tokens, 1.0), "grad_norm": grad_norm,
                **{k: v / max(g_tokens, 1.0) for k, v in zip(TIS_METRICS, summed[4:])}}

    def _allreduce_max(self, value: int) -> int:
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.long, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    # -- the loop ------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """One GRPO step: rollouts, scoring, updates, weight sync; returns its metrics."""
        c = self.config
        t0 = time.perf_counter()
        episodes, _groups, gen_s, gen_tokens = self.rollouts(self.step_no)
        samples, rows = self.score(episodes, self.step_no)
        t1 = time.perf_counter()
        stats = self.optimise(samples)
        t2 = time.perf_counter()
        if not isinstance(self.gen, HFEngine):
            self.gen.sync(self.model)
        t3 = time.perf_counter()
        n = len(episodes)
        sums = self._allreduce([sum(r[k] for r in rows) for k in ("reward", "solved", "efficiency", "diversity",
                                                                  "spam", "invalid")]
                               + [sum(ep.success for ep in episodes), sum(len(ep.turns) for ep in episodes),
                                  float(n), float(gen_tokens), float(sum(sum(s.mask) for s in samples)),
                                  float(self._exec.workers if self._exec is not None else 0), float(self._lost),
                                  float(self._signal[0]), float(self._signal[1]),
                                  sum(r["reward"] ** 2 for r in rows), float(self._signal[2])])
        total_eps = max(sums[8], 1.0)
        record: dict[str, Any] = {
            "step": self.step_no + 1, **stats,
            "reward": sums[0] / total_eps,
            **{f"reward/{k}": sums[i + 1] / total_eps for i, k in enumerate(
                ("solved", "efficiency", "diversity", "spam", "invalid"))},
            "reward/div_weight": rows[0]["div_weight"] if rows else 0.0,
            "success": sums[6] / total_eps, "turns": sums[7] / total_eps, "episodes": int(sums[8]),
            "gen_tokens": int(sums[9]), "policy_tokens": int(sums[10]),
            "rollout/workers": int(sums[11]),  # the job's env workers, over all processes
            "rollout/lost_episodes": int(sums[12]),  # left out with their groups (see rollout.played)
            "groups/n": int(sums[14]),  # groups trained on this step (over all processes)
            "groups/nonzero_adv": sums[13] / max(sums[14], 1.0),  # share of them with any learning signal
            "groups/success_signal": sums[16] / max(sums[14], 1.0),  # share whose rollouts' verdicts differ
            "reward_std": max(sums[15] / total_eps - (sums[0] / total_eps) ** 2, 0.0) ** 0.5,
            "gen_tokens_per_s": sums[9] / self.world / max(gen_s, 1e-9),
            "time/rollout_s": t1 - t0, "time/update_s": t2 - t1, "time/sync_s": t3 - t2, "time/step_s": t3 - t0,
            "lr": float(self.scheduler.get_last_lr()[0]) if self.scheduler is not None else c.optim.lr,
        }
        if self.cuda:  # this process's peak since the start (what --dry-run's allocated_peak estimates)
            record["memory/max_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        self.step_no += 1
        self.position += c.groups_per_step
        self.metrics.log(record)
        if c.eval.every and self.step_no % c.eval.every == 0:
            self.metrics.log({"step": self.step_no, **self.evaluate()})
        if c.save_every and self.step_no % c.save_every == 0 and (self.save_final or self.step_no < c.steps):
            self.save()
        return record

    def train(self, progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        out = []
        while self.step_no < self.config.steps:
            record = self.train_step()
            out.append(record)
            if progress is not None and self.rank == 0:
                progress(record)
        self.metrics.close()
        return out

    def evaluate(self) -> dict[str, float]:
        """Held-out tasks with the same runner: success, score and mean steps."""
        import envh

        c = self.config
        sources = self.eval_sources or self.sources
        items = data.eval_items(sources, c.eval.episodes)
        mine = items[self.rank::self.world]
        sampling = SamplingConfig(max_new_tokens=c.max_response_tokens, temperature=c.eval.temperature,
                                  top_p=c.top_p, stop=self.sampling.stop)
        seed = c.seed if c.eval.seed is None else c.eval.seed
        options = {"max_turns": c.max_turns, "max_context": c.max_prompt_tokens + c.max_response_tokens,
                   "history": c.history, "seed": derive_seed(seed, "eval-sample", self.step_no)}
        if c.rollout.executor is not None:  # the same workers as training rollouts
            from .remote import RemoteJob, play_remote

            remote = [RemoteJob(spec=sources[k].spec, task=task, seed=derive_seed(seed, "eval", i), group=i)
                      for i, (k, task) in enumerate(mine)]
            with self._generating():
                eps = play_remote(remote, self._executor(), self.gen, self.segments, sampling,
                                  run_id=f"grpo-eval{self.step_no}", linger_s=c.rollout.linger_s,
                                  host=c.rollout.host, exchange=self._exchange(), **options)
        else:
            jobs = [Job(env=envh.make(sources[k].spec), task=task, seed=derive_seed(seed, "eval", i), group=i)
                    for i, (k, task) in enumerate(mine)]
            try:
                with self._generating():
                    eps = play(jobs, self.gen, self.segments, sampling, **options)
            finally:
                for job in jobs:
                    job.env.close()
        self._write_eval(eps)
        s = self._allreduce([sum(e.success for e in eps), sum(e.score for e in eps),
                             sum(len(e.turns) for e in eps), float(len(eps))])
        n = max(s[3], 1.0)
        return {"eval/success": s[0] / n, "eval/score": s[1] / n, "eval/steps": s[2] / n, "eval/episodes": s[3]}

    def _write_eval(self, episodes: list[Episode]) -> None:
        """One row per held-out episode in ``eval/step-N.jsonl`` (every rank's, written by
        rank 0), written whole and then renamed, so a killed run leaves it whole or absent."""
        import json

        rows = [{"task": e.task, "success": bool(e.success), "score": float(e.score), "steps": len(e.turns),
                 "stop": e.stop} for e in episodes]
        if self.world > 1:  # every rank played its share; rank 0 writes them all
            import torch.distributed as dist

            gathered: list[Any] = [None] * self.world
            dist.all_gather_object(gathered, rows)
            rows = [r for part in gathered for r in part]
        if self.rank:
            return
        folder = Path(self.config.output_dir) / "eval"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"step-{self.step_no}.jsonl.tmp"
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        os.replace(tmp, folder / f"step-{self.step_no}.jsonl")

    # -- checkpoints ---------------------------------------------------------------------
    def save(self) -> Path:
        return checkpoint.save(self)

    def load(self) -> bool:
        return checkpoint.load(self)

    def close(self) -> None:
        if self._exec is not None:
            self._exec.close()
            self._exec = None
        self.gen.close()
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def one_process_group() -> None:
    """The launcher's variables for a job of one process (a free loopback port), set when
    no launcher set them: ``deepspeed.init_distributed`` then starts a group of one instead
    of looking for MPI (``mpi4py``), which a plain ``envh train`` on one GPU would hit."""
    import socket

    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(sock.getsockname()[1])


class _gathered_for_generation:  # noqa: N801 - used as a context manager, like contextlib's
    """ZeRO-3: the engine's parameters gathered on every process with its fetch hooks off
    for the time; the hooks come back (and the fetch trace is reset) on exit. As TRL's
    ``remove_hooks`` / ``add_hooks`` (trl/models/utils.py, v1.16.0)."""

    def __init__(self, engine: Any) -> None:
        import deepspeed

        self.engine = engine
        self.gather = deepspeed.zero.GatheredParameters(list(engine.module.parameters()))

    def _offload(self) -> Any:
        opt = self.engine.optimizer
        return opt.parameter_offload if hasattr(opt, "parameter_offload") else opt

    def __enter__(self) -> None:
        self.gather.__enter__()
        offload = self._offload()
        for module in offload.module.modules():
            for _, param in [*module.named_parameters(recurse=False), *module.ds_external_parameters()]:
                param.ds_active_sub_modules.clear()
        for hook in [*offload.forward_hooks, *offload.backward_hooks]:
            hook.remove()
        offload.forward_hooks, offload.backward_hooks = [], []

    def __exit__(self, *exc: object) -> None:
        offload = self._offload()
        coordinator = getattr(offload, "param_coordinator", None)
        if coordinator is not None and not coordinator.is_invalid_trace():
            coordinator._invalidate_trace()
        offload._register_deepspeed_module(offload.module)
        self.gather.__exit__(*exc)


def _stack(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=rows[0].dtype)
    for r, t in enumerate(rows):
        n = min(width, t.shape[0])
        out[r, :n] = t[:n]
    return out.to(rows[0].device)

