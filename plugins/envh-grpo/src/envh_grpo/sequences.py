"""Token-faithful multi-turn sequences: prompts built from token ids, never from re-read text.

A conversation is kept as token segments:

    head                          system + first observation (the chat template, once)
    gen                           the assistant header and the action prefill
    completion_k                  exactly the ids the engine sampled at turn k
    close_k                       what ends the assistant message (only the part the engine
                                  did not produce itself, e.g. "\\n" after <|im_end|>)
    user_k                        the next observation (the chat template, once per turn)

The prompt of turn t is ``head + Σ_{k in window}(gen + completion_k + close_k + user_{k+1})
+ gen``; with an unbounded history each prompt extends the previous one, so a whole episode
packs into one training sequence whose loss mask is 1 exactly on the completion ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class Turn:
    """One policy turn as the engine saw and produced it."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish: str = "stop"  # "stop" (EOS or a stop string) or "length"


@attrs.frozen(kw_only=True)
class Sample:
    """One training sequence: ids, a loss mask (1 on policy tokens), the engine's
    log-probs and the advantage of each token (0 off the mask)."""

    ids: tuple[int, ...]
    mask: tuple[int, ...]
    engine_logprobs: tuple[float, ...]
    advantages: tuple[float, ...]
    episode: int = 0


class ChatSegments:
    """Renders the chat template once per turn into token segments (see the module doc).

    :param tokenizer: a Hugging Face tokenizer with a chat template.
    :param prefill: text every reply starts with (``<action>`` for the text format); its ids
        are part of the prompt, never of the policy's tokens.
    """

    _PROBE = "\u2063probe\u2063"  # a reply text no template alters

    def __init__(self, tokenizer: Any, prefill: str = "") -> None:
        self.tok = tokenizer
        self.prefill = prefill
        sys_user = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        plain = self._render(sys_user, gen=False)
        with_gen = self._render(sys_user, gen=True)
        if not with_gen.startswith(plain):
            raise ValueError("the chat template's generation prompt does not extend the conversation")
        self.gen_text = with_gen[len(plain):]
        replied = self._render([*sys_user, {"role": "assistant", "content": self._PROBE}], gen=False)
        if not replied.startswith(with_gen + self._PROBE):
            raise ValueError("the chat template rewrites assistant replies; token-faithful turns need one "
                             "that appends them verbatim")
        self.close_text = replied[len(with_gen) + len(self._PROBE):]
        self._replied = replied
        self.gen_ids = self._ids(self.gen_text) + self._ids(prefill)
        self.close_ids = self._ids(self.close_text)
        eos = getattr(tokenizer, "eos_token_id", None)
        self.eos_id: int | None = eos if isinstance(eos, int) else None

    def _render(self, messages: list[dict[str, str]], *, gen: bool) -> str:
        text = self.tok.apply_chat_template(messages, add_generation_prompt=gen, tokenize=False)
        return str(text)

    def _ids(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def head(self, system: str, observation: str) -> list[int]:
        """System message and first observation, as the template renders them."""
        return self._ids(self._render([{"role": "system", "content": system},
                                       {"role": "user", "content": observation}], gen=False))

    def user(self, observation: str) -> list[int]:
        """One more user message (an environment turn), rendered by the template."""
        base = self._replied
        text = self._render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                             {"role": "assistant", "content": self._PROBE},
                             {"role": "user", "content": observation}], gen=False)
        if not text.startswith(base):
            raise ValueError("the chat template re-renders earlier messages when one is added")
        return self._ids(text[len(base):])

    def close(self, completion: Sequence[int]) -> list[int]:
        """Closing ids after ``completion``: the template's end of message, minus the EOS
        the engine already produced."""
        if completion and self.close_ids and completion[-1] == self.close_ids[0]:
            return self.close_ids[1:]
        return list(self.close_ids)


class Conversation:
    """One episode's segments and the prompt of its next turn (window of ``history`` turns)."""

    def __init__(self, segments: ChatSegments, head: list[int], history: int | None = None) -> None:
        self.seg = segments
        self.head = list(head)
        self.history = history
        self.exchanges: list[list[int]] = []  # gen + completion + close + next user, per turn

    def prompt(self) -> list[int]:
        if self.history is None:
            window = self.exchanges
        else:
            window = self.exchanges[-self.history:] if self.history > 0 else []
        return self.head + [t for ex in window for t in ex] + self.seg.gen_ids

    def add(self, completion: Sequence[int], next_user: Sequence[int]) -> None:
        self.exchanges.append([*self.seg.gen_ids, *completion, *self.seg.close(completion), *next_user])


def pack(turns: Sequence[Turn], turn_advantages: Sequence[float], episode: int = 0) -> list[Sample]:
    """Training samples of one episode: consecutive turns whose prompt extends the previous
    sequence merge into one sample; a turn whose prompt does not (a trimmed history) starts
    a new one. The mask is 1 exactly on completion ids."""
    if len(turns) != len(turn_advantages):
        raise ValueError(f"{len(turns)} turns but {len(turn_advantages)} advantages")
    out: list[Sample] = []
    ids: list[int] = []
    mask: list[int] = []
    lps: list[float] = []
    adv: list[float] = []

    def flush() -> None:
        if ids:
            out.append(Sample(ids=tuple(ids), mask=tuple(mask), engine_logprobs=tuple(lps),
                              advantages=tuple(adv), episode=episode))

    for turn, a in zip(turns, turn_advantages, strict=True):
        if len(turn.logprobs) != len(turn.completion_ids):
            raise ValueError("a turn's log-probs must match its completion ids one to one")
        prompt = list(turn.prompt_ids)
        if ids and prompt[:len(ids)] == ids:
            extra = prompt[len(ids):]
        else:
            flush()
            ids, mask, lps, adv = [], [], [], []
            extra = prompt
        ids += extra
        mask += [0] * len(extra)
        lps += [0.0] * len(extra)
        adv += [0.0] * len(extra)
        ids += turn.completion_ids
        mask += [1] * len(turn.completion_ids)
        lps += turn.logprobs
        adv += [float(a)] * len(turn.completion_ids)
    flush()
    return out
