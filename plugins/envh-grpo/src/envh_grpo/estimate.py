"""``--dry-run`` figures: memory per GPU and tokens per step, from the config and the
model's ``config.json`` alone (no weights loaded, no torch imported). A planning figure
for a GPU node (DeepSpeed on unless ``deepspeed.enabled`` is false), not a measurement.

Sequences, as ``sequences.pack`` builds them. A turn's prompt extends the previous turn's
sequence while the history window keeps every earlier turn, so with ``history`` null or
>= ``max_turns`` − 1 an episode packs into ONE sequence; a smaller window starts a new
sequence every turn once it slides: ``max_turns − history`` sequences per episode. A
rollout ends before a prompt plus a reply would pass ``max_prompt_tokens +
max_response_tokens`` (S), so no sequence is longer than S.

Memory per GPU (N processes, P parameters, w bytes per weight: 2 in bf16, 4 in fp32):

* resident: weights w·P (w·P/N under ZeRO-3), gradients w·P (w·P/N from ZeRO-2),
  optimizer state (DeepSpeed in bf16: fp32 master + Adam m, v = 12·P, /N from ZeRO-1;
  in fp32 8·P; plain AdamW: m, v in the weights' dtype, 2w·P), the frozen reference
  when ``kl_coef`` > 0 (w·P/N under ZeRO-3, where the trainer shards it; a full copy
  otherwise), DeepSpeed's buffers (the gradient reduce bucket; under ZeRO-3 the
  parameters gathered for the module being run, the largest being the embedding or the
  LM head), and vLLM's share of the device (``engine: vllm``, its own weights and KV cache).
* the largest of the passes that come and go (``phases``):
  ``train`` — one micro-batch with gradients: each layer's input kept (gradient
  checkpointing) or every layer's activations, one layer recomputed in the backward pass,
  the attention mask, and the logits at the positions some row trains on
  (``logit_positions``): model-dtype logits, their fp32 copy kept for the backward pass,
  logsumexp's temporaries and the fp32 gradients, ``LOGIT_TRAIN_BYTES`` per logit, and the
  LM head's weight gradient (or, later in the backward pass, a layer's gradients);
  ``logprob`` — a no-grad pass (the reference, or the policy before several updates)
  over ``logprob_micro_batch`` rows, ``LOGIT_NOGRAD_BYTES`` per logit;
  ``generate`` (``engine: hf``) — the KV cache of every episode of the process at full
  context and a prefill layer's activations (under ZeRO-3 with several processes the
  policy is gathered whole for generation, as TRL does);
  ``step`` — the optimizer step's fp32 gradients and Adam's temporaries.
* ``CUDA_CONTEXT_GIB`` for the CUDA context and NCCL's buffers, which torch's allocator
  does not see (``allocated_peak`` leaves it and vLLM out: it is what
  ``torch.cuda.max_memory_allocated`` of the training process should come close to).
"""

from __future__ import annotations

from typing import Any

#: Architecture figures of models named in shipped configs, for machines without their files
#: (Qwen3-8B-Base's config.json).
KNOWN = {"Qwen/Qwen3-8B-Base": {"params": 8.19e9, "hidden_size": 4096, "num_hidden_layers": 36,
                                "vocab_size": 151936, "max_position_embeddings": 32768,
                                "intermediate_size": 12288, "num_attention_heads": 32,
                                "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": False}}
GIB = 1024 ** 3
#: Bytes per logit of a micro-batch with gradients (``loss.token_logprobs``, measured on CPU:
#: 16.8): the model-dtype logits (2), their fp32 copy (4), logsumexp's exp (4), then in the
#: backward pass the saved fp32 copy (4) with the gradients of logsumexp and gather (4 + 4)
#: and a temporary (4); the peak is in the backward pass.
LOGIT_TRAIN_BYTES = 16
#: Bytes per logit of a no-grad pass: model-dtype logits (2), fp32 copy (4), exp temporary (4).
LOGIT_NOGRAD_BYTES = 10
#: The CUDA context and NCCL's buffers (an allowance: outside torch's allocator).
CUDA_CONTEXT_GIB = 1.0
#: DeepSpeed's defaults (``deepspeed.runtime.zero.config``): the gradient reduce bucket and
#: ZeRO-3's prefetch bucket, in parameters.
REDUCE_BUCKET = 5e8
PREFETCH_BUCKET = 5e7


def param_count(mc: dict[str, Any]) -> float:
    """Parameters of a decoder-only transformer from its config (embeddings included)."""
    if "params" in mc:
        return float(mc["params"])
    h, layers, vocab = mc["hidden_size"], mc["num_hidden_layers"], mc["vocab_size"]
    heads, kv, head_dim, inter = _shape(mc)
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2
    mlp = 3 * h * inter
    emb = vocab * h * (1 if mc.get("tie_word_embeddings", False) else 2)
    return float(layers * (attn + mlp + 2 * h) + emb + h)


def _shape(mc: dict[str, Any]) -> tuple[int, int, int, int]:
    """(attention heads, key/value heads, head size, MLP width) with the usual defaults."""
    h = mc["hidden_size"]
    heads = mc.get("num_attention_heads", 1)
    kv = mc.get("num_key_value_heads") or heads
    head_dim = mc.get("head_dim") or h // heads
    return heads, kv, head_dim, mc.get("intermediate_size", 4 * h)


def sequence_length(config: Any) -> int:
    """S: the longest sequence a rollout produces (a prompt plus a reply)."""
    return int(config.max_prompt_tokens + config.max_response_tokens)


def samples_per_episode(config: Any) -> int:
    """Training sequences of a full-length episode (see the module doc)."""
    if config.history is None:
        return 1
    return max(1, config.max_turns - config.history)


def policy_tokens_per_sample(config: Any) -> int:
    """The most policy tokens one sequence holds: the replies of the turns it packs."""
    turns = config.max_turns if config.history is None else min(config.max_turns, config.history + 1)
    return min(sequence_length(config), turns * config.max_response_tokens)


def tokens_per_step(config: Any) -> dict[str, int]:
    """Upper bounds of one step: generated tokens, sequences, tokens the training pass
    forwards (``trained_max``) and policy tokens (the loss's)."""
    eps, seq, n = config.episodes_per_step, sequence_length(config), samples_per_episode(config)
    policy = min(config.max_turns * config.max_response_tokens,
                 policy_tokens_per_sample(config) + (n - 1) * config.max_response_tokens)
    return {"episodes": eps, "generated_max": eps * config.max_turns * config.max_response_tokens,
            "samples_max": eps * n, "trained_max": eps * n * seq, "policy_max": eps * policy,
            "sequence_max": seq}


def logit_positions(config: Any, rows: int | None = None) -> int:
    """Positions of a batch of ``rows`` sequences (default: a micro-batch) that go through
    the LM head: the union of the positions some row trains on (the trainer's
    ``logits_to_keep``), at most the S − 1 targets of a sequence. An episode packed into one
    sequence trains on replies spread over all of it."""
    rows = config.micro_batch if rows is None else rows
    return min(sequence_length(config) - 1, rows * policy_tokens_per_sample(config))


def _layer_bytes_per_token(mc: dict[str, Any], w: int) -> tuple[int, int]:
    """(kept for the backward pass, peak of a no-grad pass) per token of one decoder layer."""
    h = mc["hidden_size"]
    _, kv, head_dim, inter = _shape(mc)
    # norms' inputs and outputs, q/k/v (after rotary), attention output, o_proj input,
    # gate, up, activation and product of the MLP
    saved = 8 * h + 4 * kv * head_dim + 4 * inter
    transient = 3 * inter + 4 * h
    return saved * w, transient * w


def engine(config: Any) -> str:
    """The generation engine on a GPU node: ``auto`` is vLLM where it is installed (as the
    trainer decides), transformers otherwise."""
    if config.engine != "auto":
        return str(config.engine)
    import importlib.util

    return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"


def _uses_deepspeed(config: Any) -> bool:
    return bool(config.deepspeed.enabled != "false")


def _weight_bytes(config: Any) -> int:
    from .config import weights_dtype

    return 4 if weights_dtype(config, cuda=True) == "float32" else 2


def resident(config: Any, mc: dict[str, Any], world: int) -> dict[str, float]:
    """Bytes that stay on the device for the whole run."""
    p, n, w = param_count(mc), max(world, 1), _weight_bytes(config)
    ds, z = config.deepspeed, config.deepspeed.zero_stage
    if not _uses_deepspeed(config):  # one process, torch AdamW: m and v in the weights' dtype
        out = {"weights": w * p, "gradients": w * p, "optimizer": 2 * w * p, "zero_buffers": 0.0}
    else:
        state = 12 if w == 2 else 8  # bf16: fp32 master + m + v; fp32: m + v
        if w == 2 and z == 0:  # bf16 without ZeRO: fp32 gradients accumulate beside the master copy
            state += 4
        out = {"weights": 0.0 if ds.offload_params else w * p / (n if z >= 3 else 1),
               "gradients": w * p / (n if z >= 2 else 1),
               "optimizer": 0.0 if ds.offload_optimizer else state * p / (n if z >= 1 else 1),
               "zero_buffers": _zero_buffers(config, mc, p, w)}
    if config.loss.kl_coef > 0:  # the trainer shards the reference under ZeRO-3 only
        out["reference"] = w * p / (n if _uses_deepspeed(config) and z >= 3 else 1)
    else:
        out["reference"] = 0.0
    return out


def _zero_buffers(config: Any, mc: dict[str, Any], p: float, w: int) -> float:
    z = config.deepspeed.zero_stage
    bucket = w * min(REDUCE_BUCKET, p) if z >= 1 else 0.0
    if z < 3:
        return bucket
    h, layers, vocab = mc["hidden_size"], mc["num_hidden_layers"], mc["vocab_size"]
    largest = max(vocab * h, (p - vocab * h) / layers)  # the LM head (or embedding) or a layer
    return bucket + w * min(p, largest + PREFETCH_BUCKET)


def phases(config: Any, mc: dict[str, Any], world: int) -> dict[str, float]:
    """Peak bytes of each pass that comes and goes (see the module doc)."""
    p, n, w = param_count(mc), max(world, 1), _weight_bytes(config)
    h, layers, vocab = mc["hidden_size"], mc["num_hidden_layers"], mc["vocab_size"]
    _, kv, head_dim, _ = _shape(mc)
    seq = sequence_length(config)
    saved, transient = _layer_bytes_per_token(mc, w)
    _, _, _, inter = _shape(mc)
    tokens = config.micro_batch * seq
    ckpt = config.deepspeed.gradient_checkpointing
    kept = layers * h * w if ckpt else layers * saved
    # the backward pass starts at the logits (and the LM head's weight gradient); a layer's
    # backward comes after they are freed: its recomputed activations and their gradients
    logits = config.micro_batch * logit_positions(config) * (vocab * LOGIT_TRAIN_BYTES + h * w) + vocab * h * w
    layer = tokens * ((saved if ckpt else 0) + (3 * inter + 2 * h) * w)
    train = tokens * kept + config.micro_batch * seq * seq + max(logits, layer)  # + the attention mask
    out = {"train": float(train)}
    several = config.ppo_epochs > 1 or (config.ppo_mini_batch or config.episodes_per_step) < config.episodes_per_step
    if config.loss.kl_coef > 0 or several:
        rows = config.logprob_micro_batch
        out["logprob"] = float(rows * seq * transient
                               + rows * logit_positions(config, rows) * vocab * LOGIT_NOGRAD_BYTES)
    if engine(config) == "hf":
        batch = config.episodes_per_step // n  # every live episode of the process in one call
        kv_cache = batch * seq * 2 * layers * kv * head_dim * w
        gathered = w * p * (1 - 1 / n) if _uses_deepspeed(config) and config.deepspeed.zero_stage >= 3 else 0.0
        out["generate"] = float(kv_cache + batch * seq * transient + gathered)
    if _uses_deepspeed(config):
        z = config.deepspeed.zero_stage
        part = p / (n if z >= 1 else 1)
        out["step"] = 0.0 if config.deepspeed.offload_optimizer else float(part * (8 if w == 2 else 4))
    else:
        out["step"] = float(w * p)  # AdamW's sqrt(v) temporary (foreach)
    return out


def memory(config: Any, mc: dict[str, Any], *, world: int, gpu_gib: float = 80.0) -> dict[str, Any]:
    """Estimated GiB per GPU, by item; ``total`` = resident + the largest phase + vLLM + context."""
    res = resident(config, mc, world)
    ph = phases(config, mc, world)
    peak_phase = max(ph, key=lambda k: ph[k])
    name = engine(config)
    vllm = config.vllm.gpu_memory_utilization * gpu_gib * GIB if name == "vllm" else 0.0
    allocated = sum(res.values()) + ph[peak_phase]
    gib: dict[str, Any] = {"engine": name, **{k: round(v / GIB, 2) for k, v in res.items()}}
    gib |= {"transient": round(ph[peak_phase] / GIB, 2), "peak_phase": peak_phase,
            "phases": {k: round(v / GIB, 2) for k, v in ph.items()},
            "logits_train": round(config.micro_batch * logit_positions(config) * mc["vocab_size"]
                                  * LOGIT_TRAIN_BYTES / GIB, 2),
            "allocated_peak": round(allocated / GIB, 2), "vllm_reserved": round(vllm / GIB, 2),
            "cuda_context": CUDA_CONTEXT_GIB}
    total = (allocated + vllm) / GIB + CUDA_CONTEXT_GIB
    gib["total"] = round(total, 2)
    gib["device"] = gpu_gib
    gib["fits"] = total <= gpu_gib  # upper bound: every sequence at full length
    gib["params_billion"] = round(param_count(mc) / 1e9, 3)
    return gib
