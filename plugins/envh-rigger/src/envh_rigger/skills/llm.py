"""The LLM inducer: an OpenAI-compatible chat model writes memory items as JSON.

The model sees the task goal, the tools, and the case's trajectories (actions rendered
as calls, observations trimmed); it answers ``{"items": [{title, when_to_use,
content}]}``. The answer is validated; on a malformed answer the exact problem is sent
back and the model retries, at most ``max_retries`` times, after which the case yields
no items (counted in ``stats``) rather than stopping the whole induction.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import attrs

from .induce import InductionCase, goal_summary, render_action
from .records import EpisodeView, MemoryItem, SkillError

SYSTEM = """You distil reusable skills from an agent's episodes, as memory items.
A memory item is a short, general lesson that helps on *other* tasks of the same kind:
- title: at most 12 words, an imperative ("Check X before Y").
- when_to_use: one sentence naming the situation in which the lesson applies.
- content: 1-3 sentences: what to do or avoid, and why, from the evidence.
Compare the successful and the failed episode when both are given: the lesson is what
the success did that the failure did not. From a failure alone, say what to avoid.
Do not copy task-specific numbers or ids unless they define the lesson.
Answer with one JSON object and nothing else:
{"items": [{"title": "...", "when_to_use": "...", "content": "..."}]} with 1 to 3 items."""
LIMITS = {"title": 120, "when_to_use": 400, "content": 1200}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


class InvalidAnswer(ValueError):
    """The model's answer is not valid memory-item JSON; the message says why."""


def parse_items(text: str | None) -> list[dict[str, str]]:
    """Validate a model answer; raises ``InvalidAnswer`` with a message for the model."""
    if not text or not text.strip():
        raise InvalidAnswer("The answer was empty. Reply with the JSON object only.")
    body = _FENCE.sub("", text.strip())
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"The answer is not valid JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno}). Reply with the JSON object only.") from exc
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise InvalidAnswer('The answer must be an object with an "items" list.')
    if not 1 <= len(data["items"]) <= 3:
        raise InvalidAnswer(f'"items" must hold 1 to 3 items, not {len(data["items"])}.')
    out = []
    for n, item in enumerate(data["items"]):
        if not isinstance(item, dict):
            raise InvalidAnswer(f"items[{n}] must be an object.")
        extra = sorted(set(item) - set(LIMITS))
        if extra:
            raise InvalidAnswer(f"items[{n}] has unknown key(s) {extra}; use only {sorted(LIMITS)}.")
        for key, limit in LIMITS.items():
            value = item.get(key)
            if not isinstance(value, str) or not value.strip():
                raise InvalidAnswer(f'items[{n}].{key} must be a non-empty string.')
            if len(value) > limit:
                raise InvalidAnswer(f"items[{n}].{key} is {len(value)} characters; keep it under {limit}.")
        out.append({k: " ".join(item[k].split()) for k in LIMITS})
    return out


def render_episode(ep: EpisodeView, label: str, max_steps: int = 30) -> str:
    """An episode as numbered steps: action, then what the env answered (trimmed)."""
    lines = [f"## {label} episode ({'success' if ep.success else 'failure'}, {len(ep.steps)} steps)"]
    for n, step in enumerate(ep.steps[:max_steps], start=1):
        obs = " ".join(step.observation.split())[:300]
        mark = f" [rejected: {step.rejected[:160]}]" if step.rejected else ""
        lines.append(f"{n}. {render_action(step.action)}{mark}\n   -> {obs}")
    if len(ep.steps) > max_steps:
        lines.append(f"... {len(ep.steps) - max_steps} more step(s)")
    return "\n".join(lines)


def build_prompt(case: InductionCase) -> str:
    tools = "\n".join(f"- {t.name}: {t.description}" for t in case.tools) or "- (not recorded)"
    parts = [f"# Task\n{goal_summary(case.goal, 1200)}", f"# Tools\n{tools}"]
    if case.success is not None:
        parts.append(render_episode(case.success, "Successful"))
    if case.failure is not None:
        parts.append(render_episode(case.failure, "Failed"))
    return "\n\n".join(parts)


@attrs.define
class LLMInducer:
    """Memory items from an OpenAI-compatible model; ``stats`` counts calls, retries,
    give-ups and tokens. The API key is read from ``api_key_env`` (never passed in)."""

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 2
    temperature: float = 0.0
    json_mode: bool = True  # response_format=json_object; turn off for endpoints without it
    stats: dict[str, int] = attrs.field(
        factory=lambda: {"calls": 0, "retries": 0, "gave_up": 0, "prompt_tokens": 0, "completion_tokens": 0})
    _client: Any = None

    @property
    def name(self) -> str:
        return f"llm:{self.model}"

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(base_url=self.base_url, api_key=os.environ.get(self.api_key_env) or "unused",
                                  max_retries=2, timeout=120.0)
        return self._client

    def _ask(self, messages: list[dict[str, str]]) -> str | None:
        from openai import APIError

        try:
            extra = {"response_format": {"type": "json_object"}} if self.json_mode else {}
            resp = self._get_client().chat.completions.create(
                model=self.model, messages=messages, temperature=self.temperature, **extra)
        except APIError as exc:  # the endpoint is down or refuses: no case can succeed
            raise SkillError(f"Inducer model {self.model!r} at {self.base_url or 'default endpoint'} "
                             f"failed: {exc!r}") from exc
        self.stats["calls"] += 1
        if resp.usage is not None:
            self.stats["prompt_tokens"] += resp.usage.prompt_tokens or 0
            self.stats["completion_tokens"] += resp.usage.completion_tokens or 0
        return resp.choices[0].message.content if resp.choices else None

    def induce(self, case: InductionCase) -> list[MemoryItem]:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": build_prompt(case)}]
        for attempt in range(self.max_retries + 1):
            answer = self._ask(messages)
            try:
                parsed = parse_items(answer)
            except InvalidAnswer as exc:
                if attempt == self.max_retries:
                    break
                self.stats["retries"] += 1
                messages += [{"role": "assistant", "content": answer or ""},
                             {"role": "user", "content": f"Invalid answer: {exc} Try again."}]
                continue
            prov = (case.provenance(self.name),)
            return [MemoryItem(provenance=prov, **fields) for fields in parsed]
        self.stats["gave_up"] += 1
        return []

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
