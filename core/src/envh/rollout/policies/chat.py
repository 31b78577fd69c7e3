"""ChatPolicy: the conversation, action parsing and turn records shared by chat policies.

A subclass only says how to get one completion (``_complete``) and, optionally, how to
count tokens and how large the model's context is; this base keeps the conversation
(system prompt, observations as user or tool messages, the model's replies), fits it to
the context, turns each reply into a ``PolicyStep`` and records the turn exactly
(``ModelTurn``: the request content-addressed, the completion, every parsed call, every
correction, the sampling parameters, token ids where the engine gives them).

Output that cannot be parsed is an invalid step (``action=None`` with the reason); the
next prompt says what was wrong and shows the last valid observation again, so the model
keeps the world in view.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

import attrs

from ... import errors
from ...types import Action, Observation, TaskRef, ToolSpec
from ..policy import PolicyStep
from ..trajectory import ModelTurn
from . import calls, context, prompts
from .context import NOT_EXECUTED

TOOL_FORMATS = ("native", "prompted", "text")
#: ``action_format`` spellings older configs use; ``tools`` is native where the policy can.
ACTION_FORMATS = ("auto", "tools", "text")
_ACTION = re.compile(r"<action>(.*?)</action>", re.S)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: Calls parsed from one reply at most; a reply with more is cut there (and says so).
MAX_CALLS = 32


@attrs.frozen(kw_only=True)
class Completion:
    """One model answer: text and/or native tool calls (``arguments`` as raw strings), and
    what the engine reports about it (token ids, per-token logprobs, sampling used).
    ``primed``: the reply continues the prefill (``text`` excludes it); ``written``: the
    generated text when the server's tool parser moved calls out of it."""

    text: str | None = None
    tool_calls: list[dict[str, Any]] = attrs.field(factory=list)
    usage: dict[str, int] = attrs.field(factory=dict)
    raw: Any = None
    primed: bool = False
    finish_reason: str | None = None
    sampling: dict[str, Any] = attrs.field(factory=dict)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    written: str | None = None


class ContextOverflow(errors.PolicyError):
    """The server refused a request as longer than the model's context (an HTTP 400): the
    prompt's token count was an estimate, or the server counts differently. The policy
    fits the request again to what the server reported and retries once."""

    def __init__(self, message: str, *, limit: int | None = None, prompt_tokens: int | None = None,
                 reserve: int = 0) -> None:
        self.limit, self.prompt_tokens, self.reserve = limit, prompt_tokens, reserve
        super().__init__(message)

    def budget_after(self, budget: int | None, counted: int | None) -> int | None:
        """A prompt budget that fits: the server's context less the reply's reserve, and
        scaled by how far our count fell short of the server's when both are known;
        ``None`` when there was no budget and the server named no limit."""
        if budget is None and self.limit is None:
            return None
        candidates = [] if budget is None else [int(budget * 0.75)]
        if self.limit is not None:
            candidates.append(self.limit - self.reserve - 8)
        exact = self.prompt_tokens is not None and self.prompt_tokens != (self.limit or 0) + 1
        if budget is not None and counted and self.prompt_tokens and self.prompt_tokens > counted:
            # vLLM stops counting at its limit + 1 ("at least N"): then the shortfall is unknown
            candidates.append(int(budget * counted / self.prompt_tokens) - 8 if exact else budget // 2)
        return max(64, min(candidates))


def describe(kind: str, arg: str | None, **options: Any) -> str:
    """A policy id: ``kind:arg`` plus the options that shape behaviour, e.g.
    ``openai:gpt-4o[format=native,temperature=0.7]``."""
    shown = ",".join(f"{k}={v}" for k, v in sorted(options.items()) if v is not None)
    return f"{kind}{':' + arg if arg else ''}{'[' + shown + ']' if shown else ''}"


def address(value: Any) -> str:
    """The content address of a message or tools block (16 hex digits of SHA-256)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def derive_seed(*parts: Any) -> int:
    """A 31-bit seed from ``parts`` (base seed, task, episode seed, turn): every request
    of every episode gets its own, reproducibly."""
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:4], "big") & 0x7FFFFFFF


class ChatPolicy:
    """Base of chat-model policies; subclasses implement ``_complete``.

    :param tool_format: ``native`` (the endpoint's function calling), ``prompted`` (the
        tool schemas in the system prompt, calls as ``<tool_call>`` JSON in the text) or
        ``text`` (``<action>call</action>``, commands for single-tool text envs); default:
        ``text`` for command envs, else ``native`` where the policy supports it.
    :param action_format: the older spelling (``auto``, ``tools``, ``text``).
    :param system_prompt: replaces the default intro line of the system prompt.
    :param skills: memory items for the system prompt: a string, a list, or a function of
        the observation returning either (retrieval).
    :param think: text format: ask for ``<think>…</think>`` before the action.
    :param compact: shorter tool descriptions (small models).
    :param lenient: accept an action without closing tag, or a bare call in the text.
    :param max_turns: keep at most the last N exchanges in the prompt (``None``: all).
    :param max_context: the prompt's token budget (``None``: the model's context where the
        policy knows it, less the completion's tokens). Older exchanges are dropped first.
    :param keep_first: when exchanges are dropped, keep the first observation (the task).
    :param show_admissible: append the admissible commands to observations that carry them.
    :param normalise_cutoff: difflib similarity needed to snap a command to an admissible one.
    """

    kind = "chat"
    native_tools = False

    def __init__(self, *, tool_format: str | None = None, action_format: str = "auto",
                 system_prompt: str | None = None, skills: prompts.Skills = None, think: bool = True,
                 compact: bool = False, lenient: bool = False, max_turns: int | None = None,
                 max_context: int | None = None, keep_first: bool = True, show_admissible: bool = True,
                 normalise_cutoff: float = 0.6) -> None:
        if action_format not in ACTION_FORMATS:
            raise ValueError(f"Unknown action format {action_format!r}. Choose one of: {', '.join(ACTION_FORMATS)}")
        if tool_format is not None and tool_format not in TOOL_FORMATS:
            raise ValueError(f"Unknown tool_format {tool_format!r}. Choose one of: {', '.join(TOOL_FORMATS)}")
        if tool_format == "native" and not self.native_tools:
            raise ValueError(f"The {self.kind} policy has no native function calling; "
                             "use tool_format=prompted or tool_format=text")
        if max_turns is not None and int(max_turns) < 0:
            raise ValueError(f"max_turns must be >= 0, got {max_turns}")
        if max_context is not None and int(max_context) < 64:
            raise ValueError(f"max_context must be at least 64 tokens, got {max_context}")
        if tool_format is None and action_format == "tools":
            tool_format = "native" if self.native_tools else "prompted"
        if tool_format is None and action_format == "text":
            tool_format = "text"
        self.tool_format, self.action_format = tool_format, action_format
        self.intro, self.skills = system_prompt, skills
        self.think, self.compact, self.lenient, self.max_turns = think, compact, lenient, max_turns
        self.max_context, self.keep_first = max_context, keep_first
        self.show_admissible, self.normalise_cutoff = show_admissible, normalise_cutoff
        self.policy_id = self.kind
        self.base_seed = 0
        self._format = "text"
        self._refit_budget: int | None = None  # after a context-length refusal: the budget that fitted
        self._reset_episode(None, None)

    def _reset_episode(self, task: TaskRef | None, seed: int | None) -> None:
        self._task, self._episode_seed, self._turn = task, seed, 0
        self._refit_budget = None  # a refit holds for the rest of its episode only
        self._turns: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        self._pending: list[str] = []
        self._last_invalid: str | None = None
        self._last_valid: str | None = None
        self._sent: set[str] = set()
        self._last_prompt: list[int] = []

    # -- the Policy protocol -------------------------------------------------------------
    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        self._format = self.choose_format(tools, observation)
        self._reset_episode(task, seed)

    def act(self, observation: Observation, tools: list[ToolSpec]) -> PolicyStep:
        t0 = time.perf_counter()
        fmt = self._format
        system = prompts.system_prompt(tools, observation, intro=self.intro, tool_format=fmt, think=self.think,
                                       compact=self.compact, skills=self.skills)
        lead = self._lead(observation)
        schemas = prompts.to_openai_tools(tools)
        native = schemas if fmt == "native" else None
        def fitted_request(budget: int | None, refit: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            counter, named = (self._refit_count, self._refit_counted_with) if refit else \
                (self._count_tokens, self._counted_with)
            messages, fitted = context.fit(
                {"role": "system", "content": system}, self._turns, lead, max_turns=self.max_turns,
                keep_first=self.keep_first, budget=budget, count=lambda msgs: counter(msgs, native),
                counted_with=named())
            if "counted_with" in fitted:  # a tokenizer may have given up while counting
                fitted["counted_with"] = named()
            return messages, fitted

        budget = self._prompt_budget()
        if self._refit_budget is not None:  # an earlier request of this policy overflowed at a larger one
            budget = self._refit_budget if budget is None else min(budget, self._refit_budget)
        messages, fitted = fitted_request(budget)
        prefill = "<action>" if fmt == "text" and not self.think else ""
        try:
            answer = self._complete(messages, native, prefill)
        except ContextOverflow as exc:  # the count was off: fit again to what the server says, once
            smaller = exc.budget_after(budget, fitted.get("prompt_tokens"))
            if smaller is None:  # neither a budget nor the server's limit to fit to
                raise
            messages, fitted = fitted_request(smaller, refit=True)
            fitted["refit"] = {"reason": str(exc)[:300], "budget_before": budget, "budget": smaller}
            self._refit_budget = smaller
            answer = self._complete(messages, native, prefill)
        completion, repaired = sanitized(answer)
        prefill = prefill if completion.primed else ""
        step, parsed, corrections = self._interpret(completion, tools, observation, prefill)
        corrections = repaired + corrections
        turn = self._turn_record(messages, schemas, completion, parsed, corrections, fitted, prefill)
        self._remember(lead, completion, step, prefill)
        return attrs.evolve(step, latency_s=time.perf_counter() - t0, turn=turn)

    def close(self) -> None:
        """Nothing to release here; subclasses close clients or models."""

    # -- hooks for subclasses --------------------------------------------------------------
    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  prefill: str) -> Completion:
        """One completion for ``messages``; ``tools`` is set for native function calling.

        ``prefill`` is text the reply should start with; a model that can be primed
        continues after it (``text`` excludes it), others ignore it.
        """
        raise NotImplementedError

    def _count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        """Prompt tokens of ``messages``; this base estimates 1 token per 3 characters."""
        size = sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or ""))
                   for m in messages)
        return (size + len(json.dumps(tools or "")) + 2) // 3 + 4 * len(messages)

    def _counted_with(self) -> str:
        return "estimate:chars/3"

    def _refit_count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        """The count used to fit a request again after the server refused it as too long
        (subclasses ask the server itself when it can count)."""
        return self._count_tokens(messages, tools)

    def _refit_counted_with(self) -> str:
        return self._counted_with()

    def _prompt_budget(self) -> int | None:
        """Tokens the prompt may use; ``None``: no limit beyond ``max_turns``."""
        return self.max_context

    def request_seed(self) -> int:
        """The seed of the current request, from (base seed, task, episode seed, turn)."""
        return derive_seed(self.base_seed, self._task, self._episode_seed, self._turn)

    # -- internals ---------------------------------------------------------------------
    def choose_format(self, tools: list[ToolSpec], observation: Observation) -> str:
        """Resolve the tool format: text for command envs, function calling otherwise."""
        if self.tool_format is not None:
            return self.tool_format
        if calls.text_tool(tools) is not None or "admissible_commands" in observation.data:
            return "text"
        return "native" if self.native_tools else "prompted"

    def _lead(self, observation: Observation) -> list[dict[str, Any]]:
        """The messages this turn adds: the observation (as the answer to the pending tool
        call, if any) and stubs answering calls that did not run."""
        text = prompts.observation_text(observation, show_admissible=self.show_admissible)
        is_error = self._last_invalid is not None or (observation.text.lstrip().startswith("Error")
                                                      and not observation.data)
        if self._last_invalid and self._last_invalid not in text:  # the runner may say it already
            text = f"Your last reply was not a valid action: {self._last_invalid}\n\n{text}"
        if is_error and self._last_valid and self._last_valid not in text:
            text = f"{text}\n\nThe last valid observation was:\n{self._last_valid}"
        elif not is_error:
            self._last_valid = text
        if not self._pending:
            return [{"role": "user", "content": text}]
        first, *rest = self._pending
        return [{"role": "tool", "tool_call_id": first, "content": text},
                *({"role": "tool", "tool_call_id": call_id, "content": NOT_EXECUTED} for call_id in rest)]

    def _remember(self, lead: list[dict[str, Any]], completion: Completion, step: PolicyStep, prefill: str) -> None:
        reply: dict[str, Any] = {"role": "assistant", "content": prefill + (completion.text or "")}
        self._pending = []
        if completion.tool_calls:
            reply["content"] = completion.text or None
            reply["tool_calls"] = [{"id": c["id"], "type": "function",
                                    "function": {"name": c["name"], "arguments": _sendable(c["arguments"])}}
                                   for c in completion.tool_calls]
            self._pending = [c["id"] for c in completion.tool_calls]
        self._last_invalid = step.invalid
        self._turns.append((lead, reply))
        self._turn += 1

    def _turn_record(self, messages: list[dict[str, Any]], schemas: list[dict[str, Any]], completion: Completion,
                     parsed: list[dict[str, Any]], corrections: list[dict[str, Any]],
                     fitted: dict[str, Any], prefill: str) -> ModelTurn:
        blobs: dict[str, Any] = {}
        order = []
        for message in messages:
            key = address(message)
            order.append(key)
            if key not in self._sent:
                blobs[key] = message
        tools_key = address(schemas) if schemas else None
        if tools_key and tools_key not in self._sent:
            blobs[tools_key] = schemas
        self._sent.update(blobs)
        prompt, shared = completion.prompt_token_ids, 0
        if prompt is not None:
            shared = _common_prefix(self._last_prompt, prompt)
            self._last_prompt = list(prompt)
            prompt = list(prompt[shared:])
        return ModelTurn(prompt_shared=shared, messages=order, blobs=blobs, tools=tools_key, tool_format=self._format, prefill=prefill,
                         text=completion.text, tool_calls=[dict(c) for c in completion.tool_calls], parsed=parsed,
                         corrections=corrections, sampling=dict(completion.sampling),
                         finish_reason=completion.finish_reason, prompt_token_ids=prompt,
                         completion_token_ids=completion.completion_token_ids, logprobs=completion.logprobs,
                         context=fitted, written=completion.written)

    def _interpret(self, completion: Completion, tools: list[ToolSpec], observation: Observation,
                   prefill: str = "") -> tuple[PolicyStep, list[dict[str, Any]], list[dict[str, Any]]]:
        full = None if completion.text is None and not prefill else prefill + (completion.text or "")
        completion = attrs.evolve(completion, text=full)
        raw: dict[str, Any] = {"response": completion.raw, "text": full}
        corrections: list[dict[str, Any]] = []
        parsed: list[dict[str, Any]] = []
        try:
            action = self._parse(completion, tools, observation, parsed, corrections)
        except calls.ParseError as exc:
            return (PolicyStep(action=None, raw=raw, invalid=str(exc), usage=completion.usage), parsed,
                    corrections)
        for note in corrections:
            if note["what"] == "admissible":
                raw["normalised"] = {k: note[k] for k in ("from", "to", "score")}
        return PolicyStep(action=action, raw=raw, usage=completion.usage), parsed, corrections

    def _parse(self, completion: Completion, tools: list[ToolSpec], observation: Observation,
               parsed: list[dict[str, Any]], corrections: list[dict[str, Any]]) -> Action:
        """The action of ``completion``; every call found goes to ``parsed``, every change
        made to what the model wrote to ``corrections``."""
        if completion.tool_calls:
            candidates = [(lambda notes, c=call: calls.parse_json_call(
                {"name": c["name"], "arguments": c["arguments"]}, tools, notes)) for call in completion.tool_calls]
            return _first_valid(candidates, parsed, corrections, "tool call")
        text = completion.text or ""
        if not text.strip():
            raise calls.ParseError("the reply is empty")
        tagged = _TOOL_CALL.findall(text)
        if tagged:
            candidates = [(lambda notes, b=body: calls.parse_call(b.strip(), tools, notes)) for body in tagged]
            return _first_valid(candidates, parsed, corrections, "<tool_call>")
        found = [b.strip() for b in _ACTION.findall(text)]
        if found:
            candidates = [(lambda notes, b=body: self._text_action(b, tools, observation, notes)) for body in found]
            return _first_valid(candidates, parsed, corrections, "<action>")
        body = None
        if self.lenient and "<action>" in text:
            body = text.rsplit("<action>", 1)[1].strip()
            corrections.append({"what": "lenient", "from": text, "to": body, "rule": "unclosed <action>"})
        elif self.lenient and calls.find_call(text, tools):
            body = calls.find_call(text, tools) or ""
            corrections.append({"what": "lenient", "from": text, "to": body, "rule": "a call in free text"})
        if body is None:
            want = "<action>...</action> block" if self._format == "text" else "tool call"
            raise calls.ParseError(f"no {want} in the reply")
        if not body:
            raise calls.ParseError("the <action> block is empty")
        return _first_valid([lambda notes: self._text_action(body, tools, observation, notes)], parsed,
                            corrections, "<action>")

    def _text_action(self, body: str, tools: list[ToolSpec], observation: Observation,
                     corrections: list[dict[str, Any]]) -> Action:
        if not body:
            raise calls.ParseError("the <action> block is empty")
        single = calls.text_tool(tools)
        if single is None:
            return calls.parse_call(body, tools, corrections)
        tool, param = single
        if re.match(rf"^{re.escape(tool.name)}\s*\(", body):
            inner = str(next(iter(calls.parse_call(body, tools, corrections).args.values()), ""))
            corrections.append({"what": "unwrap", "from": body, "to": inner})
            body = inner
        admissible = observation.data.get("admissible_commands")
        if isinstance(admissible, (list, tuple)) and admissible:
            command, score = calls.normalise_command(body, [str(a) for a in admissible], self.normalise_cutoff)
            if command != body:
                corrections.append({"what": "admissible", "from": body, "to": command, "score": round(score, 3)})
            return Action(tool=tool.name, args={param: command})
        return Action(tool=tool.name, args={param: body})


def sanitized(completion: Completion) -> tuple[Completion, list[dict[str, Any]]]:
    """``completion`` with lone UTF-16 surrogates (which no UTF-8 store or file can hold)
    replaced by U+FFFD in its text and calls, and malformed calls made strings; the
    corrections say what was replaced."""
    notes: list[dict[str, Any]] = []

    def clean(value: Any, field: str) -> Any:
        if not isinstance(value, str):
            return value
        found = len(_SURROGATE.findall(value))
        if found:
            notes.append({"what": "unicode", "field": field, "replaced": found})
            return _SURROGATE.sub("\ufffd", value)
        return value

    calls_out = []
    seen_ids: set[str] = set()
    for n, call in enumerate(completion.tool_calls):
        name, args = call.get("name"), call.get("arguments")
        if not isinstance(name, str):
            notes.append({"what": "call_field", "field": f"tool_calls[{n}].name", "from": repr(name)[:200]})
            name = "" if name is None else str(name)
        if not isinstance(args, str):
            text = json.dumps(args, ensure_ascii=False, default=repr) if args is not None else ""
            notes.append({"what": "call_field", "field": f"tool_calls[{n}].arguments", "from": type(args).__name__})
            args = text
        given = call.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{n}"
        if call_id in seen_ids:  # every call needs its own answer in the next request
            notes.append({"what": "call_field", "field": f"tool_calls[{n}].id", "from": call_id,
                          "to": f"{call_id}_{n}"})
            call_id = f"{call_id}_{n}"
        seen_ids.add(call_id)
        calls_out.append({**call, "id": clean(call_id, f"tool_calls[{n}].id"),
                          "name": clean(name, f"tool_calls[{n}].name"),
                          "arguments": clean(args, f"tool_calls[{n}].arguments")})
    text = clean(completion.text, "text")
    raw = _without_surrogates(completion.raw)
    if text is not completion.text or calls_out != completion.tool_calls or raw is not completion.raw:
        completion = attrs.evolve(completion, text=text, tool_calls=calls_out, raw=raw)
    return completion, notes


def _without_surrogates(value: Any, depth: int = 0) -> Any:
    """``value`` (JSON-like) with lone surrogates replaced; the same object if none."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if depth > 50:
        return value
    if isinstance(value, dict):
        out = {(_without_surrogates(k, depth + 1)): _without_surrogates(v, depth + 1) for k, v in value.items()}
        same = all(a is b for a, b in zip(out.values(), value.values(), strict=True)) and list(out) == list(value)
        return value if same else out
    if isinstance(value, list):
        items = [_without_surrogates(v, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _first_valid(candidates: list[Any], parsed: list[dict[str, Any]], corrections: list[dict[str, Any]],
                 what: str) -> Action:
    """Parse every candidate call (recorded in ``parsed``); the first valid one is the
    action. Native calls run in order; for text blocks the last one is the model's answer
    (earlier ones are usually examples in its reasoning), so text is tried from the end."""
    if len(candidates) > MAX_CALLS:
        corrections.append({"what": "too_many_calls", "from": len(candidates), "to": MAX_CALLS})
        candidates = candidates[:MAX_CALLS] if what not in ("<action>", "<tool_call>") else candidates[-MAX_CALLS:]
    order = list(range(len(candidates)))
    if what in ("<action>", "<tool_call>"):
        order.reverse()
    results: dict[int, Action | calls.ParseError] = {}
    notes: dict[int, list[dict[str, Any]]] = {}
    for n in order:
        notes[n] = []
        try:
            results[n] = candidates[n](notes[n])
        except calls.ParseError as exc:
            results[n] = exc
    for n in range(len(candidates)):
        result = results[n]
        parsed.append({"error": str(result)} if isinstance(result, calls.ParseError)
                      else {"tool": result.tool, "args": dict(result.args)})
    chosen = next((n for n in order if isinstance(results[n], Action)), None)
    if chosen is None:
        raise results[order[0]]  # type: ignore[misc]
    corrections.extend(notes[chosen])
    if len(candidates) > 1:
        corrections.append({"what": "extra_calls", "from": len(candidates), "to": 1, "used": chosen,
                            "rule": f"one action per turn: {what} #{chosen} runs"})
    action = results[chosen]
    assert isinstance(action, Action)
    return action


def _sendable(arguments: Any) -> str:
    """A tool call's arguments as the next request may carry them: the model's string when
    it is a JSON object (servers parse it), else the string wrapped in one."""
    if isinstance(arguments, str):
        try:
            if isinstance(json.loads(arguments), dict):
                return arguments
        except (json.JSONDecodeError, RecursionError):
            pass
        return json.dumps({"unparsed_arguments": arguments}, ensure_ascii=False)
    return json.dumps(arguments if isinstance(arguments, dict) else {"unparsed_arguments": str(arguments)},
                      ensure_ascii=False)
