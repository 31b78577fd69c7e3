"""The small random models the tests of training machinery use (``envh_grpo.testing``)."""

from __future__ import annotations

import pytest
import torch
from envh_grpo.testing import REPEATS_SHARES
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = ["Make 24 from 3 4 5 6.", "<|im_start|>user\nThe numbers are 1, 2, 11.<|im_end|>\n", "+ + 1 1 1"]


def _next_token(folder, text: str) -> torch.Tensor:
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(**tok(text, return_tensors="pt")).logits[0, -1]
    return torch.softmax(logits, -1)


def test_the_repeating_model_gives_its_shares_whatever_the_prompt(repeating_model):
    tok = AutoTokenizer.from_pretrained(str(repeating_model))
    main, second = tok.convert_tokens_to_ids(["1", "+"])
    for text in PROMPTS:
        probs = _next_token(repeating_model, text)
        assert float(probs[main]) == pytest.approx(REPEATS_SHARES[0], abs=0.01), text
        assert float(probs[second]) == pytest.approx(REPEATS_SHARES[1], abs=0.01), text


def test_the_random_models_replies_are_spread_over_the_vocabulary(random_model):
    for text in PROMPTS:
        assert float(_next_token(random_model, text).max()) < 0.01, text


def test_the_same_seed_writes_the_same_weights(tmp_path, repeating_model):
    from envh_grpo.testing import write_random_model

    again = write_random_model(tmp_path / "again", repeats=True)
    a = AutoModelForCausalLM.from_pretrained(str(repeating_model)).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(again)).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
