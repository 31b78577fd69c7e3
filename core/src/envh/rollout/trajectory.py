"""Records of one episode: what was asked (``EpisodeRequest``) and what happened
(``Trajectory`` of ``StepRecord``), plus their plain-JSON form.

A trajectory names everything that shaped it (DESIGN invariant 4): the spec id, task,
seed, policy id, package versions, and per step every layer's effect. Requests and
trajectories cross process boundaries (pool workers, Ray actors) as JSON data, never as
pickles, so a worker running untrusted code cannot hand the parent executable payloads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

from ..types import Action, EvaluationResult, FrozenList, Observation, TaskRef, thaw

ERROR_CLASSES = ("policy_error", "env_error", "infra_error", "timeout")


@attrs.frozen(kw_only=True)
class EpisodeRequest:
    """One episode to play. ``key`` is unique within a run (resume skips finished keys);
    ``spec`` is the canonical spec data whose hash is ``spec_id``; ``policy`` is a policy
    spec string (``NAME`` or ``NAME:ARG``) resolved through the policy hook."""

    key: str
    spec: dict[str, Any]
    spec_id: str
    task: TaskRef | None = None
    seed: int | None = None
    policy: str
    policy_options: dict[str, Any] = attrs.field(factory=dict)
    run_id: str = ""
    max_steps: int = 100
    timeout_s: float | None = None
    attempt: int = 0
    #: The tier of the spec's code (``envh.make``'s ``trust``): the jail unless whoever
    #: planned the run said ``trusted``; not part of the spec, so a spec cannot set it.
    trust: str = "untrusted"
    #: Host paths the caller granted the spec (``envh.make``'s ``data``, real paths): a
    #: path the spec names must lie inside them unless ``trust`` is ``trusted``; not part
    #: of the spec either.
    data: tuple[str, ...] = attrs.field(default=(), converter=lambda v: (v,) if isinstance(v, str) else
                                        tuple(str(p) for p in v))


@attrs.frozen(kw_only=True)
class ModelTurn:
    """What a chat model saw and produced in one policy turn, exactly (DESIGN invariant 4).

    The request is content-addressed so a long episode stays small: ``messages`` lists the
    addresses of the messages sent, in order (system prompt first), and ``blobs`` holds
    each message, and the tool-schema block, the first time the episode sends it;
    ``request_messages`` rebuilds every turn's request. ``text`` is the completion as the
    model wrote it (after ``prefill``, the text the reply was primed with);
    ``tool_calls`` are the native calls as returned (arguments as raw strings);
    ``parsed`` is every call found in the reply (``{"tool", "args"}`` or ``{"error"}``),
    of which the first valid one is the action; ``corrections`` lists each change the
    policy made to what the model wrote (``{"what", "from", "to", ...}``). Token ids and
    per-token logprobs are set where the engine gives them (local and vLLM policies), so
    a trainer never retokenises. Prompt ids are stored like the messages, once: the first
    ``prompt_shared`` ids of a turn's prompt are the previous turn's, and
    ``prompt_token_ids`` holds the rest (``token_ids`` rebuilds whole prompts). ``written``
    is the text as generated when the server's tool parser took the calls out of it (vLLM
    with logprobs), e.g. ``<tool_call>{...}</tool_call>``.
    ``context`` says how the history was fitted to the model's context (strategy, budget,
    what counted the tokens, turns dropped).
    """

    messages: list[str] = attrs.field(factory=list)
    blobs: dict[str, Any] = attrs.field(factory=dict)
    tools: str | None = None
    tool_format: str = "text"
    prefill: str = ""
    text: str | None = None
    tool_calls: list[dict[str, Any]] = attrs.field(factory=list)
    parsed: list[dict[str, Any]] = attrs.field(factory=list)
    corrections: list[dict[str, Any]] = attrs.field(factory=list)
    sampling: dict[str, Any] = attrs.field(factory=dict)
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    context: dict[str, Any] = attrs.field(factory=dict)
    prompt_shared: int = 0
    written: str | None = None


@attrs.frozen(kw_only=True)
class StepRecord:
    """One step. ``proposed`` is the policy's action (``None``: unparseable output, see
    ``invalid``); ``executed`` is the action as it reached the base env (``None`` when a
    layer blocked it or answered it itself, see ``blocked``, or when the output was invalid). ``observation`` is
    what the policy saw next; ``base_observation`` is set only when a layer changed it."""

    index: int
    raw: Any = None
    proposed: Action | None = None
    invalid: str | None = None
    executed: Action | None = None
    blocked: str | None = None
    observation: Observation
    base_observation: Observation | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    error: dict[str, Any] | None = None
    effects: list[dict[str, Any]] = attrs.field(factory=list)
    usage: dict[str, int] = attrs.field(factory=dict)
    policy_s: float = 0.0
    env_s: float = 0.0
    turn: ModelTurn | None = None
    # the stack's reward when a Python component made it differ from the base bridge's own
    # (``reward`` is always the base bridge's)
    outer_reward: float | None = None


@attrs.frozen(kw_only=True)
class Trajectory:
    """A played (or failed) episode. ``final`` is False for an attempt that an executor
    retried (an infrastructure failure); exactly one final trajectory exists per key.
    ``stop`` says why the episode ended: terminated, truncated, max_steps or error."""

    key: str
    run_id: str = ""
    attempt: int = 0
    final: bool = True
    spec_id: str
    task: TaskRef | None = None
    seed: int | None = None
    policy: str = ""
    policy_id: str = ""
    versions: dict[str, str] = attrs.field(factory=dict)
    tools: list[dict[str, Any]] = attrs.field(factory=list)
    initial_observation: Observation | None = None
    initial_base_observation: Observation | None = None
    reset_effects: list[dict[str, Any]] = attrs.field(factory=list)
    steps: tuple[StepRecord, ...] = ()
    verdict: EvaluationResult | None = None
    stop: str = "error"
    error_class: str | None = None
    error: str | None = None
    worker: str = ""
    started_at: float = 0.0
    reset_s: float = 0.0
    evaluate_s: float = 0.0
    duration_s: float = 0.0
    # failure details: the exception's type and traceback; ``retryable`` when the failure was
    # the endpoint or the infrastructure (``--resume --retry failed`` plays it again); ``retry``
    # counts those re-plays of the key. ``outer_verdict`` is what the wrapper chain reported
    # when it differed from the base bridge's verdict (``verdict`` is always the base's).
    error_type: str | None = None
    error_traceback: str | None = None
    retryable: bool = False
    retry: int = 0
    outer_verdict: EvaluationResult | None = None
    # what in the stack could change verdict or reward (``envh.harness.audit_stack``)
    audit: list[str] = attrs.field(factory=list)

    @property
    def success(self) -> bool:
        return self.verdict is not None and self.verdict.success

    @property
    def invalid_steps(self) -> int:
        return sum(1 for s in self.steps if s.proposed is None)

    @property
    def total_reward(self) -> float:
        return sum(s.reward for s in self.steps)

    @property
    def usage(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for step in self.steps:
            for name, n in step.usage.items():
                out[name] = out.get(name, 0) + int(n)
        return out


def request_messages(steps: tuple[StepRecord, ...] | list[StepRecord]) -> list[list[dict[str, Any]] | None]:
    """The exact messages each step's model request sent (``None`` for a step without a
    recorded turn), rebuilt from the content-addressed ``ModelTurn`` records."""
    blobs: dict[str, Any] = {}
    out: list[list[dict[str, Any]] | None] = []
    for step in steps:
        if step.turn is None:
            out.append(None)
            continue
        blobs.update(step.turn.blobs)
        out.append([blobs[h] for h in step.turn.messages])
    return out


def token_ids(steps: tuple[StepRecord, ...] | list[StepRecord]) -> list[tuple[list[int], list[int]] | None]:
    """Each step's whole (prompt ids, completion ids), rebuilt from the shared prefixes;
    ``None`` for a step whose turn recorded no ids."""
    previous: list[int] = []
    out: list[tuple[list[int], list[int]] | None] = []
    for step in steps:
        turn = step.turn
        if turn is None or turn.prompt_token_ids is None:
            out.append(None)
            continue
        # the policy shares prefixes with its last prompt that had ids, whether or not
        # the engine gave that turn's completion ids
        prompt = previous[:turn.prompt_shared] + list(turn.prompt_token_ids)
        previous = prompt
        out.append(None if turn.completion_token_ids is None else (prompt, list(turn.completion_token_ids)))
    return out


def request_tools(steps: tuple[StepRecord, ...] | list[StepRecord]) -> list[list[dict[str, Any]] | None]:
    """The tool schemas (OpenAI ``tools`` shape) each step's model request sent natively;
    ``None`` for a step without a recorded turn or a request that sent none (the
    ``prompted`` and ``text`` formats describe the tools in the system message)."""
    blobs: dict[str, Any] = {}
    out: list[list[dict[str, Any]] | None] = []
    for step in steps:
        turn = step.turn
        if turn is not None:
            blobs.update(turn.blobs)
        found = blobs.get(turn.tools) if turn is not None and turn.tools and turn.tool_format == "native" else None
        out.append(found if isinstance(found, list) else None)
    return out


def tools_block(steps: tuple[StepRecord, ...] | list[StepRecord]) -> list[dict[str, Any]] | None:
    """The tool schemas (OpenAI ``tools`` shape) the model was shown, from the last turn
    that had a tools block; ``None`` when no turn recorded one."""
    blobs: dict[str, Any] = {}
    last: str | None = None
    for step in steps:
        if step.turn is not None:
            blobs.update(step.turn.blobs)
            last = step.turn.tools or last
    found = blobs.get(last) if last else None
    return found if isinstance(found, list) else None


def jsonable(value: Any, _depth: int = 0) -> Any:
    """Best-effort plain-JSON copy of a policy's raw output (SDK objects, attrs records)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if _depth > 20:
        return repr(value)[:2000]
    if isinstance(value, Mapping):  # dicts and the read-only mappings frozen records hold
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, _depth + 1) for v in value]
    if attrs.has(type(value)):
        return jsonable(attrs.asdict(value, recurse=False), _depth + 1)
    dump = getattr(value, "model_dump", None)  # pydantic models (openai SDK responses)
    if callable(dump):
        try:
            return jsonable(dump(mode="json"), _depth + 1)
        except Exception:  # noqa: BLE001 - fall back to repr for odd objects
            pass
    return repr(value)[:2000]


_converter = cattrs.Converter()
# frozen records hold MappingProxyType / FrozenList values, nested too: unstructure them as
# plain JSON data, not as repr strings
_converter.register_unstructure_hook_func(
    lambda t: t is MappingProxyType or t is FrozenList, thaw)
# a task's group is recorded only when set: records of tasks without one stay as they were
_converter.register_unstructure_hook(TaskRef, make_dict_unstructure_fn(
    TaskRef, _converter, group=override(omit_if_default=True)))
# likewise a request's data grant: requests without one stay as they were
_converter.register_unstructure_hook(EpisodeRequest, make_dict_unstructure_fn(
    EpisodeRequest, _converter, data=override(omit_if_default=True)))


def request_to_data(request: EpisodeRequest) -> dict[str, Any]:
    data: dict[str, Any] = _converter.unstructure(request)
    return data


def request_from_data(data: dict[str, Any]) -> EpisodeRequest:
    return _converter.structure(data, EpisodeRequest)


def trajectory_to_data(trajectory: Trajectory) -> dict[str, Any]:
    data: dict[str, Any] = _converter.unstructure(trajectory)
    return data


def trajectory_from_data(data: dict[str, Any]) -> Trajectory:
    return _converter.structure(data, Trajectory)


def read_back(record: Any) -> Any:
    """``record`` (an attrs record) as the store gives it back: written as strict UTF-8
    JSON and structured again; raises whatever does not survive that."""
    data = _converter.unstructure(record)
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    return _converter.structure(json.loads(text), type(record))


def trajectory_to_json(trajectory: Trajectory) -> str:
    return strict_json(trajectory_to_data(trajectory))


def strict_json(data: Any) -> str:
    """``data`` as strict JSON text: NaN and infinities anywhere (verdict metrics, step
    info, action arguments of scripted policies, raw outputs) spelled as the strings
    ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, which every JSON reader accepts."""
    try:
        return json.dumps(data, ensure_ascii=False, default=repr, allow_nan=False)
    except ValueError:
        return json.dumps(finite(data), ensure_ascii=False, default=repr, allow_nan=False)


def finite(value: Any, depth: int = 0) -> Any:
    """``value`` with non-finite floats as the strings ``"NaN"``, ``"Infinity"`` and
    ``"-Infinity"`` (mappings and sequences walked; other values as they are)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if depth > 200:
        return repr(value)
    if isinstance(value, Mapping):
        return {k: finite(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, depth + 1) for v in value]
    return value


def trajectory_from_json(text: str) -> Trajectory:
    return trajectory_from_data(json.loads(text))


def model_stats(trajectories: Any) -> dict[str, Any]:
    """Tokens and latency of the policy's turns over ``trajectories``: totals, mean
    latency per turn and completion tokens per second of policy time."""
    turns, prompt, completion, seconds = 0, 0, 0, 0.0
    for t in trajectories:
        for step in t.steps:
            turns += 1
            prompt += int(step.usage.get("prompt_tokens", 0) or 0)
            completion += int(step.usage.get("completion_tokens", 0) or 0)
            seconds += float(step.policy_s or 0.0)
    return {"turns": turns, "prompt_tokens": prompt, "completion_tokens": completion, "policy_s": round(seconds, 3),
            "latency_s": round(seconds / turns, 4) if turns else 0.0,
            "tokens_per_s": round(completion / seconds, 2) if seconds > 0 else 0.0}
