"""Helpers for tests of training machinery."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

#: with ``repeats``, the share of sampled tokens that are the model's main token, its
#: second one, and every other token together (at temperature 1, whatever the context)
REPEATS_SHARES = (0.93, 0.05, 0.02)


def write_random_model(folder: Path, like: str = "smollm2", *, seed: int = 0, repeats: bool = False) -> Path:
    """Write to ``folder`` a model of ``like``'s architecture and tokenizer with two small
    layers of seeded random weights (3.2 M parameters for SmolLM2-135M), and return it.

    For tests of training machinery that need a real model, not a good one: every arm of an
    experiment trains, evaluates and reports; a DeepSpeed run checkpoints. Two GRPO steps
    under DeepSpeed on two processes took 15 s with it against 63 s with SmolLM2-135M (an
    idle 2-core machine). Nothing is downloaded: ``like`` resolves as ``model`` does in a
    training config.

    Its replies are noise, so they all score alike (every one invalid) and GRPO's update is
    zero. With ``repeats=True`` its replies are one token over and over, with now and then a
    second token or any other (``REPEATS_SHARES``, nearly whatever the prompt): a turn
    sometimes repeats the previous turn's reply token for token, which the spam term
    penalizes, and sometimes not. Rewards then differ within a group and an update moves the
    weights, as tests of DeepSpeed's update and exact resume need. How often a reply repeats
    depends on its length n: 0.867**n (0.43 at 6 tokens, 0.03 at 24), so use short replies.
    Its output barely depends on the prompt, so a test that must see what the model was
    shown compares the episodes' tokens, not only the metrics. (Its output layer is then its
    own, not the embeddings: 6.4 M parameters.)"""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from envh_grpo.trainer import resolve_model

    source = resolve_model(like)
    config = AutoConfig.from_pretrained(str(source))
    config.update({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 16})
    if repeats:
        config.tie_word_embeddings = False
    tok = AutoTokenizer.from_pretrained(str(source))
    folder.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    if repeats:
        _make_repetitive(model, tok)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    for extra in source.glob("generation_config*.json"):
        shutil.copy(extra, folder / extra.name)
    return folder


def _make_repetitive(model, tok) -> None:  # type: ignore[no-untyped-def]
    """Make the next-token distribution nearly the same whatever the context: every token's
    embedding carries a large constant first component, which dominates the residual stream
    through the small random layers, so the final norm's output is close to 8 e_1; the output
    layer reads only that component, for two tokens."""
    import torch

    main, second = (tok.convert_tokens_to_ids(t) for t in ("1", "+"))
    if not (isinstance(main, int) and isinstance(second, int)) or main == second or tok.unk_token_id in (main, second):
        raise ValueError(f"{type(tok).__name__} has no distinct tokens '1' and '+' ({main}, {second})")
    share_main, share_second, share_rest = REPEATS_SHARES
    embeddings = model.get_input_embeddings().weight
    vocab, hidden = embeddings.shape
    scale = math.sqrt(hidden)  # RMSNorm of a vector dominated by one component c: about sqrt(hidden) there
    with torch.no_grad():
        embeddings[:, 0] = 50.0
        head = model.get_output_embeddings().weight
        head.zero_()
        # every other token's logit is 0: share_rest in all; the two tokens' logits give their shares
        head[main, 0] = math.log(share_main / share_rest * vocab) / scale
        head[second, 0] = math.log(share_second / share_rest * vocab) / scale
