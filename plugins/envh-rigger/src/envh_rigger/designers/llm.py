"""The LLM designer: an OpenAI-compatible model with forced function calls.

Each round it calls ``explain {failure_axis, rationale}`` then ``propose_candidate
{diagnosis, rationale, layers}``, both forced through ``tool_choice``. Output that does
not fit (no call, broken JSON, missing fields, layers that do not parse as registered
component kinds) is answered with the exact error and the call is retried, at most
``max_retries`` times per function; retries and tokens are counted in the proposal's
usage. A proposal that still fails becomes an empty candidate, which the loop's cascade
rejects as typed feedback, so a bad model can never crash the run.
"""

from __future__ import annotations

import json
import os
from typing import Any

from envh import errors, parse_spec

from ..cascade import combined
from .base import DesignContext, Proposal
from .prompt import EXPLAIN, PROPOSE, SYSTEM, user_message


class Malformed(Exception):
    """The model's answer did not fit the function's schema."""


class LLMDesigner:
    """``envh rig --designer llm:MODEL``; endpoint from ``base_url`` or ``OPENAI_BASE_URL``."""

    name = "llm"

    def __init__(self, arg: str | None = None, *, model: str | None = None, base_url: str | None = None,
                 api_key: str | None = None, max_retries: int = 3, temperature: float = 0.2,
                 timeout_s: float = 120.0, explain: bool = True) -> None:
        import openai

        self.model = model or arg or os.environ.get("ENVH_DESIGNER_MODEL") or "gpt-4o-mini"
        self.client = openai.OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
                                    api_key=api_key or os.environ.get("OPENAI_API_KEY") or "unset",
                                    timeout=timeout_s, max_retries=2)
        self.max_retries, self.temperature, self.explain = max_retries, temperature, explain
        self.usage: dict[str, int] = {}

    # -- one forced call with bounded repair -------------------------------------------
    def _call(self, messages: list[dict[str, Any]], tool: dict[str, Any], check: Any) -> Any:
        name = tool["function"]["name"]
        for attempt in range(self.max_retries + 1):
            resp = self.client.chat.completions.create(
                model=self.model, messages=messages, tools=[tool], temperature=self.temperature,
                tool_choice={"type": "function", "function": {"name": name}})
            self.usage["calls"] = self.usage.get("calls", 0) + 1
            if resp.usage is not None:
                self.usage["prompt_tokens"] = self.usage.get("prompt_tokens", 0) + resp.usage.prompt_tokens
                self.usage["completion_tokens"] = (self.usage.get("completion_tokens", 0)
                                                   + resp.usage.completion_tokens)
            msg = resp.choices[0].message
            calls = [c for c in (msg.tool_calls or []) if c.function.name == name]
            try:
                if not calls:
                    raise Malformed(f"no call of {name} in the answer (got text {str(msg.content)[:200]!r})")
                try:
                    args = json.loads(calls[0].function.arguments or "{}")
                except json.JSONDecodeError as exc:
                    raise Malformed(f"the arguments are not valid JSON: {exc}") from None
                if not isinstance(args, dict):
                    raise Malformed("the arguments must be a JSON object")
                result = check(args)
                messages += [msg.model_dump(exclude_none=True),
                             {"role": "tool", "tool_call_id": calls[0].id, "content": "ok"}]
                return result
            except Malformed as exc:
                if attempt == self.max_retries:
                    raise
                self.usage["retries"] = self.usage.get("retries", 0) + 1
                if calls:
                    messages += [msg.model_dump(exclude_none=True),
                                 {"role": "tool", "tool_call_id": calls[0].id, "content": f"Invalid: {exc}"}]
                messages.append({"role": "user", "content": f"Your answer was invalid: {exc}. "
                                                            f"Call {name} again with corrected arguments."})
        raise AssertionError("unreachable")

    @staticmethod
    def _check_explain(args: dict[str, Any]) -> dict[str, Any]:
        axes = EXPLAIN["function"]["parameters"]["properties"]["failure_axis"]["enum"]
        if args.get("failure_axis") not in axes:
            raise Malformed(f"failure_axis must be one of {axes}, got {args.get('failure_axis')!r}")
        if not isinstance(args.get("rationale"), str):
            raise Malformed("rationale must be a string")
        return args

    def _checker(self, ctx: DesignContext) -> Any:
        def check(args: dict[str, Any]) -> dict[str, Any]:
            for key in ("diagnosis", "rationale"):
                if not isinstance(args.get(key), str):
                    raise Malformed(f"{key!r} must be a string")
            layers = args.get("layers")
            if not isinstance(layers, list) or not layers or not all(isinstance(x, dict) for x in layers):
                raise Malformed("'layers' must be a non-empty list of objects, each with a 'kind'")
            try:
                parse_spec(combined(ctx.spec, layers), ctx.registry)
            except errors.EnvhError as exc:
                offset = len(ctx.spec.get("layers", []))
                raise Malformed(f"{exc} (your layers start at $.layers[{offset}])") from None
            return args
        return check

    def propose(self, ctx: DesignContext) -> Proposal:
        self.usage = {}
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                          {"role": "user", "content": user_message(ctx)}]
        meta: dict[str, Any] = {"model": self.model}
        try:
            if self.explain:
                why = self._call(messages, EXPLAIN, self._check_explain)
                meta["failure_axis"] = why["failure_axis"]
                messages.append({"role": "user", "content": "Now propose the candidate."})
            args = self._call(messages, PROPOSE, self._checker(ctx))
        except Malformed as exc:
            meta["malformed"] = str(exc)
            return Proposal(layers=[], diagnosis="", rationale=f"malformed model output: {exc}", meta=meta,
                            usage={self.model: dict(self.usage)})
        return Proposal(layers=args["layers"], diagnosis=args["diagnosis"], rationale=args["rationale"],
                        meta=meta, usage={self.model: dict(self.usage)})

    def translate_weakness(self, text: str, predicates: dict[str, str],
                           usable: Any = None) -> str | None:
        """Plain words → one of ``predicates`` (name → help) with its arguments, through a
        forced ``name_predicate`` call; ``None`` when the model never names a usable one.
        ``usable(predicate)`` (raising ``EnvhError``) checks the arguments too, so a bad
        argument is fed back and asked again like a bad name."""
        names = sorted(predicates)
        tool = {"type": "function", "function": {
            "name": "name_predicate",
            "description": "Name the trajectory predicate that measures the weakness described in plain words.",
            "parameters": {"type": "object", "required": ["name", "args", "rationale"], "properties": {
                "name": {"type": "string", "enum": names},
                "args": {"type": "array", "items": {"type": "string"},
                         "description": "the predicate's arguments (NAME:ARG:... without the name)"},
                "rationale": {"type": "string"}}}}}
        listing = "\n".join(f"- {n}: {predicates[n] or n}" for n in names)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You turn a plain-words weakness of an agent into a predicate over its "
                                          "trajectories, chosen from a fixed table."},
            {"role": "user", "content": f"Weakness: {text!r}\n\nPredicates:\n{listing}"}]

        def check(args: dict[str, Any]) -> str:
            if args.get("name") not in predicates:
                raise Malformed(f"name must be one of {names}, got {args.get('name')!r}")
            extra = args.get("args") or []
            if not isinstance(extra, list) or not all(isinstance(a, str | int) for a in extra):
                raise Malformed("args must be a list of strings")
            if any(":" in str(a) for a in extra):
                raise Malformed("an argument may not hold ':' (it separates arguments)")
            predicate = ":".join([args["name"], *(str(a) for a in extra)])
            if usable is not None:
                try:
                    usable(predicate)
                except errors.EnvhError as exc:
                    raise Malformed(str(exc)) from None
            return predicate

        try:
            return str(self._call(messages, tool, check))
        except Malformed:
            return None

    def close(self) -> None:
        self.client.close()
