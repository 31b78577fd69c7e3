"""Rollouts through envh's executors: the real pool executor (2 warm worker processes)
steps the envs while this process generates for every live episode in one batch. For the
same seeds the episodes equal the ones played in process in lock step, token for token."""

from __future__ import annotations

import envh
import pytest
import torch
from envh_grpo import remote
from envh_grpo.generation import Generation, HFEngine, SamplingConfig
from envh_grpo.rollout import PREFILL, Job, play, sample_seed
from envh_grpo.sequences import ChatSegments

pytestmark = pytest.mark.slow

SPECS = ["toy24", {"bridge": "toy24", "layers": [{"kind": "workspace"}]}]
TASK = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


class Counting:
    """Passes every call to ``engine``; records the size of every batch."""

    def __init__(self, engine):
        self.engine, self.batches = engine, []

    def generate(self, prompts, sampling, seeds):
        self.batches.append(len(prompts))
        return self.engine.generate(prompts, sampling, seeds)


class Script:
    """Replies by (episode, turn), found from the per-episode sampling seed: what a reply
    is does not depend on the batch, as with a real engine."""

    def __init__(self, tok, replies, seed):
        self.tok = tok
        self.by_seed = {sample_seed(seed, j, t): text for j, texts in enumerate(replies) for t, text in enumerate(texts)}

    def generate(self, prompts, sampling, seeds):
        out = []
        for seed in seeds:
            ids = tuple(self.tok(self.by_seed[seed], add_special_tokens=False)["input_ids"])
            out.append(Generation(ids=ids, logprobs=tuple(-0.5 for _ in ids), finish="stop"))
        return out


@pytest.fixture(scope="module")
def pool():
    executor = envh.get_registry().executor("pool").load()(2, isolation="none", memory_mb=4096)
    yield executor
    executor.close()


def _both(tok, jobs, engine_factory, pool, **opts):
    seg = ChatSegments(tok, PREFILL)
    sampling = opts.pop("sampling")
    inproc = play([Job(env=envh.make(spec), task=task, seed=seed, group=g, spec=str(g)) for spec, task, seed, g in jobs],
                  engine_factory(), seg, sampling, **opts)
    counting = Counting(engine_factory())
    pooled = remote.play_remote([remote.RemoteJob(spec=spec, task=task, seed=seed, group=g, name=str(g))
                                 for spec, task, seed, g in jobs], pool, counting, seg, sampling, **opts)
    return inproc, pooled, counting


def _assert_equal(inproc, pooled, atol):
    assert len(inproc) == len(pooled)
    for a, b in zip(inproc, pooled):
        assert [t.prompt_ids for t in a.turns] == [t.prompt_ids for t in b.turns]
        assert [t.completion_ids for t in a.turns] == [t.completion_ids for t in b.turns]
        for ta, tb in zip(a.turns, b.turns):
            assert torch.allclose(torch.tensor(ta.logprobs), torch.tensor(tb.logprobs), atol=atol)
        assert (a.success, a.score, a.stop, a.invalid_turns, a.texts, a.group) == \
            (b.success, b.score, b.stop, b.invalid_turns, b.texts, b.group)
        assert a.facts == b.facts  # the reward reads the same facts, meta-action counts included


REPLIES = [
    ["combine(0, 1, mul)</action>", "combine(0, 1, mul)</action>", "stop()</action>"],  # solved
    ["hello</action>", "combine(0, 9, mul)</action>", "stop()</action>"],  # invalid, env error, stop
    ['note("a")</action>', 'note("b")</action>', 'track("world")</action>', 'note("c")</action>',
     'note("d")</action>', "combine(0, 1, mul)</action>"],  # meta-actions past the allowance
    ['recall("x")</action>', 'commit("solve", "todo")</action>', "combine(0, 1, mul)</action>",
     "combine(0, 1, mul)</action>", "stop()</action>"],
]


def test_scripted_pool_rollouts_equal_the_in_process_ones_term_for_term(tokenizer, pool):
    jobs = [(SPECS[j // 2], TASK, j, j // 2) for j in range(4)]
    sampling = SamplingConfig(max_new_tokens=64)
    inproc, pooled, counting = _both(tokenizer, jobs, lambda: Script(tokenizer, REPLIES, 3), pool,
                                     max_turns=6, max_context=4096, seed=3, sampling=sampling)
    _assert_equal(inproc, pooled, atol=0)
    assert pooled[0].success and pooled[0].stop == "terminated"
    assert pooled[1].invalid_turns[:2] == (True, True) and not pooled[1].success
    assert pooled[0].facts.meta is None and pooled[2].facts.meta == {"track": 1, "commit": 0, "recall": 0, "note": 4}
    assert pooled[3].success and pooled[3].facts.meta == {"track": 0, "commit": 1, "recall": 1, "note": 0}
    assert max(counting.batches) == 2  # the two workers' turns went to the engine together


def test_model_pool_rollouts_equal_the_in_process_ones(smollm2, pool):
    _, tok, model = smollm2
    tasks = envh.make("toy24").list_tasks("easy")
    jobs = [(SPECS[g], tasks[g], 10 * g + i, g) for g in range(2) for i in range(2)]
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0)
    inproc, pooled, counting = _both(tok, jobs, lambda: HFEngine(model, tok), pool, max_turns=2,
                                     max_context=4096, seed=7, sampling=sampling)
    _assert_equal(inproc, pooled, atol=1e-4)
    assert len({tuple(t.completion_ids for t in ep.turns) for ep in pooled}) > 1  # episodes differ
    assert sum(counting.batches) == sum(len(ep.turns) for ep in pooled)


def test_the_generation_server_refuses_strangers_and_bad_requests(tokenizer):
    seg = ChatSegments(tokenizer, PREFILL)
    server = remote.GenerationServer(Script(tokenizer, [["stop()</action>"]], 0), seg, SamplingConfig(),
                                     episodes=1, expected=1, max_context=4096)
    try:
        call, token = remote._call, server.token
        assert call(server.address, {"token": "wrong", "key": 0, "op": "start"}, 30) == {"error": "unauthorised"}
        assert "unknown episode" in call(server.address, {"token": token, "key": 5, "op": "start"}, 30)["error"]
        assert "bad request" in call(server.address, {"token": token, "key": 0, "op": "turn"}, 30)["error"]
        assert "unknown episode" in call(server.address, {"token": token, "key": True, "op": "start"}, 30)["error"]
        assert "error" in remote._call(server.address, {"token": token, "key": 0, "op": "turn",
                                                        "message": "x"}, 30)  # no conversation yet
        import socket

        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as raw:  # an endless line: refused past 4 MiB
            try:
                raw.sendall(b"x" * (remote.MAX_LINE + 65536))
            except OSError:
                pass
            assert b"over" in raw.recv(4096)
        env = envh.make("toy24")
        first = env.reset(task=TASK, seed=0)
        with pytest.raises(envh.errors.PolicyError, match="unauthorised"):
            remote.RemotePolicy(address=server.address, token="wrong", episode=0).start(
                task=None, tools=env.tools(), observation=first.observation)
        policy = remote.RemotePolicy(address=server.address, token=token, episode=0)
        policy.start(task=None, tools=env.tools(), observation=first.observation)
        step = policy.act(first.observation, env.tools())
        assert step.action == envh.Action(tool="stop", args={}) and step.invalid is None
    finally:
        server.close()


def test_an_episode_whose_prompt_outgrows_the_context_ends_there(tokenizer, pool):
    jobs = [("toy24", TASK, 0, 0)]
    sampling = SamplingConfig(max_new_tokens=64)
    inproc, pooled, _ = _both(tokenizer, jobs, lambda: Script(tokenizer, [["hello</action>"] * 9], 1), pool,
                              max_turns=9, max_context=400, seed=1, sampling=sampling)
    _assert_equal(inproc, pooled, atol=0)
    assert pooled[0].stop == "context" and 0 < len(pooled[0].turns) < 9


def test_a_training_step_is_the_same_whether_episodes_run_in_process_or_in_the_pool(tmp_path):
    from envh_grpo.config import from_data
    from envh_grpo.trainer import GRPOTrainer

    def step(**rollout):
        config = from_data({
            "group_size": 2, "groups_per_step": 2, "max_turns": 2, "max_response_tokens": 6, "steps": 1,
            "micro_batch": 4, "optim": {"lr": 1e-4}, "deepspeed": {"enabled": "false"}, "threads": 1, "seed": 0,
            "envs": [{"spec": "toy24", "split": "easy"}], "rollout": rollout, "output_dir": str(tmp_path / "out"),
            "log": {"tensorboard": "false", "wandb": "false", "progress": False}})
        trainer = GRPOTrainer(config)
        try:
            return trainer.train_step() | trainer.evaluate()  # held-out evaluation through the same workers
        finally:
            trainer.close()

    local = step()
    pooled = step(executor="pool", workers=2, options={"isolation": "none"})
    for key in ("loss", "policy_loss", "reward", "reward/solved", "reward/invalid", "gen_tokens", "policy_tokens",
                "success", "turns", "episodes", "eval/success", "eval/score", "eval/steps", "eval/episodes"):
        assert pooled[key] == pytest.approx(local[key], abs=1e-5), key
    assert local["eval/episodes"] == 4


def test_a_failing_engine_stops_the_rollout_with_its_cause(tokenizer, pool):
    class Broken:
        def generate(self, prompts, sampling, seeds):
            raise RuntimeError("out of memory in the engine")

    jobs = [remote.RemoteJob(spec="toy24", task=TASK, seed=j, group=0) for j in range(2)]
    with pytest.raises(envh.errors.EnvhError, match="out of memory in the engine"):
        remote.play_remote(jobs, pool, Broken(), ChatSegments(tokenizer, PREFILL), SamplingConfig(), max_turns=2,
                           max_context=4096)


def test_a_turn_left_over_by_a_dead_worker_does_not_enter_the_retried_episode(tokenizer):
    import threading

    gate = threading.Event()

    class Gated(Script):
        def generate(self, prompts, sampling, seeds):
            gate.wait(60)
            return super().generate(prompts, sampling, seeds)

    seg = ChatSegments(tokenizer, PREFILL)
    server = remote.GenerationServer(Gated(tokenizer, [["stop()</action>"]], 0), seg, SamplingConfig(), episodes=1,
                                     expected=1, max_context=4096, linger_s=0.0)
    try:
        start = {"token": server.token, "key": 0, "op": "start", "system": "s", "observation": "o"}
        assert remote._call(server.address, start, 30) == {"ok": True}
        stale: dict = {}
        first = threading.Thread(target=lambda: stale.update(remote._call(
            server.address, {"token": server.token, "key": 0, "op": "turn", "message": None}, 60)))
        first.start()  # the first attempt's turn waits in the engine; its worker dies meanwhile
        for _ in range(100):
            if server.batches:
                break
            threading.Event().wait(0.05)
        assert remote._call(server.address, start, 30) == {"ok": True}  # the retry starts the episode again
        gate.set()
        first.join(60)
        assert "newer attempt" in stale["error"] and server.turns[0] == []
        again = remote._call(server.address, {"token": server.token, "key": 0, "op": "turn", "message": None}, 60)
        assert again["text"] == "stop()</action>" and len(server.turns[0]) == 1  # turn 0's seed, once
    finally:
        gate.set()
        server.close()
