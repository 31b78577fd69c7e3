"""The LLM judge of WebArena's fuzzy string match, on any OpenAI-compatible endpoint.

WebArena asks GPT-4 whether a student's answer is semantically equivalent to the reference
("correct" / "incorrect" / "partially correct"), and for unachievable tasks whether a report
refers to the reason given ("same" / "different"). The same questions go to the endpoint
configured here: ``base_url``, ``model`` and ``api_key`` (bridge config ``judge``, else
``WA_JUDGE_BASE_URL`` / ``WA_JUDGE_MODEL`` / ``OPENAI_API_KEY``; the environment's key is sent
only to the environment's endpoint, never to a ``base_url`` a spec names).

A reply with no verdict in it, or a request the endpoint refuses (HTTP 400: the answer made
the prompt too long, or a content filter tripped on it), is the answer's doing:
``NoVerdict``, which the evaluator scores 0 with the reason (WebArena's ``assert`` would
crash the evaluation and drop the task). A judge that cannot be reached, times out or
fails on its side (5xx) is ``InfraError``: the same answer may get a verdict next time.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
from envh import errors


@attrs.frozen(kw_only=True)
class JudgeConfig:
    base_url: str | None = None
    model: str = "gpt-4-1106-preview"
    api_key: str | None = None
    timeout: float = 60.0

    @classmethod
    def from_config(cls, data: dict[str, Any] | None) -> JudgeConfig:
        data = dict(data or {})
        unknown = set(data) - {"base_url", "model", "api_key", "timeout"}
        if unknown:
            raise errors.SpecError(f"webarena judge: unknown keys {sorted(unknown)} "
                                   "(known: base_url, model, api_key, timeout)")
        env_url = os.environ.get("WA_JUDGE_BASE_URL")
        base_url = data.get("base_url") or env_url
        # the host's key goes only to the host's endpoint: a spec (data from anywhere) that names
        # its own base_url gets the key it names, never OPENAI_API_KEY
        own_endpoint = not data.get("base_url") or data.get("base_url") == env_url
        return cls(base_url=base_url,
                   model=data.get("model") or os.environ.get("WA_JUDGE_MODEL") or "gpt-4-1106-preview",
                   api_key=data.get("api_key") or (os.environ.get("OPENAI_API_KEY") if own_endpoint else None),
                   timeout=float(data.get("timeout", 60.0)))


class NoVerdict(Exception):  # noqa: N818 - an outcome, not a fault of the code
    """The judge gave no verdict on this answer (see the module docstring)."""


def _ask(cfg: JudgeConfig, prompt: str) -> str:
    if not cfg.base_url:
        raise errors.EnvError("A fuzzy_match task needs a judge: set config.judge.base_url "
                              "(or WA_JUDGE_BASE_URL) to an OpenAI-compatible endpoint.")
    import openai

    client = openai.OpenAI(base_url=cfg.base_url, api_key=cfg.api_key or "unused", timeout=cfg.timeout,
                           max_retries=2)
    try:
        reply = client.chat.completions.create(
            model=cfg.model, temperature=0, top_p=1.0, max_tokens=768,
            messages=[{"role": "system", "content": "You are a helpful assistant"},
                      {"role": "user", "content": prompt}])
    except openai.BadRequestError as exc:
        raise NoVerdict(f"the judge refused the request (HTTP {exc.status_code}): {exc}"[:500]) from exc
    except openai.OpenAIError as exc:
        raise errors.InfraError(f"The fuzzy-match judge at {cfg.base_url} failed: {exc}") from exc
    return str(reply.choices[0].message.content or "").lower()


def fuzzy_match(cfg: JudgeConfig, pred: str, reference: str, question: str) -> float:
    """1.0 when the judge calls the answer correct; 0.0 for incorrect or partially correct."""
    prompt = ("Help a teacher to grade the answer of a student given a question. Keep in mind that the "
              "student may use different phrasing or wording to answer the question. The goal is to evaluate "
              "whether the answer is semantically equivalent to the reference answer.\n"
              f"question: {question}\nreference answer: {reference}\n"
              "all the string 'N/A' that you see is a special sequence that means 'not achievable'\n"
              f"student answer: {pred}\nConclude the judgement by correct/incorrect/partially correct.")
    answer = _ask(cfg, prompt)
    if "partially correct" in answer or "incorrect" in answer:
        return 0.0
    if "correct" in answer:
        return 1.0
    raise NoVerdict(f"the fuzzy-match judge gave no verdict: {answer[:200]!r}")


def unachievable_match(cfg: JudgeConfig, pred: str, reference: str, question: str) -> float:
    """1.0 when the judge finds the report refers to the reason the task cannot be done."""
    prompt = ("A task described in Task_1 cannot be completed for reason listed in Reason_1. A person tried "
              "to complete the task and failed, he reported his attempt in Report_1, check if Report_1 is "
              "refering to Reason_1, even implicitly. If match, return same, else, return different\n"
              f"Task_1 = {question}\nReason_1 = {reference}\nReport_1 = {pred}\nreturn [same] or [different]")
    answer = _ask(cfg, prompt)
    if "different" in answer:
        return 0.0
    if "same" in answer:
        return 1.0
    raise NoVerdict(f"the unachievable-task judge gave no verdict: {answer[:200]!r}")
