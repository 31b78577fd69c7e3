"""``--dry-run`` figures: memory per GPU and tokens per step, from the config and the
model's ``config.json`` alone (no weights loaded, no torch imported).

Memory (bytes, per GPU, N data-parallel GPUs, P parameters, ZeRO stage z):
weights 2P (bf16; 2P/N under ZeRO-3, 0 with parameter offload), gradients 2P (2P/N from
ZeRO-2), Adam state 12P (fp32 master, m, v; /N from ZeRO-1, 0 with optimizer offload),
the frozen reference 2P (2P/N under ZeRO-3) when ``kl_coef > 0``, activations of one
micro-batch (a layer's input kept per layer with gradient checkpointing, ~34·h bytes per
token per layer without) plus fp32 logits and their log-softmax at the positions it trains on
(``logit_positions``), and vLLM's reserved share of the device (``engine: vllm``).
A planning figure, not a measurement.
"""

from __future__ import annotations

from typing import Any

#: Parameter counts of models named in shipped configs, for machines without their files.
KNOWN = {"Qwen/Qwen3-8B-Base": {"params": 8.19e9, "hidden_size": 4096, "num_hidden_layers": 36,
                                "vocab_size": 151936, "max_position_embeddings": 32768}}
GIB = 1024 ** 3


def param_count(mc: dict[str, Any]) -> float:
    """Parameters of a decoder-only transformer from its config (embeddings included)."""
    if "params" in mc:
        return float(mc["params"])
    h, layers, vocab = mc["hidden_size"], mc["num_hidden_layers"], mc["vocab_size"]
    inter = mc.get("intermediate_size", 4 * h)
    heads = mc.get("num_attention_heads", 1)
    kv = mc.get("num_key_value_heads", heads)
    head_dim = mc.get("head_dim", h // heads)
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2
    mlp = 3 * h * inter
    emb = vocab * h * (1 if mc.get("tie_word_embeddings", False) else 2)
    return float(layers * (attn + mlp + 2 * h) + emb + h)


def tokens_per_step(config: Any) -> dict[str, int]:
    """Upper bounds: generated tokens and trained tokens of one step."""
    eps = config.episodes_per_step
    turn = config.max_prompt_tokens + config.max_response_tokens
    if config.history is None:  # one growing sequence per episode, capped by the context budget
        trained = eps * turn
    else:  # every turn is its own sample
        trained = eps * config.max_turns * turn
    return {"episodes": eps, "generated_max": eps * config.max_turns * config.max_response_tokens,
            "trained_max": trained, "sequence_max": turn}


def logit_positions(config: Any) -> int:
    """Positions of a micro-batch that go through the LM head: only those some row trains
    on (the trainer's ``logits_to_keep``). A turn's sample (``history`` set) trains on at
    most one reply; an episode's sequence on all of its replies; never more than the sequence."""
    seq = config.max_prompt_tokens + config.max_response_tokens
    per_row = config.max_response_tokens * (config.max_turns if config.history is None else 1)
    return min(seq, config.micro_batch * per_row)


def memory(config: Any, mc: dict[str, Any], *, world: int, gpu_gib: float = 80.0) -> dict[str, Any]:
    """Estimated GiB per GPU, by item."""
    p = param_count(mc)
    ds = config.deepspeed
    z = ds.zero_stage
    n = max(world, 1)
    weights = 0.0 if ds.offload_params else 2 * p / (n if z >= 3 else 1)
    grads = 2 * p / (n if z >= 2 else 1)
    adam = 0.0 if ds.offload_optimizer else 12 * p / (n if z >= 1 else 1)
    ref = (2 * p / (n if z >= 3 else 1)) if config.loss.kl_coef > 0 else 0.0
    h, layers, vocab = mc["hidden_size"], mc["num_hidden_layers"], mc["vocab_size"]
    seq = config.max_prompt_tokens + config.max_response_tokens
    tokens = config.micro_batch * seq
    per_layer = 2 * h if ds.gradient_checkpointing else 34 * h
    acts = tokens * layers * per_layer + config.micro_batch * logit_positions(config) * vocab * 4 * 2
    vllm = config.vllm.gpu_memory_utilization * gpu_gib * GIB if config.engine == "vllm" else 0.0
    out = {"weights": weights, "gradients": grads, "optimizer": adam, "reference": ref, "activations": acts,
           "vllm_reserved": vllm}
    gib: dict[str, Any] = {k: round(v / GIB, 2) for k, v in out.items()}
    gib["total"] = round(sum(out.values()) / GIB, 2)
    gib["device"] = gpu_gib
    gib["fits"] = gib["total"] <= gpu_gib  # upper bound: every sequence at full length
    gib["params_billion"] = round(p / 1e9, 3)
    return gib
