"""The ``openai`` policy: any OpenAI-compatible chat endpoint through the ``openai`` SDK.

vLLM servers, OpenAI, and the OpenAI-compatible endpoints of other providers all work.
Transient failures (timeouts, connection errors, 429 and 5xx answers) are retried with
exponential backoff; when retries run out, or on a non-retryable error (a 401, a bad
request), the step raises ``PolicyError`` and that episode ends as a policy error.
Malformed model output is not an error: it is an invalid step the episode records.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from ... import errors
from .chat import ChatPolicy, Completion, describe


class OpenAIPolicy(ChatPolicy):
    """Chat-completions policy. Spec name ``openai:MODEL``.

    :param model: the model name the endpoint serves (the ARG of ``openai:MODEL``).
    :param base_url: the endpoint, e.g. ``http://localhost:8000/v1``; ``None`` is OpenAI.
    :param api_key_env: the environment variable holding the key. With a ``base_url`` a
        missing key is sent as ``EMPTY`` (vLLM and local servers need none).
    :param temperature, max_tokens, seed: sampling options sent with each request.
    :param timeout: seconds per request.
    :param retries: attempts after the first one, for transient failures.
    :param backoff_s: the first retry waits this long, doubling each time (plus jitter).
    :param extra_body: extra JSON fields for the request (provider-specific options).
    Other keywords go to ``ChatPolicy`` (action format, skills, system prompt, ...).
    """

    kind = "openai"
    native_tools = True

    def __init__(self, arg: str | None = None, *, model: str | None = None, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", temperature: float = 0.0, max_tokens: int | None = 512,
                 seed: int | None = None, timeout: float = 60.0, retries: int = 3, backoff_s: float = 1.0,
                 max_backoff_s: float = 30.0, extra_body: dict[str, Any] | None = None, **chat: Any) -> None:
        super().__init__(**chat)
        import openai  # lazily: importing envh must stay cheap

        self.model = model or arg
        if not self.model:
            raise errors.PolicyError("The openai policy needs a model: use 'openai:MODEL' or model=...")
        key = os.environ.get(api_key_env)
        if not key:
            if base_url is None:
                raise errors.PolicyError(
                    f"The openai policy reads its API key from ${api_key_env}, which is not set. "
                    "Export it, pass api_key_env=NAME, or give a base_url for a keyless local server. "
                    "Worker processes drop *_API_KEY variables unless the executor gets "
                    f"pass_env=[{api_key_env!r}].")
            key = "EMPTY"
        self.base_url, self.temperature, self.max_tokens, self.seed = base_url, temperature, max_tokens, seed
        self.timeout, self.retries, self.backoff_s, self.max_backoff_s = timeout, retries, backoff_s, max_backoff_s
        self.extra_body = extra_body
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        self._retryable = (openai.APIConnectionError, openai.InternalServerError, openai.RateLimitError)
        self.policy_id = describe("openai", self.model, base_url=base_url, format=self.action_format,
                                  temperature=temperature)

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens is not None:
            req["max_tokens"] = self.max_tokens
        if self.seed is not None:  # per episode, so K rollouts of a task are K samples
            episode = getattr(self, "_episode_seed", None)
            req["seed"] = self.seed if episode is None else self.seed + int(episode)
        if tools:
            req["tools"] = tools
        if self.extra_body:
            req["extra_body"] = self.extra_body
        return req

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  prefill: str) -> Completion:
        request = self._request(messages, tools)
        failures: list[str] = []
        for attempt in range(self.retries + 1):
            try:
                response = self._client.chat.completions.create(**request)
            except self._retryable as exc:
                failures.append(_describe_failure(exc))
                if attempt == self.retries:
                    raise errors.PolicyError(
                        f"The endpoint {self.base_url or 'api.openai.com'} (model {self.model}) failed "
                        f"{len(failures)} times: {'; '.join(failures)}. Check that the server is up "
                        "and not overloaded, or raise timeout=/retries=.") from exc
                delay = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
                time.sleep(delay * (1 + 0.1 * random.random()))
            except self._openai.APIError as exc:
                raise errors.PolicyError(
                    f"The endpoint {self.base_url or 'api.openai.com'} refused the request for model "
                    f"{self.model}: {_describe_failure(exc)}") from exc
            else:
                return _completion(response, attempts=attempt + 1, failures=failures)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self._client.close()


def _describe_failure(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {str(exc)[:200]}"


def _completion(response: Any, *, attempts: int, failures: list[str]) -> Completion:
    raw = response.to_dict() if hasattr(response, "to_dict") else response
    if isinstance(raw, dict):
        raw = {**raw, "envh_attempts": attempts, "envh_failures": failures} if failures else raw
    usage = getattr(response, "usage", None)
    counts = {k: int(getattr(usage, k, 0) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")} \
        if usage else {}
    choices = getattr(response, "choices", None) or []
    if not choices:
        return Completion(text=None, usage=counts, raw=raw)
    message = choices[0].message
    tool_calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments or ""}
                  for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
    return Completion(text=message.content, tool_calls=tool_calls, usage=counts, raw=raw)
