"""The ``openai`` policy: any OpenAI-compatible chat endpoint through the ``openai`` SDK.

vLLM servers, OpenAI, and the OpenAI-compatible endpoints of other providers all work.
Transient failures (timeouts, connection errors, 429 and 5xx answers) are retried with
exponential backoff; when retries run out the step raises ``EndpointError`` (a
``PolicyError`` a runner may re-run later: the endpoint failed, not the model); a
non-retryable refusal (a 401, a bad request) raises ``PolicyError``. Malformed model
output is not an error: it is an invalid step the episode records.

Against vLLM, ``token_ids=True`` asks the server for the prompt and completion token ids
and per-token logprobs (``return_token_ids`` and ``logprobs``), so the trajectory is
token-faithful; the prompt is fitted to the ``max_model_len`` the server reports.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
from typing import Any

from ... import errors
from ..policy import waiting_on
from .chat import ChatPolicy, Completion, ContextOverflow, describe


class OpenAIPolicy(ChatPolicy):
    """Chat-completions policy. Spec name ``openai:MODEL``.

    :param model: the model name the endpoint serves (the ARG of ``openai:MODEL``).
    :param base_url: the endpoint, e.g. ``http://localhost:8000/v1``; ``None`` is OpenAI.
    :param api_key_env: the environment variable holding the key. With a ``base_url`` a
        missing key is sent as ``EMPTY`` (vLLM and local servers need none).
    :param temperature, top_p, max_tokens: sampling options sent with each request. The
        default temperature (0.7) samples, so K rollouts of a task differ.
    :param seed: base of the per-request seeds: each request sends a seed derived from
        (seed, task, episode seed, turn); ``None`` sends none.
    :param token_ids: ask a vLLM server for token ids and logprobs (recorded per turn, with
        the text the model generated before vLLM's tool parser took its calls out, which the
        exports train on). ``"auto"`` (default): when the server is vLLM (its ``/v1/models``
        lists a ``max_model_len``); ``True``/``False``: always/never.
    :param tokenizer: a local tokenizer (HF folder, ``.gguf`` or embedded name such as
        ``smollm2``) to count prompt tokens exactly. Without one (``count="auto"``) a vLLM
        server counts them (its ``/tokenize``); other servers' prompts are estimated at 3
        characters a token (``count="estimate"`` always estimates). A request the server
        still refuses as too long is fitted again to the context it reports and retried once.
    :param max_context: the model's context in tokens; default: the ``max_model_len`` a
        vLLM server reports, else no limit. The prompt gets it less ``max_tokens``.
    :param timeout: seconds per request.
    :param retries: attempts after the first one, for transient failures.
    :param backoff_s: the first retry waits this long, doubling each time (plus jitter).
    :param extra_body: extra JSON fields for the request (provider-specific options).
    Other keywords go to ``ChatPolicy`` (tool format, skills, system prompt, ...).
    """

    kind = "openai"
    native_tools = True

    def __init__(self, arg: str | None = None, *, model: str | None = None, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", temperature: float = 0.7, top_p: float | None = None,
                 max_tokens: int | None = 512, seed: int | None = 0, token_ids: bool | str = "auto",
                 tokenizer: str | None = None, max_context: int | None = None, timeout: float = 60.0,
                 retries: int = 3, backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 extra_body: dict[str, Any] | None = None, count: str = "auto", **chat: Any) -> None:
        super().__init__(max_context=max_context, **chat)
        import openai  # lazily: importing envh must stay cheap

        self.model = model or arg
        if not self.model:
            raise errors.PolicyError("The openai policy needs a model: use 'openai:MODEL' or model=...")
        # the SDK would take $OPENAI_BASE_URL itself: resolved here, so the policy id (and
        # every message) names the endpoint the episodes really used
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise errors.PolicyError(
                    f"The openai policy reads its API key from ${api_key_env}, which is not set. "
                    "Export it, pass api_key_env=NAME, or give a base_url for a keyless local server. "
                    "Worker processes drop *_API_KEY variables unless the executor gets "
                    f"pass_env=[{api_key_env!r}].")
            key = "EMPTY"
        self.base_url, self.temperature, self.top_p, self.max_tokens = base_url, temperature, top_p, max_tokens
        if token_ids not in (True, False, "auto"):
            raise ValueError(f"token_ids must be true, false or 'auto', got {token_ids!r}")
        self.seed, self.token_ids, self.tokenizer_name = seed, token_ids, tokenizer
        self.base_seed = 0 if seed is None else int(seed)
        self.timeout, self.retries, self.backoff_s, self.max_backoff_s = timeout, retries, backoff_s, max_backoff_s
        self.extra_body = extra_body
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        self._retryable = (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError)
        self._tokenizer: Any = None
        self._template_failed: str | None = None
        self._server_context: int | None | bool = False  # False: not asked yet
        if count not in ("auto", "estimate"):
            raise ValueError(f"count must be 'auto' or 'estimate', got {count!r}")
        self.count = count
        self._tokenize_url: str | None | bool = None  # None: not asked yet; False: the server has none
        self.policy_id = describe("openai", self.model, base_url=base_url, format=self.tool_format,
                                  temperature=temperature, seed=seed)

    # -- context -------------------------------------------------------------------------
    def _count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        if not self.tokenizer_name:
            served = self._server_count(messages, tools) if self.count == "auto" else None
            return super()._count_tokens(messages, tools) if served is None else served
        if self._tokenizer is None:
            from .localmodels import load_tokenizer

            self._tokenizer = load_tokenizer(self.tokenizer_name)
        if self._tokenizer is None or self._template_failed:
            return super()._count_tokens(messages, tools)
        from .localmodels import count_chat_tokens

        try:
            return count_chat_tokens(self._tokenizer, messages, tools)
        except Exception as exc:  # noqa: BLE001 - a template that rejects these messages: estimate instead
            self._template_failed = f"{type(exc).__name__}: {str(exc)[:200]}"
            return super()._count_tokens(messages, tools)

    def _server_count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int | None:
        """The prompt's tokens as the server counts them, through vLLM's ``/tokenize`` (the
        request's own chat template and tools); ``None`` when the server has no such
        endpoint (asked once: then the estimate is used for the rest of the run)."""
        if self._tokenize_url is False or not self.base_url:
            return None
        import httpx

        url = self.base_url.rstrip("/").removesuffix("/v1") + "/tokenize"
        body: dict[str, Any] = {"model": self.model, "messages": messages, "add_generation_prompt": True}
        if tools:
            body["tools"] = tools
        try:
            with waiting_on(self.base_url):
                answer = httpx.post(url, json=body, timeout=min(self.timeout, 10.0),
                                    headers={"Authorization": f"Bearer {self._client.api_key}"})
        except httpx.HTTPError:
            return None  # unreachable or slow this time: estimate this count, ask again next time
        if answer.status_code >= 500 or answer.status_code == 429:
            return None
        try:
            count = answer.json().get("count") if answer.status_code == 200 else None
        except (ValueError, AttributeError):
            count = None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            self._tokenize_url = False  # no /tokenize here (404, 401, another answer): estimate from now on
            return None
        self._tokenize_url = url
        return count

    def _refit_count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        served = self._server_count(messages, tools)
        return self._count_tokens(messages, tools) if served is None else served

    def _refit_counted_with(self) -> str:
        return f"server:{self._tokenize_url}" if isinstance(self._tokenize_url, str) else self._counted_with()

    def _counted_with(self) -> str:
        if not self.tokenizer_name and self.count == "auto":
            return f"server:{self._tokenize_url}" if isinstance(self._tokenize_url, str) else super()._counted_with()
        if self._template_failed:
            return f"estimate:chars/3 (tokenizer:{self.tokenizer_name} failed: {self._template_failed})"
        return f"tokenizer:{self.tokenizer_name}" if self.tokenizer_name else super()._counted_with()

    def _prompt_budget(self) -> int | None:
        window = self.max_context or self._served_context()
        if window is None:
            return None
        return max(64, int(window) - int(self.max_tokens or 0) - 8)

    def _served_context(self) -> int | None:
        """The ``max_model_len`` a vLLM server lists for the model (asked once)."""
        if self._server_context is False:
            self._server_context = None
            try:
                with waiting_on(self.base_url or "api.openai.com"):
                    listed = self._client.models.list().data
                for entry in listed:
                    if entry.id == self.model:
                        value = (entry.model_extra or {}).get("max_model_len")
                        self._server_context = int(value) if isinstance(value, int) and value > 0 else None
            except (self._openai.APIError, ValueError, TypeError):
                self._server_context = None
        return self._server_context if isinstance(self._server_context, int) else None

    # -- requests ------------------------------------------------------------------------
    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.top_p is not None:
            req["top_p"] = self.top_p
        if self.max_tokens is not None:
            req["max_tokens"] = self.max_tokens
        if self.seed is not None:
            req["seed"] = self.request_seed()
        if tools:
            req["tools"] = tools
        extra = dict(self.extra_body or {})
        if self.token_ids is True or (self.token_ids == "auto" and self._served_context() is not None):
            req["logprobs"] = True
            extra.setdefault("return_token_ids", True)
        if extra:
            req["extra_body"] = extra
        return req

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  prefill: str) -> Completion:
        request = self._request(messages, tools)
        sampling = {k: v for k, v in request.items() if k not in ("messages", "tools")}
        endpoint = self.base_url or "api.openai.com"
        failures: list[str] = []
        with waiting_on(endpoint):  # the retries' back-off too: an overloaded server is the endpoint's failure
            return self._attempts(request, endpoint, failures, sampling)

    def _attempts(self, request: dict[str, Any], endpoint: str, failures: list[str],
                  sampling: dict[str, Any]) -> Completion:
        for attempt in range(self.retries + 1):
            try:
                response = self._client.chat.completions.create(**request)
            except self._retryable as exc:
                failures.append(_describe_failure(exc))
                if attempt == self.retries:
                    raise errors.EndpointError(
                        f"The endpoint {endpoint} (model {self.model}) failed "
                        f"{len(failures)} times: {'; '.join(failures)}. Check that the server is up "
                        "and not overloaded, or raise timeout=/retries=.",
                        kind=_failure_kind(exc), status=getattr(exc, "status_code", None), endpoint=endpoint) from exc
                delay = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
                time.sleep(delay * (1 + 0.1 * random.random()))
            except self._openai.BadRequestError as exc:
                overflow = _context_overflow(exc, endpoint, self.max_tokens)
                if overflow is not None:
                    raise overflow from exc
                raise errors.PolicyError(
                    f"The endpoint {endpoint} refused the request for model "
                    f"{self.model}: {_describe_failure(exc)}") from exc
            except self._openai.APIError as exc:
                raise errors.PolicyError(
                    f"The endpoint {endpoint} refused the request for model "
                    f"{self.model}: {_describe_failure(exc)}") from exc
            else:
                return _completion(response, attempts=attempt + 1, failures=failures, sampling=sampling)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self._client.close()


def _describe_failure(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {str(exc)[:200]}"


_CONTEXT = re.compile(r"maximum context length is (\d+) tokens", re.I)
_PROMPT_TOKENS = re.compile(r"(?:contains (?:at least )?|requested |\()(\d+) (?:input )?tokens?", re.I)


def _context_overflow(exc: Exception, endpoint: str, max_tokens: int | None) -> ContextOverflow | None:
    """A 400 that says the prompt is longer than the model's context (vLLM's and OpenAI's
    wording), with the limit and the prompt's size when the message states them."""
    text = str(getattr(exc, "message", "") or exc)
    limit = _CONTEXT.search(text)
    if limit is None and "context length" not in text.lower():
        return None
    sized = _PROMPT_TOKENS.search(text[limit.end():] if limit else text)
    return ContextOverflow(f"The endpoint {endpoint} refused the prompt as too long: {text[:300]}",
                           limit=int(limit.group(1)) if limit else None,
                           prompt_tokens=int(sized.group(1)) if sized else None, reserve=int(max_tokens or 0))


def _failure_kind(exc: Exception) -> str:
    """``transport``, ``server`` (5xx) or ``rate_limit`` (429) for ``EndpointError``."""
    status = getattr(exc, "status_code", None)
    if status == 429:
        return "rate_limit"
    return "server" if isinstance(status, int) and status >= 500 else "transport"


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def _logprobs(content: list[Any]) -> list[float] | None:
    """The per-token logprobs of a reply; ``None`` unless every token has a finite number
    (a missing one is not 0.0, a certain token, and NaN is no JSON a reader takes)."""
    out: list[float] = []
    for token in content:
        value = token.get("logprob") if isinstance(token, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        out.append(float(value))
    return out


def _completion(response: Any, *, attempts: int, failures: list[str], sampling: dict[str, Any]) -> Completion:
    # a malformed body (a call's arguments as an object, ...) is data, not a warning
    raw = response.to_dict(warnings=False) if hasattr(response, "to_dict") else response
    if isinstance(raw, dict) and failures:
        raw = {**raw, "envh_attempts": attempts, "envh_failures": failures}
    usage = getattr(response, "usage", None)
    counts: dict[str, int] = {}
    if usage is not None:
        for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
            try:
                counts[k] = max(0, int(getattr(usage, k, 0) or 0))
            except (TypeError, ValueError):
                continue
    choices = getattr(response, "choices", None) or []
    if not choices:
        return Completion(text=None, usage=counts, raw=raw, sampling=sampling)
    choice = choices[0]
    message = choice.message
    tool_calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments or ""}
                  for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
    data = raw if isinstance(raw, dict) else {}
    first = (data.get("choices") or [{}])[0] if isinstance(data.get("choices"), list) else {}
    logprobs = None
    content = ((first.get("logprobs") or {}).get("content") if isinstance(first, dict) else None) or None
    written = None
    if isinstance(content, list):
        logprobs = _logprobs(content)
        # the tokens as generated: what the model wrote before a tool parser took calls out
        written = "".join(str(t.get("token", "")) for t in content if isinstance(t, dict))
    if isinstance(raw, dict):  # the ids and logprobs live on the turn record, not twice
        raw = {k: v for k, v in raw.items() if k != "prompt_token_ids"}
        raw["choices"] = [{k: v for k, v in c.items() if k not in ("token_ids", "logprobs")} if isinstance(c, dict)
                          else c for c in raw.get("choices") or []]
    text = message.content
    return Completion(text=text, tool_calls=tool_calls, usage=counts, raw=raw,
                      finish_reason=getattr(choice, "finish_reason", None), sampling=sampling,
                      prompt_token_ids=_int_list(data.get("prompt_token_ids")),
                      completion_token_ids=_int_list(first.get("token_ids") if isinstance(first, dict) else None),
                      logprobs=logprobs, written=written if tool_calls else None)
