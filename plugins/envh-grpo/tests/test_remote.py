"""Rollouts through envh's executors: the real pool executor (2 warm worker processes) and
a real local Ray cluster (2 actors) step the envs while this process generates for every
live episode in one batch. For the same seeds the episodes equal the ones played in
process in lock step, token for token."""

from __future__ import annotations

import envh
import pytest
from envh_grpo import remote
from envh_grpo.generation import HFEngine, SamplingConfig
from envh_grpo.rollout import PREFILL, Job, play
from envh_grpo.sequences import ChatSegments
from grpo_scripted import REPLIES, Counting, Script, assert_equal

pytestmark = pytest.mark.slow

SPECS = ["toy24", {"bridge": "toy24", "layers": [{"kind": "workspace"}]}]
TASK = envh.TaskRef(suite="toy24", split="easy", instance_id="2,3,4")


@pytest.fixture(scope="module")
def pool():
    executor = envh.get_registry().executor("pool").load()(2, isolation="none", memory_mb=4096)
    yield executor
    executor.close()


#: Ray actors that reserve no CPU: another Ray user of the session (core's executor tests
#: keep a 2-CPU local cluster busy with their own actors) cannot leave these pending.
RAY_OPTIONS = {"cpus_per_worker": 0, "grace_s": 1.0, "retries": 1, "memory_mb": 4096}


@pytest.fixture(scope="module")
def ray_pool():
    """2 actors on a local Ray cluster (loopback, started here unless the session has one,
    and then shut down with the module)."""
    import os

    ray = pytest.importorskip("ray")
    from envh.rollout.executors.ray import RayExecutor

    ours = not ray.is_initialized()
    saved = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        executor = RayExecutor(2, **RAY_OPTIONS)
    finally:
        if saved is None:
            os.environ.pop("RAY_USAGE_STATS_ENABLED")
        else:
            os.environ["RAY_USAGE_STATS_ENABLED"] = saved
    yield executor
    executor.close()
    if ours:
        ray.shutdown()


@pytest.fixture(params=["pool", "ray"])
def executor(request):
    return request.getfixturevalue({"pool": "pool", "ray": "ray_pool"}[request.param])


def _both(tok, jobs, engine_factory, pool, **opts):
    seg = ChatSegments(tok, PREFILL)
    sampling, linger = opts.pop("sampling"), opts.pop("linger_s", 0.05)
    inproc = play([Job(env=envh.make(spec), task=task, seed=seed, group=g, spec=str(g)) for spec, task, seed, g in jobs],
                  engine_factory(), seg, sampling, **opts)
    counting = Counting(engine_factory())
    pooled = remote.play_remote([remote.RemoteJob(spec=spec, task=task, seed=seed, group=g, name=str(g))
                                 for spec, task, seed, g in jobs], pool, counting, seg, sampling, linger_s=linger,
                                **opts)
    return inproc, pooled, counting


def test_scripted_executor_rollouts_equal_the_in_process_ones_term_for_term(tokenizer, executor):
    jobs = [(SPECS[j // 2], TASK, j, j // 2) for j in range(4)]
    sampling = SamplingConfig(max_new_tokens=64)
    # linger 2 s: on a loaded machine the two workers' turns rarely arrive within the default 50 ms
    inproc, pooled, counting = _both(tokenizer, jobs, lambda: Script(tokenizer, REPLIES, 3), executor,
                                     max_turns=6, max_context=4096, seed=3, sampling=sampling, linger_s=2.0)
    assert_equal(inproc, pooled, atol=0)
    assert pooled[0].success and pooled[0].stop == "terminated"
    assert pooled[1].invalid_turns[:2] == (True, True) and not pooled[1].success
    assert pooled[0].facts.meta is None and pooled[2].facts.meta == {"track": 1, "commit": 0, "recall": 0, "note": 4}
    assert pooled[3].success and pooled[3].facts.meta == {"track": 0, "commit": 1, "recall": 1, "note": 0}
    assert max(counting.batches) == 2  # the two workers' turns went to the engine together


def test_model_executor_rollouts_equal_the_in_process_ones(random_model, executor):
    """A real model's sampled turns (a small random one: its replies are noise, so episodes
    differ) are the same token for token whether the episodes run in process or remotely."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(random_model))
    model = AutoModelForCausalLM.from_pretrained(str(random_model), dtype=torch.float32).eval()
    tasks = envh.make("toy24").list_tasks("easy")
    jobs = [(SPECS[g], tasks[g], 10 * g + i, g) for g in range(2) for i in range(2)]
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0)
    inproc, pooled, counting = _both(tok, jobs, lambda: HFEngine(model, tok), executor, max_turns=2,
                                     max_context=4096, seed=7, sampling=sampling)
    assert_equal(inproc, pooled, atol=1e-4)
    assert len({tuple(t.completion_ids for t in ep.turns) for ep in pooled}) > 1  # episodes differ
    assert sum(counting.batches) == sum(len(ep.turns) for ep in pooled)


def test_the_generation_server_refuses_strangers_and_bad_requests(tokenizer):
    seg = ChatSegments(tokenizer, PREFILL)
    server = remote.GenerationServer(Script(tokenizer, [["stop()</action>"]], 0), seg, SamplingConfig(),
                                     episodes=1, expected=1, max_context=4096)
    try:
        call, token, of = remote._call, server.token_for(0), server.token_for
        assert call(server.address, {"token": "wrong", "key": 0, "op": "start"}, 30) == {"error": "unauthorised"}
        assert "unknown episode" in call(server.address, {"token": of(5), "key": 5, "op": "start"}, 30)["error"]
        assert "bad request" in call(server.address, {"token": token, "key": 0, "op": "turn"}, 30)["error"]
        assert "unknown episode" in call(server.address, {"token": of(True), "key": True, "op": "start"}, 30)["error"]
        assert call(server.address, {"token": of(5), "key": 0, "op": "start"}, 30) == {"error": "unauthorised"}
        assert call(server.address, ["not", "a", "mapping"], 30) == {"error": "unauthorised"}
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
    assert_equal(inproc, pooled, atol=0)
    assert pooled[0].stop == "context" and 0 < len(pooled[0].turns) < 9


def _train_step(out, model, **rollout):
    """One GRPO step of ``model`` (one process, no DeepSpeed) and a held-out evaluation: the
    step's metrics, its episodes (each drawn task's prompts and replies, token for token) and
    the held-out rows. The step is the run's last and ``save_final`` is off, so no checkpoint
    is written although ``save_every`` is 1 (``envh experiment``'s setting; test_cli checks
    the default). Four episodes a group: with this model's replies, a group's rewards differ
    with probability 0.86, so the step is an update whatever the draws (seed 1: both groups)."""
    from envh_grpo.config import from_data
    from envh_grpo.trainer import GRPOTrainer

    config = from_data({
        "group_size": 4, "groups_per_step": 2, "max_turns": 2, "max_response_tokens": 6, "steps": 1,
        "micro_batch": 4, "optim": {"lr": 1e-4}, "deepspeed": {"enabled": "false"}, "threads": 1,
        "seed": 1, "save_every": 1, "model": str(model),
        "envs": [{"spec": "toy24", "split": "easy"}], "rollout": rollout, "output_dir": str(out),
        "log": {"tensorboard": "false", "wandb": "false", "progress": False}})
    trainer = GRPOTrainer(config, save_final=False)
    played, held_out = [], []
    rollouts, write_eval = trainer.rollouts, trainer._write_eval

    def recording(step):  # the step's own episodes, as the trainer scores them
        result = rollouts(step)
        played.extend(result[0])
        return result

    def recording_eval(episodes):  # the held-out episodes, as the trainer writes them
        held_out.extend(episodes)
        write_eval(episodes)

    trainer.rollouts, trainer._write_eval = recording, recording_eval
    try:
        record = trainer.train_step() | trainer.evaluate()  # held-out evaluation through the same workers
    finally:
        trainer.close()
    assert not (out / "checkpoints").exists()
    return record, played, held_out


@pytest.fixture(scope="module")
def local_step(tmp_path_factory, repeating_model):
    """The in-process step every executor's step is compared with (computed once), of the
    small model whose rewards differ within a group (an update that moves the weights)."""
    return _train_step(tmp_path_factory.mktemp("grpo-local"), repeating_model)


@pytest.mark.parametrize("name", ["pool", "ray"])
def test_a_training_step_is_the_same_whether_episodes_run_in_process_or_in_an_executor(name, local_step, tmp_path,
                                                                                        request, repeating_model):
    """The same step, term for term, from the same episodes: the tasks drawn, their prompts
    and replies token for token (the metrics alone barely depend on the prompt with this
    model), and the same held-out episodes, prompts included (greedy, this model answers
    every held-out prompt alike: only the prompts tell the tasks apart)."""
    options = {"isolation": "none"}
    if name == "ray":
        request.getfixturevalue("ray_pool")  # the module's Ray cluster (shut down with it)
        options = dict(RAY_OPTIONS)
    remote, remote_episodes, remote_held_out = _train_step(tmp_path / "out", repeating_model, executor=name, workers=2,
                                                       options=options)
    local, local_episodes, local_held_out = local_step
    assert local["groups/nonzero_adv"] == 1.0  # both groups' rewards differed: the compared step is an update
    assert len({e.task for e in local_episodes}) == 2
    assert_equal(local_episodes, remote_episodes, atol=1e-5)
    assert [e.task for e in local_episodes] == [e.task for e in remote_episodes]
    for key in ("loss", "policy_loss", "grad_norm", "reward", "reward/solved", "reward/invalid", "reward/spam",
                "gen_tokens", "policy_tokens", "success", "turns", "episodes", "eval/success", "eval/score",
                "eval/steps", "eval/episodes", "groups/nonzero_adv"):
        assert remote[key] == pytest.approx(local[key], abs=1e-5), key
    assert len(local_held_out) == 4 and len({e.task for e in local_held_out}) == 4
    assert_equal(local_held_out, remote_held_out, atol=1e-5)
    assert local["eval/episodes"] == 4
    assert (local["rollout/workers"], remote["rollout/workers"]) == (0, 2)


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
        start = {"token": server.token_for(0), "key": 0, "op": "start", "system": "s", "observation": "o"}
        assert remote._call(server.address, start, 30) == {"ok": True, "attempt": 1}
        stale: dict = {}
        first = threading.Thread(target=lambda: stale.update(remote._call(
            server.address, {"token": server.token_for(0), "key": 0, "op": "turn", "message": None, "attempt": 1}, 60)))
        first.start()  # the first attempt's turn waits in the engine; its worker dies meanwhile
        for _ in range(100):
            if server.batches:
                break
            threading.Event().wait(0.05)
        assert remote._call(server.address, start, 30) == {"ok": True, "attempt": 2}  # the retry starts again
        gate.set()
        first.join(60)
        assert "newer attempt" in stale["error"] and server.turns[0] == []
        again = remote._call(server.address, {"token": server.token_for(0), "key": 0, "op": "turn",
                                              "message": None, "attempt": 2}, 60)
        assert again["text"] == "stop()</action>" and len(server.turns[0]) == 1  # turn 0's seed, once
    finally:
        gate.set()
        server.close()


def test_a_ray_actor_killed_mid_episode_replays_it_to_the_same_tokens(tokenizer, ray_pool):
    """SIGKILL of an actor while its episode waits for a turn: Ray reports the death, the
    executor retries the episode on a new actor, the server restarts its conversation, and
    the episode ends as the in-process one (the retry samples the same seeds again)."""
    import os
    import signal

    jobs = [(SPECS[j // 2], TASK, j, j // 2) for j in range(4)]
    sampling = SamplingConfig(max_new_tokens=64)
    seg = ChatSegments(tokenizer, PREFILL)
    inproc = play([Job(env=envh.make(spec), task=task, seed=seed, group=g, spec=str(g)) for spec, task, seed, g in jobs],
                  Script(tokenizer, REPLIES, 5), seg, sampling, max_turns=6, max_context=4096, seed=5)
    remote_jobs = [remote.RemoteJob(spec=spec, task=task, seed=seed, group=g, name=str(g))
                   for spec, task, seed, g in jobs]
    if len(ray_pool.actors) < 2:  # run alone: start the two actors first
        remote.play_remote(remote_jobs[:2], ray_pool, Script(tokenizer, REPLIES, 5), seg, sampling, max_turns=6,
                           max_context=4096, seed=5)
    victim = ray_pool.pids()[0]
    killed: list[int] = []

    class Killing(Script):
        def generate(self, prompts, sampling, seeds):
            if not killed and any(self.turn_of[s] == 2 for s in seeds):
                os.kill(victim, signal.SIGKILL)  # an actor dies while its episode waits for this turn
                killed.append(victim)
            return super().generate(prompts, sampling, seeds)

    counting = Counting(Killing(tokenizer, REPLIES, 5))
    pooled = remote.play_remote(remote_jobs, ray_pool, counting, seg, sampling, max_turns=6, max_context=4096, seed=5)
    assert killed and killed[0] not in ray_pool.pids()  # replaced
    assert_equal(inproc, pooled, atol=0)
    replayed = [s for s in set(counting.seeds) if counting.seeds.count(s) > 1]
    assert replayed, "no episode was played again after its actor died"


def test_a_token_or_an_end_notice_replayed_changes_nothing(tokenizer):
    """A token captured from one rollout is worthless for the next (each server draws its
    own secret); one episode's token cannot act on another episode (code running beside
    the policy in a worker holds only its own episode's); an ``end`` notice replayed for an
    episode counts once."""
    seg = ChatSegments(tokenizer, PREFILL)
    first = remote.GenerationServer(Script(tokenizer, [["stop()</action>"]] * 2, 0), seg, SamplingConfig(),
                                    episodes=2, expected=2, max_context=4096)
    import time

    t0 = time.monotonic()
    first.close()
    assert time.monotonic() - t0 < 2 and not any(t.is_alive() for t in first._threads)  # was 10 s every rollout
    second = remote.GenerationServer(Script(tokenizer, [["stop()</action>"]] * 2, 0), seg, SamplingConfig(),
                                     episodes=2, expected=2, max_context=4096)
    try:
        start = {"key": 0, "op": "start", "system": "s", "observation": "o"}
        assert remote._call(second.address, {"token": first.token_for(0), **start}, 30) == {"error": "unauthorised"}
        assert remote._call(second.address, {"token": second.token_for(1), **start}, 30) == {"error": "unauthorised"}
        assert remote._call(second.address, {"token": second.token_for(0), **start}, 30)["ok"]
        end = {"token": second.token_for(1), "key": 1, "op": "end"}
        assert remote._call(second.address, end, 30) == {"ok": True}
        assert remote._call(second.address, end, 30) == {"ok": True}
        assert second.unfinished == 1  # not 0: episode 0 still plays and its batches wait for it
    finally:
        second.close()


def _two_ranks(tmp_path, crash=None):
    """The shared-executor child under torchrun, 2 ranks on gloo; (launcher, job tag)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from envh_grpo import procs

    tag = procs.new_tag()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONWARNINGS="ignore", **{procs.TAG: tag})
    if crash is not None:
        env["CRASH_RANK"] = str(crash)
    child = Path(__file__).parent / "shared_rollout_child.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(child),
           str(tmp_path)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), tag


def test_two_ranks_share_one_executor_and_each_keeps_its_own_episodes(tmp_path):
    """One executor per job: rank 0's pool plays rank 1's episodes too (their requests carry
    rank 1's server), and each rank's episodes equal its in-process ones."""
    import json

    from envh_grpo import procs

    launcher, tag = _two_ranks(tmp_path)
    try:
        out, err = launcher.communicate(timeout=300)
    finally:
        procs.reap(tag)
    assert launcher.returncode == 0, out[-2000:] + err[-5000:]
    zero, one = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (zero["episodes"], one["episodes"], one["keys"]) == (4, 4, None)  # rank 1 started no executor
    assert sorted(zero["keys"]) == sorted(f"shared#{r}.{j}" for r in (0, 1) for j in range(4))


@pytest.mark.parametrize("crash", [0, 1])
def test_a_rank_that_dies_mid_rollout_ends_the_job_without_leftovers(tmp_path, crash):
    """Rank 1 dying leaves rank 0 driving episodes whose server is gone; rank 0 dying leaves
    rank 1 waiting for trajectories. Either way the launcher ends the job (non-zero) and
    no process of it (ranks, pool workers) stays behind, without reaping."""
    import time

    from envh_grpo import procs

    launcher, tag = _two_ranks(tmp_path, crash=crash)
    try:
        out, err = launcher.communicate(timeout=300)
        deadline = time.monotonic() + 30
        while procs.tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = procs.tagged(tag)
    finally:
        procs.reap(tag)
    assert launcher.returncode != 0, out[-2000:]
    assert "exitcode  : 7" in err or "exitcode: 7" in err or "exit code 7" in err.lower(), err[-3000:]
    assert left == [], f"processes of the job still alive after it ended: {left}"


def test_a_server_bound_to_every_interface_gives_workers_an_address_they_can_reach(tokenizer):
    """``rollout.host: 0.0.0.0`` (actors on other nodes): the address handed to workers is
    this node's, not the wildcard, and answers (still only to the token)."""
    seg = ChatSegments(tokenizer, PREFILL)
    server = remote.GenerationServer(Script(tokenizer, [["stop()</action>"]], 0), seg, SamplingConfig(),
                                     episodes=1, expected=1, max_context=4096, host="0.0.0.0")
    try:
        import ipaddress
        import socket

        host = server.address.rsplit(":", 1)[0]
        assert host not in ("0.0.0.0", "") and host == remote.advertised("0.0.0.0")
        routable = [a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)] + \
            [host]  # what the node routes from; loopback only on a node with no other interface
        if any(not ipaddress.ip_address(a).is_loopback for a in routable):
            assert not ipaddress.ip_address(host).is_loopback, host  # /etc/hosts often maps the hostname to 127.x
        start = {"key": 0, "op": "start", "system": "s", "observation": "o"}
        assert remote._call(server.address, {"token": server.token_for(0), **start}, 30)["ok"]
        assert remote._call(server.address, {"token": "x", **start}, 30) == {"error": "unauthorised"}
    finally:
        server.close()


def test_a_rollout_whose_every_episode_the_executor_lost_is_an_error(tokenizer, tmp_path):
    """Workers that die at start (here a worker program that exits at once) lose every
    episode after its retries: the rollout stops with the cause instead of handing the
    trainer a batch of zero-reward episodes nobody played."""
    dies = tmp_path / "dies"
    dies.write_text("#!/bin/sh\nsleep 0.5\nexit 3\n")  # reads nothing, answers nothing, exits
    dies.chmod(0o755)
    executor = envh.get_registry().executor("pool").load()(2, isolation="none", retries=1, python=str(dies))
    jobs = [remote.RemoteJob(spec="toy24", task=TASK, seed=j, group=0) for j in range(2)]
    try:
        with pytest.raises(envh.errors.InfraError, match="lost every episode of the rollout"):
            remote.play_remote(jobs, executor, Script(tokenizer, [["stop()</action>"]] * 2, 0),
                               ChatSegments(tokenizer, PREFILL), SamplingConfig(), max_turns=2, max_context=4096)
    finally:
        executor.close()


def test_a_stale_attempt_cannot_write_into_the_retried_episode_nor_an_ended_one(tokenizer):
    """The executor retried an episode on another worker while the first one (slow, cut off,
    not dead) still plays: the first one's next turn is refused, so the retried episode
    keeps only its own turns and seeds; once the episode has ended nothing restarts it."""
    seg = ChatSegments(tokenizer, PREFILL)
    server = remote.GenerationServer(Script(tokenizer, [["stop()</action>", "stop()</action>"]], 0), seg,
                                     SamplingConfig(), episodes=1, expected=1, max_context=4096, linger_s=0.0)
    try:
        tok = server.token_for(0)
        start = {"token": tok, "key": 0, "op": "start", "system": "s", "observation": "o"}

        def turn(attempt, message=None):
            return remote._call(server.address, {"token": tok, "key": 0, "op": "turn", "message": message,
                                                 "attempt": attempt}, 60)

        assert remote._call(server.address, start, 30)["attempt"] == 1
        assert "text" in turn(1)
        assert remote._call(server.address, start, 30)["attempt"] == 2  # the retry
        assert "text" in turn(2)
        assert "newer attempt" in turn(1, "STALE observation of attempt 1")["error"]
        assert "newer attempt" in turn(None)["error"]  # a turn must say which attempt it belongs to
        assert len(server.turns[0]) == 1 and b"STALE" not in str(server.turns[0]).encode()
        assert remote._call(server.address, {"token": tok, "key": 0, "op": "end"}, 30) == {"ok": True}
        assert "has ended" in remote._call(server.address, start, 30)["error"]
        assert "has ended" in turn(2)["error"] and len(server.turns[0]) == 1
    finally:
        server.close()


def test_workers_that_cannot_reach_the_generation_server_lose_the_rollout(tokenizer, pool, monkeypatch):
    """A worker that cannot connect back (a rank on another node advertising loopback, a
    firewall) plays nothing: its episodes are lost, not failures to train on, and a rollout
    that lost them all stops with the cause."""
    monkeypatch.setattr(remote, "advertised", lambda host: "127.0.0.2")  # bound to 127.0.0.1 only: refused
    jobs = [remote.RemoteJob(spec="toy24", task=TASK, seed=j, group=0) for j in range(2)]
    with pytest.raises(envh.errors.InfraError, match="lost every episode.*unreachable"):
        remote.play_remote(jobs, pool, Script(tokenizer, [["stop()</action>"]] * 2, 0),
                           ChatSegments(tokenizer, PREFILL), SamplingConfig(), max_turns=2, max_context=4096)


def test_a_group_with_a_lost_episode_is_left_out_of_the_step():
    from envh_grpo.rewards import EpisodeFacts
    from envh_grpo.rollout import Episode, played

    def episode(group, lost=False, success=False):
        facts = EpisodeFacts(solved=success, turns=1, actions=(), replies=((1,),), invalid=0)
        return Episode(group=group, spec="s", task="t", turns=(), facts=facts, success=success, score=0.0,
                       stop="infra_error: killed" if lost else "terminated", lost=lost)

    eps = [episode(0, success=True), episode(0, lost=True), episode(1), episode(1, success=True)]
    kept, left_out = played(eps)
    assert kept == eps[2:] and left_out == 2  # the lost one and its group mate
    assert played(eps[2:]) == (eps[2:], 0)


def test_a_connection_that_sends_nothing_is_dropped(tokenizer, monkeypatch):
    """A local stranger opening connections and sending no line holds a server thread for
    REQUEST_S at most (it was 600 s), then gets an error and is closed."""
    import socket
    import time

    monkeypatch.setattr(remote, "REQUEST_S", 1.0)
    seg = ChatSegments(tokenizer, PREFILL)
    server = remote.GenerationServer(Script(tokenizer, [["stop()</action>"]], 0), seg, SamplingConfig(),
                                     episodes=1, expected=1, max_context=4096)
    try:
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as idle:
            idle.sendall(b'{"token": "x"')  # never finishes its line
            t0 = time.monotonic()
            answer = idle.recv(4096)
            assert b"error" in answer and time.monotonic() - t0 < 10
    finally:
        server.close()
