"""Generation engines for rollouts: token ids in, token ids and log-probs out.

Both engines take prompts as token ids and return exactly the ids they sampled with the
log-prob of each under the sampling distribution (temperature and top-p applied), so the
trainer never re-tokenises text. Each prompt comes with its own seed and draws from its own
random stream, so a completion does not depend on which other prompts share its batch
(rollouts played in lock step and rollouts played by executor workers sample the same).

* ``hf`` — transformers ``generate`` on the training model itself (no weight sync).
* ``vllm`` — an in-process vLLM engine. On GPU weights are synced in place after every
  optimizer step; vLLM's CPU build cannot reload weights, so on CPU the engine is rebuilt
  from a saved copy of the weights (``sync``).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import attrs

ENGINES = ("hf", "vllm")


@attrs.frozen(kw_only=True)
class Generation:
    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish: str  # "stop" or "length"


@attrs.frozen(kw_only=True)
class SamplingConfig:
    max_new_tokens: int = 24
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ("</action>",)


class Engine(Protocol):
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                 seeds: Sequence[int]) -> list[Generation]:
        """One completion per prompt, the i-th sampled from a stream seeded by ``seeds[i]``."""

    def sync(self, model: Any) -> None:
        """Take the trained weights of ``model``."""

    def close(self) -> None:
        """Release the engine."""


def pad_id_for(tokenizer: Any) -> int:
    """A padding id the model is never allowed to sample, so padding is unambiguous.

    The tokenizer's own pad token is often its EOS, which a finished row legitimately
    ends with; we take a special token that is neither EOS nor used by the chat template.
    """
    eos = tokenizer.eos_token_id
    candidates = [tokenizer.pad_token_id, getattr(tokenizer, "unk_token_id", None),
                  *getattr(tokenizer, "all_special_ids", [])]
    template = str(getattr(tokenizer, "chat_template", "") or "")
    for cand in candidates:
        if isinstance(cand, int) and cand != eos and tokenizer.convert_ids_to_tokens(cand) not in template:
            return cand
    return int(tokenizer.vocab_size) - 1


class HFEngine:
    """transformers ``generate`` on the (training) model; batches all prompts of a turn."""

    name = "hf"

    def __init__(self, model: Any, tokenizer: Any) -> None:
        import torch

        self.torch = torch
        self.model, self.tok = model, tokenizer
        self.pad = pad_id_for(tokenizer)

    def sync(self, model: Any) -> None:
        self.model = model

    def close(self) -> None:
        self.model = None

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                 seeds: Sequence[int]) -> list[Generation]:
        torch = self.torch
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts need as many seeds, got {len(seeds)}")
        if not prompts:
            return []
        if sampling.max_new_tokens <= 0:
            return [Generation(ids=(), logprobs=(), finish="length") for _ in prompts]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad, dtype=torch.long)
        att = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):  # left padding: generation continues every row at the right
            if p:
                ids[row, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
                att[row, width - len(p):] = 1
        device = next(self.model.parameters()).device  # on GPU the model is on its rank's device
        ids, att = ids.to(device), att.to(device)
        sample = sampling.temperature > 0
        # greedy over what the row sampler leaves: it draws each row from its own stream
        options: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens, "do_sample": False, "pad_token_id": self.pad,
            "eos_token_id": self.tok.eos_token_id, "suppress_tokens": [self.pad],
            "output_scores": not sample, "return_dict_in_generate": True,
            "temperature": None, "top_p": None, "top_k": None}
        if sampling.stop:  # transformers' stop_strings preprocesses the vocabulary on every call
            options["stopping_criteria"] = self._stops(sampling.stop)
        sampler = _RowSampler(seeds, sampling.temperature, sampling.top_p) if sample else None
        if sampler is not None:
            from transformers import LogitsProcessorList

            options["logits_processor"] = LogitsProcessorList([sampler])
        was_training = self.model.training
        self.model.eval()
        # no_grad, not inference_mode: under ZeRO-3 parameters gathered here would become
        # inference tensors that the next backward cannot use. synced_gpus off: the trainer
        # gathers ZeRO-3 weights whole for the rollout, so each process generates alone
        # (as many calls as its own episodes need).
        try:
            with torch.no_grad():
                out = self.model.generate(input_ids=ids, attention_mask=att, synced_gpus=False, **options)
        finally:
            self.model.train(was_training)
        new = out.sequences[:, width:]
        if sampler is not None:
            logps = torch.stack(sampler.logps, dim=1) if sampler.logps else None
        else:
            logps = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in out.scores], dim=1) \
                if out.scores else None
        results = []
        for row in range(len(prompts)):
            toks = new[row].tolist()
            n = toks.index(self.pad) if self.pad in toks else len(toks)
            toks = toks[:n]
            if logps is None:
                lp = []
            elif sampler is not None:  # the sampler kept the chosen token's log-prob per step
                lp = logps[row, :n].tolist()
            else:
                lp = logps[row, torch.arange(n), torch.tensor(toks, dtype=torch.long)].tolist()
            stopped = bool(toks) and (toks[-1] == self.tok.eos_token_id or self._hit_stop(toks, sampling.stop))
            results.append(Generation(ids=tuple(toks), logprobs=tuple(float(x) for x in lp),
                                      finish="stop" if stopped or n < sampling.max_new_tokens else "length"))
        return results

    def _stops(self, stops: Sequence[str]) -> Any:
        from transformers import StoppingCriteria, StoppingCriteriaList

        torch, decode, tail = self.torch, self.tok.decode, 2 + max(len(s) for s in stops)

        class TailContains(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                done = [any(s in decode(row[-tail:].tolist(), skip_special_tokens=False) for s in stops)
                        for row in input_ids]
                return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

        return StoppingCriteriaList([TailContains()])

    def _hit_stop(self, toks: list[int], stops: Sequence[str]) -> bool:
        tail = self.tok.decode(toks[-8:], skip_special_tokens=False)
        return any(tail.endswith(s) or s in tail for s in stops)


class _RowSampler:
    """A logits processor that samples every row from its own seeded stream (temperature,
    then top-p as transformers' warpers do) and keeps the sampled token's log-prob; it
    leaves only that token finite, so greedy decoding emits it."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float) -> None:
        self.seeds, self.temperature, self.top_p = [int(s) for s in seeds], temperature, top_p
        self.gens: list[Any] = []
        self.logps: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if not self.gens:
            self.gens = [torch.Generator(device=scores.device).manual_seed(s) for s in self.seeds]
        logits = scores.float() / self.temperature
        if self.top_p < 1.0:
            sorted_logits, order = torch.sort(logits, descending=False, dim=-1)
            cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
            drop = cumulative <= (1 - self.top_p)
            drop[..., -1:] = False  # keep at least the most likely token
            logits = logits.masked_fill(drop.scatter(1, order, drop), float("-inf"))
        logp = torch.log_softmax(logits, dim=-1)
        probs = logp.exp()
        picks = torch.stack([torch.multinomial(probs[r], 1, generator=g)[0] for r, g in enumerate(self.gens)])
        self.logps.append(logp.gather(1, picks[:, None])[:, 0])
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(1, picks[:, None], 0.0)


def full_parameters(model: Any) -> Any:
    """``(name, tensor)`` of every parameter at full size. Under ZeRO-3 a parameter is a
    partition: it is gathered (a collective: every process iterates together) while the
    caller uses it."""
    for name, param in model.named_parameters():
        if hasattr(param, "ds_id"):
            import deepspeed

            with deepspeed.zero.GatheredParameters([param]):
                yield name, param.data
        else:
            yield name, param.data


def _vllm() -> Any:
    """Import vLLM; its import-time deprecation notices (torch.jit in its kernels) are silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        vllm = importlib.import_module("vllm")
        importlib.import_module("vllm.inputs")
        vllm.LLM  # noqa: B018 - vllm exports lazily: resolve now, inside the filter
    return vllm


class VLLMEngine:
    """An in-process vLLM engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) fed token ids.

    :param model_dir: an HF folder to serve.
    :param kv_cache_bytes: the KV cache on CPU (host RAM).
    :param rebuild: rebuild from saved weights on ``sync`` (vLLM's CPU build cannot load
        weights in place); on GPU weights are loaded into the running engine.
    """

    name = "vllm"

    def __init__(self, model_dir: str, *, dtype: str = "float32", gpu_memory_utilization: float = 0.5,
                 enforce_eager: bool = True, max_model_len: int = 2048, tensor_parallel: int = 1,
                 rebuild: bool | None = None, seed: int = 0, kv_cache_bytes: int = 1 << 28,
                 external_launcher: bool = False) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        import torch

        self.kwargs: dict[str, Any] = {"dtype": dtype, "enforce_eager": enforce_eager,
                                       "max_model_len": max_model_len, "seed": seed,
                                       "tensor_parallel_size": tensor_parallel,
                                       # log-probs under the sampling distribution (temperature applied), as the
                                       # trainer's; vLLM's default is the raw model's
                                       "logprobs_mode": "processed_logprobs"}
        if external_launcher:  # one engine per training process, on its own device, in the job's torch.distributed
            self.kwargs["distributed_executor_backend"] = "external_launcher"
        if torch.cuda.is_available():
            self.kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        else:  # on CPU the utilisation share means host RAM; a small explicit KV cache is what tests need,
            # and no torch.compile warm-up (minutes on a busy CPU)
            self.kwargs.update(kv_cache_memory_bytes=kv_cache_bytes, optimization_level=0)
        self.rebuild = (not torch.cuda.is_available()) if rebuild is None else rebuild
        self.model_dir = str(model_dir)
        self._tmp: str | None = None
        self.llm = self._build(self.model_dir)
        self.builds = 1

    def _build(self, folder: str) -> Any:
        LLM = _vllm().LLM
        with warnings.catch_warnings():  # vLLM's start-up deprecation notices are not ours to fix
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            return LLM(model=folder, tokenizer=self.model_dir, skip_tokenizer_init=False, **self.kwargs)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig,
                 seeds: Sequence[int]) -> list[Generation]:
        vllm = _vllm()
        SamplingParams, TokensPrompt = vllm.SamplingParams, vllm.inputs.TokensPrompt
        if not prompts:
            return []
        if sampling.max_new_tokens <= 0:
            return [Generation(ids=(), logprobs=(), finish="length") for _ in prompts]
        params = [SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p,
                                 max_tokens=sampling.max_new_tokens, stop=list(sampling.stop),
                                 include_stop_str_in_output=True, logprobs=0, seed=int(seeds[i]))
                  for i in range(len(prompts))]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False)
        results = []
        for out in outs:
            comp = out.outputs[0]
            ids = tuple(int(t) for t in comp.token_ids)
            lps = tuple(float(step[tok].logprob) for step, tok in zip(comp.logprobs or [], ids))
            results.append(Generation(ids=ids, logprobs=lps,
                                      finish="length" if comp.finish_reason == "length" else "stop"))
        return results

    def sync(self, model: Any) -> None:
        if not self.rebuild:  # GPU: in place, one parameter at a time (ZeRO-3 gathers each in turn)
            target = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
            for name, tensor in full_parameters(model):
                target.load_weights(weights=[(name, tensor)])
            # the KV of cached prefixes (every episode's system prompt) came from the old weights
            self.llm.reset_prefix_cache()
            return
        tmp = tempfile.mkdtemp(prefix="envh-grpo-vllm-")
        model.save_pretrained(tmp, safe_serialization=True)
        for name in os.listdir(self.model_dir):  # the config/tokenizer files the engine reads
            if name.endswith((".json", ".txt", ".model", ".jinja")) and not os.path.exists(os.path.join(tmp, name)):
                shutil.copy(os.path.join(self.model_dir, name), tmp)
        self.close()
        self.llm = self._build(tmp)
        self._tmp = tmp
        self.builds += 1

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        self.llm = None
        if llm is not None:
            del llm
            import gc

            gc.collect()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
