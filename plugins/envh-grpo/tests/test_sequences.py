"""Token segments from the chat template, conversations and packing into samples."""

from __future__ import annotations

import pytest
from envh_grpo.rollout import PREFILL
from envh_grpo.sequences import ChatSegments, Conversation, Turn, pack


def test_segments_render_the_template_once_per_part(tokenizer):
    seg = ChatSegments(tokenizer, PREFILL)
    assert tokenizer.decode(seg.gen_ids) == "<|im_start|>assistant\n<action>"
    eos = tokenizer.eos_token_id
    assert seg.close([5, 6, eos]) == tokenizer("\n", add_special_tokens=False)["input_ids"]  # EOS is the engine's
    assert seg.close([5, 6]) == [eos, *tokenizer("\n", add_special_tokens=False)["input_ids"]]
    assert tokenizer.decode(seg.user("Numbers: 1, 2")) == "<|im_start|>user\nNumbers: 1, 2<|im_end|>\n"
    head = tokenizer.decode(seg.head("SYS", "first"))
    assert head == "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nfirst<|im_end|>\n"


def test_each_prompt_extends_the_last_with_the_engine_ids_verbatim(tokenizer):
    seg = ChatSegments(tokenizer, PREFILL)
    conv = Conversation(seg, seg.head("SYS", "obs 0"))
    p0 = conv.prompt()
    odd = [9999, 12, 7]  # ids that would not survive a decode/encode round trip unchanged
    conv.add(odd, seg.user("obs 1"))
    p1 = conv.prompt()
    assert p1[:len(p0) + 3] == p0 + odd
    assert p1[-len(seg.gen_ids):] == seg.gen_ids


def test_history_window_keeps_the_head_and_the_last_exchanges(tokenizer):
    seg = ChatSegments(tokenizer, PREFILL)
    head = seg.head("SYS", "obs 0")
    conv = Conversation(seg, head, history=1)
    conv.add([11], seg.user("obs 1"))
    conv.add([22], seg.user("obs 2"))
    p = conv.prompt()
    assert p[:len(head)] == head and 11 not in p[len(head):] and 22 in p
    assert Conversation(seg, head, history=0).prompt() == head + seg.gen_ids


def _turn(prompt, completion):
    return Turn(prompt_ids=tuple(prompt), completion_ids=tuple(completion),
                logprobs=tuple(-0.5 for _ in completion))


def test_pack_merges_extending_turns_and_masks_only_completions():
    t0 = _turn([1, 2, 3], [4, 5])
    t1 = _turn([1, 2, 3, 4, 5, 6, 7], [8])
    (sample,) = pack([t0, t1], [0.5, -1.0])
    assert sample.ids == (1, 2, 3, 4, 5, 6, 7, 8)
    assert sample.mask == (0, 0, 0, 1, 1, 0, 0, 1)
    assert sample.advantages == (0, 0, 0, 0.5, 0.5, 0, 0, -1.0)
    assert sample.engine_logprobs == (0, 0, 0, -0.5, -0.5, 0, 0, -0.5)


def test_pack_starts_a_new_sample_when_the_history_was_trimmed():
    t0 = _turn([1, 2], [3])
    t1 = _turn([1, 9], [4])  # not an extension of [1, 2, 3]
    samples = pack([t0, t1], [1.0, 1.0])
    assert [s.ids for s in samples] == [(1, 2, 3), (1, 9, 4)]
    assert [s.mask for s in samples] == [(0, 0, 1), (0, 0, 1)]


def test_pack_handles_empty_completions_and_refuses_mismatches():
    (sample,) = pack([_turn([1, 2], [])], [1.0])
    assert sample.mask == (0, 0)
    assert pack([], []) == []
    with pytest.raises(ValueError, match="advantages"):
        pack([_turn([1], [2])], [])
    with pytest.raises(ValueError, match="log-probs"):
        pack([Turn(prompt_ids=(1,), completion_ids=(2, 3), logprobs=(0.0,))], [1.0])
