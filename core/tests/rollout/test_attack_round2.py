"""Attacks on the runner and ``envh run --resume`` (round 2)."""

from __future__ import annotations

import os
from pathlib import Path

import envh
import hostile
import pytest
from envh.rollout import export
from envh.rollout.policy import PolicyStep
from envh.rollout.runner import run_episode
from envh.rollout.store import TrajectoryStore
from envh.rollout.trajectory import EpisodeRequest, ModelTurn
from envh.testing_llm import LLMReplayServer, tool_reply
from envh.types import Action, EnvResponse, Observation, ResetResult, ToolSpec

from .test_cli import SPEC, run_args
from .test_cli import envh as envh_cli


@pytest.fixture
def cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "120"
    return env


def test_resume_refuses_an_openai_endpoint_changed_through_the_environment(tmp_path, cli_env):
    """Without ``base_url`` the OpenAI SDK takes ``$OPENAI_BASE_URL``: another server (another
    model behind the same name) is another configuration."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    base = ["--split", "easy", "--tasks", "1", "--policy", "openai:replay-model", "--executor", "inline",
            "--policy-option", "retries=0", "--policy-option", "timeout=2", "--max-endpoint-failures", "1"]
    env = {**cli_env, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens
    first = envh_cli(*run_args(spec, out, *base), env=env, check=False)
    assert "differs" not in first.stderr and (out / "trajectories.sqlite").exists(), first.stderr
    same = envh_cli(*run_args(spec, out, *base, "--resume", "--retry", "failed"), env=env, check=False)
    assert "differs" not in same.stderr, same.stderr
    moved = envh_cli(*run_args(spec, out, *base, "--resume", "--retry", "failed"),
                 env={**env, "OPENAI_BASE_URL": "http://127.0.0.1:10/v1"}, check=False)
    assert moved.returncode == 2 and "OPENAI_BASE_URL" in moved.stderr, moved.stderr


class _Undecodable(hostile.HostileBridge):
    """Text a bridge decoded with ``surrogateescape`` (file names, process output): lone
    surrogates in the observation, or in the message of what it raises."""

    name = "undecodable"

    def _reset(self, task, seed, options):
        if self.mode == "raise":
            raise RuntimeError("cannot open caf\udce9.txt")
        return ResetResult(observation=Observation(text="files: caf\udce9.txt", data={"names": ["caf\udce9.txt"]}))

    def tools(self):
        return [ToolSpec(name="stop", description="stop at caf\udce9.txt",
                         parameters={"type": "object", "properties": {"f": {"description": "caf\udce9"}}})]


class _Plugin:
    @envh.hookimpl
    def envh_bridges(self):
        return [envh.BridgeInfo(name="undecodable", factory=_Undecodable)]


def test_lone_surrogates_from_a_bridge_reach_neither_the_request_nor_the_store(tmp_path):
    reg = envh.make_plugin_manager(entry_points=False, plugins=[hostile, _Plugin()])
    envh.plugins.set_registry(reg)
    try:
        def request(key, config):
            spec = {"bridge": "undecodable", "config": config, "layers": []}
            return EpisodeRequest(key=key, spec=envh.spec_to_data(envh.parse_spec(spec, reg), reg),
                                  spec_id=envh.spec_id(spec, reg), policy="openai:replay-model", max_steps=3,
                                  policy_options={"base_url": server.base_url, "backoff_s": 0.01})
        with LLMReplayServer() as server:
            server.add(tool_reply("stop"))
            played = run_episode(request("obs", {}))
            raised = run_episode(request("raise", {"mode": "raise"}))
            sent = server.chat_requests
    finally:
        envh.plugins.set_registry(None)
    # the model was asked (before: a UnicodeEncodeError in the client, a policy_error) and
    # saw the replaced text, which is what the trajectory records
    assert played.error_class is None and played.success, played.error
    assert played.initial_observation.text == "files: caf\ufffd.txt"
    assert played.initial_observation.data["names"] == ["caf\ufffd.txt"]
    assert "caf\ufffd.txt" in sent[0]["messages"][1]["content"]
    assert played.tools[0]["description"] == "stop at caf\ufffd.txt"
    assert sent[0]["tools"][0]["function"]["parameters"]["properties"]["f"]["description"] == "caf\ufffd"
    assert raised.error_class == "env_error"
    with TrajectoryStore(tmp_path) as store:  # before: UnicodeEncodeError out of append
        store.create_run("r", {"config": {}})
        store.append(played)
        store.append(raised)
        assert [t.error_class for t in store.query()] == [None, "env_error"]
    assert export.export([played], "messages", tmp_path / "m.jsonl") == 1


_TURNS = {"dict": {"messages": []},
          "ids": ModelTurn(prompt_token_ids=["a"], completion_token_ids=[1]),      # wrote, then refused on read
          "orphan": ModelTurn(messages=["0123456789abcdef"]),                     # an address no record holds
          "object": ModelTurn(messages=["m"], blobs={"m": "not a message"}),
          "nan": ModelTurn(logprobs=[float("nan")], completion_token_ids=[1])}


class _TurnPolicy:
    """Plays ``stop`` with a malformed turn record (``mode``)."""

    policy_id = "turn-writer"

    def __init__(self, arg=None, **_options):
        self.mode = arg

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        return PolicyStep(action=Action(tool="stop"), raw="ok", turn=_TURNS[self.mode])

    def close(self):
        pass


class _TurnPlugin:
    @envh.hookimpl
    def envh_policies(self):
        return [envh.PolicyInfo(name="turnwriter", factory=_TurnPolicy)]


def test_a_malformed_turn_record_is_a_policy_error_not_a_store_no_export_can_read(tmp_path):
    reg = envh.make_plugin_manager(entry_points=False, plugins=[hostile, _TurnPlugin()])
    envh.plugins.set_registry(reg)
    try:
        spec = {"bridge": "hostile", "config": {}, "layers": []}
        data, sid = envh.spec_to_data(envh.parse_spec(spec, reg), reg), envh.spec_id(spec, reg)
        out = [run_episode(EpisodeRequest(key=mode, spec=data, spec_id=sid, policy=f"turnwriter:{mode}",
                                          max_steps=2)) for mode in _TURNS]
    finally:
        envh.plugins.set_registry(None)
    assert [t.error_class for t in out] == ["policy_error"] * len(_TURNS), [t.error for t in out]
    assert all("turn" in t.error for t in out)
    with TrajectoryStore(tmp_path) as store:  # before: "ids" was stored, then no query could read the run
        store.create_run("r", {"config": {}})
        for t in out:
            store.append(t)
        assert len(list(store.query())) == len(_TURNS)
    assert export.export(out, "messages", tmp_path / "m.jsonl") == len(_TURNS)  # before: KeyError, AttributeError


LINGERER = '''
import threading, time
import envh
from envh import Action
from envh.rollout.policy import PolicyStep

class Lingerer:
    policy_id = "lingerer"
    def __init__(self, arg=None, **_):
        pass
    def start(self, *, task, tools, observation, seed=None):
        threading.Thread(target=time.sleep, args=(3600,), daemon=False, name="lingering").start()
    def act(self, observation, tools):
        return PolicyStep(action=Action(tool="stop"), raw="ok")
    def close(self):
        pass

@envh.hookimpl
def envh_policies():
    return [envh.PolicyInfo(name="lingerer", factory=Lingerer)]
'''


def test_an_inline_run_ends_though_a_policy_left_a_thread_running(tmp_path, cli_env):
    """Python waits at exit for every non-daemon thread: one a policy started and never
    ended kept ``envh run --executor inline`` from ever returning."""
    (tmp_path / "lingerer.py").write_text(LINGERER)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    env = {**cli_env, "PYTHONPATH": os.pathsep.join((str(tmp_path), cli_env["PYTHONPATH"]))}
    proc = envh_cli("run", str(spec), "--out", str(tmp_path / "run"), "--plugin", "lingerer", "--policy", "lingerer",
                    "--executor", "inline", "--split", "easy", "--tasks", "1", env=env, check=False)
    assert proc.returncode == 0 and "1 thread(s) running (lingering)" in proc.stderr, proc.stderr
    with TrajectoryStore(tmp_path / "run" / "trajectories.sqlite") as store:
        assert [t.error_class for t in store.query()] == [None]


class _Numpy(hostile.HostileBridge):
    """numpy numbers where bridges commonly return them, and NaN/inf in observation data."""

    name = "numpyish"

    def _reset(self, task, seed, options):
        import numpy as np

        self.n, self.stopped = 0, False
        return ResetResult(observation=Observation(text="poke me", data={"x": float("nan"), "y": [np.inf, 1.0]}))

    def _step(self, action):
        import numpy as np

        self.stopped = action.tool == "stop"
        return EnvResponse(observation=Observation(text="done", data={"z": -np.inf}), reward=np.float32(0.5),
                           terminated=self.stopped)

    def evaluate(self):
        import numpy as np

        return envh.EvaluationResult(success=self.stopped, score=np.float32(0.25), metrics={"m": float("nan")})


class _StopPolicy:
    policy_id = "stopper"

    def __init__(self, arg=None, **_options):
        pass

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        return PolicyStep(action=Action(tool="stop"), raw="stop")

    def close(self):
        pass


class _NumpyPlugin:
    @envh.hookimpl
    def envh_bridges(self):
        return [envh.BridgeInfo(name="numpyish", factory=_Numpy)]

    @envh.hookimpl
    def envh_policies(self):
        return [envh.PolicyInfo(name="stopper", factory=_StopPolicy)]


def test_numpy_rewards_are_numbers_and_non_finite_data_is_strict_json(tmp_path):
    """An ``np.float32`` reward or score is a finite number like any other (it was refused as
    an env error), stored as a plain number; NaN and infinities in observation data are
    stored as strings, so the store and every export are strict JSON."""
    import json

    reg = envh.make_plugin_manager(entry_points=False, plugins=[hostile, _NumpyPlugin()])
    envh.plugins.set_registry(reg)
    try:
        spec = {"bridge": "numpyish", "layers": []}
        played = run_episode(EpisodeRequest(key="np", spec=envh.spec_to_data(envh.parse_spec(spec, reg), reg),
                                            spec_id=envh.spec_id(spec, reg), policy="stopper", max_steps=3))
    finally:
        envh.plugins.set_registry(None)
    assert played.error_class is None, played.error
    assert played.steps[0].reward == 0.5 and type(played.steps[0].reward) is float
    assert played.verdict is not None and played.verdict.score == 0.25 and type(played.verdict.score) is float
    assert played.initial_observation.data == {"x": "NaN", "y": ["Infinity", 1.0]}
    assert played.steps[0].observation.data == {"z": "-Infinity"}
    with TrajectoryStore(tmp_path) as store:
        store.create_run("r", {"config": {}})
        store.append(played)
        (back,) = store.query()
    assert back.verdict.score == 0.25
    import pyarrow.parquet as pq

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))

    assert export.export([played], "parquet", tmp_path / "t.parquet") == 1
    (row,) = pq.read_table(tmp_path / "t.parquet").to_pylist()
    stored = strict(row["trajectory"])
    assert stored["initial_observation"]["data"] == {"x": "NaN", "y": ["Infinity", 1.0]}
    assert stored["verdict"]["metrics"] == {"m": "NaN"}
    assert export.export([played], "messages", tmp_path / "m.jsonl") == 1
    for line in (tmp_path / "m.jsonl").read_text().splitlines():
        strict(line)


def test_a_fit_with_no_exchange_drops_none():
    from envh.rollout.policies import context

    messages, record = context.fit({"role": "system", "content": "s" * 900}, [], [{"role": "user", "content": "u"}],
                                   max_turns=None, keep_first=True, budget=10, count=lambda m: 400,
                                   counted_with="test")
    assert record["dropped"] == 0 and record["exchanges"] == 0 and not record["fits"]
