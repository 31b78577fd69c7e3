"""Rollouts through envh's executors: env stepping in executor workers, generation batched
in the trainer.

Each episode is an ordinary envh episode request run by any executor (``pool`` locally,
``ray`` across nodes) with the ``grpo-remote`` policy. That policy is a thin client: it
sends the observation text to the trainer's ``GenerationServer`` (127.0.0.1, a random port
and token) and parses the reply it gets back into an action. The server keeps every
episode's conversation as token ids (``sequences.Conversation``), collects the next turn
of all live episodes and generates them in one batch on the trainer's engine, with the
same per-episode seeds as ``rollout.play``: the episodes equal the in-process ones.

The trajectory the executor returns is the record of the env side (verdict from the base
bridges, invalid and refused actions, layer effects); the server's turns are the record
of the model side (the ids and log-probs the engine produced). ``play_remote`` joins them
into ``rollout.Episode``s.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import attrs
import envh
from envh import errors

from .generation import Engine, SamplingConfig
from .rewards import EpisodeFacts
from .rollout import Episode, observation_text, parse_reply, sample_seed, system_prompt
from .sequences import ChatSegments, Conversation, Turn

MAX_LINE = 4 * 1024 * 1024  # bytes of one request (an observation of a few MiB at most)


@attrs.frozen(kw_only=True)
class RemoteJob:
    """One episode for a worker: the spec (data), its task, the reset seed, its group."""

    spec: Any
    task: Any
    seed: int
    group: int
    name: str = ""


class _Slot:
    def __init__(self, key: int, attempt: int, prompt: list[int]) -> None:
        self.key, self.attempt, self.prompt = key, attempt, prompt
        self.reply: dict[str, Any] | None = None
        self.done = threading.Event()


class GenerationServer:
    """The trainer's engine behind a loopback socket, one batch per round of live turns.

    :param expected: how many episodes may ask at once (the executor's workers); a batch
        goes to the engine when that many turns wait, or ``linger_s`` after the first one.
    """

    def __init__(self, engine: Engine, segments: ChatSegments, sampling: SamplingConfig, *, episodes: int,
                 expected: int, max_context: int, history: int | None = None, seed: int = 0,
                 linger_s: float = 0.05, host: str = "127.0.0.1") -> None:
        self.engine, self.segments, self.sampling = engine, segments, sampling
        self.max_context, self.history, self.seed, self.linger_s = max_context, history, seed, linger_s
        self.episodes, self.expected = episodes, max(1, expected)
        self.token = secrets.token_hex(16)
        self.convs: dict[int, Conversation] = {}
        self.turns: dict[int, list[Turn]] = {k: [] for k in range(episodes)}
        self.texts: dict[int, list[str]] = {k: [] for k in range(episodes)}
        self.stopped: dict[int, str] = {}
        self.attempts: dict[int, int] = {k: 0 for k in range(episodes)}  # starts seen (a retry starts again)
        self.unfinished = episodes
        self.failure: BaseException | None = None
        self.batches: list[int] = []  # the size of every batch sent to the engine
        self._pending: list[_Slot] = []
        self._cond = threading.Condition()
        self._closed = False
        self._sock = socket.create_server((host, 0))
        self.address = f"{host}:{self._sock.getsockname()[1]}"
        self._threads = [threading.Thread(target=self._accept, name="envh-grpo-accept", daemon=True),
                         threading.Thread(target=self._generate, name="envh-grpo-generate", daemon=True)]
        for t in self._threads:
            t.start()

    # -- the driver's side -----------------------------------------------------------
    def finished(self, key: int) -> None:
        """An episode ended (its final trajectory came back): fewer turns to wait for."""
        with self._cond:
            self.unfinished = max(0, self.unfinished - 1)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for slot in self._pending:
                slot.reply = {"error": "the trainer stopped the rollout"}
                slot.done.set()
            self._pending.clear()
            self._cond.notify_all()
        try:
            self._sock.close()
        except OSError:
            pass
        for t in self._threads:
            t.join(timeout=10)

    # -- serving ---------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="envh-grpo-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(600)
                data = _read_line(conn)
                reply = self._answer(data)
            except Exception as exc:  # noqa: BLE001 - a bad request gets an error reply, never a crash
                reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass

    def _answer(self, data: bytes) -> dict[str, Any]:
        request = json.loads(data)
        if not isinstance(request, dict) or not secrets.compare_digest(str(request.get("token", "")), self.token):
            return {"error": "unauthorised"}
        key = request.get("key")
        if isinstance(key, bool) or not isinstance(key, int) or key not in self.turns:
            return {"error": f"unknown episode {key!r}"}
        op = request.get("op")
        if op == "start":
            head = self.segments.head(str(request.get("system", "")), str(request.get("observation", "")))
            with self._cond:  # a retried attempt starts its episode again
                self.attempts[key] += 1
                self.convs[key] = Conversation(self.segments, head, self.history)
                self.turns[key], self.texts[key] = [], []
                self.stopped.pop(key, None)
            return {"ok": True}
        if op != "turn" or key not in self.convs:
            return {"error": f"bad request {op!r} for episode {key}"}
        conv = self.convs[key]
        message = request.get("message")
        if message is not None:
            if not self.turns[key]:
                return {"error": "a message before the first turn"}
            conv.add(self.turns[key][-1].completion_ids, self.segments.user(str(message)))
        prompt = list(conv.prompt())
        if len(prompt) + self.sampling.max_new_tokens > self.max_context:
            self.stopped[key] = "context"
            return {"stop": "context"}
        with self._cond:
            slot = _Slot(key, self.attempts[key], prompt)
            if self._closed:
                return {"error": "the trainer stopped the rollout"}
            self._pending.append(slot)
            self._cond.notify_all()
        slot.done.wait()
        return slot.reply or {"error": "no reply"}

    def _generate(self) -> None:
        while True:
            with self._cond:
                first = None
                while not self._closed:
                    if self._pending:
                        first = first or time.monotonic()
                        full = len(self._pending) >= min(self.expected, max(self.unfinished, 1))
                        if full or time.monotonic() - first >= self.linger_s:
                            break
                        self._cond.wait(timeout=max(0.0, self.linger_s - (time.monotonic() - first)))
                    else:
                        first = None
                        self._cond.wait(timeout=1.0)
                if self._closed:
                    return
                batch, self._pending = self._pending, []
            self.batches.append(len(batch))
            try:
                seeds = [sample_seed(self.seed, s.key, len(self.turns[s.key])) for s in batch]
                gens = self.engine.generate([s.prompt for s in batch], self.sampling, seeds)
            except BaseException as exc:  # noqa: BLE001 - reported to every waiting episode and the driver
                self.failure = exc
                for s in batch:
                    s.reply = {"error": f"generation failed: {type(exc).__name__}: {exc}"[:500]}
                    s.done.set()
                continue
            for s, gen in zip(batch, gens, strict=True):
                if s.attempt != self.attempts[s.key]:  # its worker died and the episode started again
                    s.reply = {"error": "a newer attempt of this episode started"}
                    s.done.set()
                    continue
                text = self.segments.tok.decode(list(gen.ids), skip_special_tokens=True)
                self.turns[s.key].append(Turn(prompt_ids=tuple(s.prompt), completion_ids=gen.ids,
                                              logprobs=gen.logprobs, finish=gen.finish))
                self.texts[s.key].append(text)
                s.reply = {"text": text, "tokens": len(gen.ids)}
                s.done.set()


def _read_line(conn: socket.socket) -> bytes:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_LINE:
            raise ValueError(f"request over {MAX_LINE} bytes")
    return bytes(buf)


def _call(address: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        conn.sendall(json.dumps(request).encode() + b"\n")
        data = _read_line(conn)
    reply = json.loads(data) if data else {"error": "the trainer closed the connection"}
    if not isinstance(reply, dict):
        raise errors.PolicyError("the trainer's generation server sent a malformed reply")
    return reply


class ContextFull(errors.PolicyError):
    """The episode's next prompt does not fit the model's context: it ends here."""


class RemotePolicy:
    """The ``grpo-remote`` policy: the trainer generates, this worker parses and acts.

    :param address: the trainer's ``GenerationServer`` (``127.0.0.1:PORT``).
    :param token: its per-rollout token.
    :param episode: this episode's index in the rollout (its sampling stream).
    """

    def __init__(self, arg: str | None = None, *, address: str, token: str, episode: int,
                 timeout_s: float = 900.0) -> None:
        del arg
        self.address, self.token, self.episode, self.timeout_s = address, token, int(episode), timeout_s
        self.policy_id = f"grpo-remote:{episode}"
        self._last_obs: Any = None
        self._problem: str | None = None
        self._turns = 0

    def start(self, *, task: Any, tools: list[Any], observation: Any, seed: int | None = None) -> None:
        del task, seed  # the task is the env's; sampling seeds come from the trainer
        self._last_obs, self._problem, self._turns = observation, None, 0
        self._send({"op": "start", "system": system_prompt(tools), "observation": observation_text(observation)})

    def act(self, observation: Any, tools: list[Any]) -> Any:
        from envh.rollout import PolicyStep

        if self._turns == 0:
            message = None
        elif self._problem is not None:  # as rollout.play: the reason, then the last real observation
            message = f"Your last reply was not a valid action: {self._problem}\n\n" + observation_text(self._last_obs)
        else:
            self._last_obs = observation
            message = observation_text(observation)
        t0 = time.monotonic()
        reply = self._send({"op": "turn", "message": message})
        if reply.get("stop") == "context":
            raise ContextFull("the next prompt does not fit the model's context")
        self._turns += 1
        text = str(reply.get("text", ""))
        action, self._problem = parse_reply(text, tools)
        return PolicyStep(action=action, raw=text, invalid=self._problem,
                          usage={"completion_tokens": int(reply.get("tokens", 0))},
                          latency_s=time.monotonic() - t0)

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = _call(self.address, {"token": self.token, "key": self.episode, **request}, self.timeout_s)
        if "error" in reply:
            raise errors.PolicyError(f"the trainer's generation server: {reply['error']}")
        return reply

    def close(self) -> None:
        pass


def _has_workspace(spec: Any) -> bool:
    data = envh.spec_to_data(envh.parse_spec(spec))
    return any(isinstance(layer, dict) and layer.get("kind") == "workspace" for layer in data.get("layers") or ())


def play_remote(jobs: Sequence[RemoteJob], executor: Any, engine: Engine, segments: ChatSegments,
                sampling: SamplingConfig, *, max_turns: int, max_context: int, history: int | None = None,
                seed: int = 0, run_id: str = "grpo", linger_s: float = 0.05, host: str = "127.0.0.1") -> list[Episode]:
    """``rollout.play`` with the env side in ``executor``'s workers; episodes in job order."""
    from envh.rollout import EpisodeRequest

    from .rollout import meta_action

    workspace = {id(job.spec): _has_workspace(job.spec) for job in jobs}
    server = GenerationServer(engine, segments, sampling, episodes=len(jobs), expected=executor.workers,
                              max_context=max_context, history=history, seed=seed, linger_s=linger_s, host=host)
    try:
        requests = []
        for j, job in enumerate(jobs):
            parsed = envh.parse_spec(job.spec)
            requests.append(EpisodeRequest(
                key=f"{run_id}#{j}", spec=envh.spec_to_data(parsed), spec_id=envh.spec_id(parsed), task=job.task,
                seed=job.seed, policy="grpo-remote", max_steps=max_turns, run_id=run_id,
                policy_options={"address": server.address, "token": server.token, "episode": j}))
        finals: dict[int, Any] = {}
        for trajectory in executor.run(requests):
            if not trajectory.final:
                continue
            j = int(trajectory.key.rsplit("#", 1)[1])
            finals[j] = trajectory
            server.finished(j)
        if server.failure is not None:
            raise errors.EnvhError(f"Generation failed during the rollout: {server.failure!r}") from server.failure
    finally:
        server.close()
    episodes = []
    for j, job in enumerate(jobs):
        t = finals.get(j)
        if t is None:
            raise errors.EnvhError(f"The executor returned no trajectory for episode {j}")
        turns, steps = server.turns[j], list(t.steps)
        invalid = [s.invalid is not None or bool(s.error) for s in steps][:len(turns)]
        invalid += [False] * (len(turns) - len(invalid))
        actions = tuple(f"{s.proposed.tool}({sorted(s.proposed.args.items())})" for s in steps if s.proposed)
        meta_turns = [meta_action({"envh": s.effects, "error": s.error}) for s in steps][:len(turns)]
        meta_turns += [""] * (len(turns) - len(meta_turns))
        meta = None
        if workspace[id(job.spec)]:  # the counts the workspace layer kept, as its recorded effects show them
            meta = {m: meta_turns.count(m) for m in ("track", "commit", "recall", "note")}
        success = bool(t.verdict.success) if t.verdict is not None else False
        score = float(t.verdict.score) if t.verdict is not None else 0.0
        if j in server.stopped:
            stop = server.stopped[j]
        elif t.error_class:
            stop = f"{t.error_class}: {t.error}"
        else:
            stop = "max_turns" if t.stop == "max_steps" else t.stop
        facts = EpisodeFacts(solved=success, turns=len(turns), actions=actions,
                             replies=tuple(x.completion_ids for x in turns), invalid=sum(invalid),
                             meta=meta, meta_turns=tuple(meta_turns))
        episodes.append(Episode(group=job.group, spec=job.name, task=str(job.task), turns=tuple(turns), facts=facts,
                                success=success, score=score, stop=stop, invalid_turns=tuple(invalid),
                                texts=tuple(server.texts[j])))
    return episodes
