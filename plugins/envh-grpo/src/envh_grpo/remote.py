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

One executor per job. Under ``torchrun --nproc N`` only rank 0 hosts the executor and
every rank's episodes run on its workers (``Exchange``); generation stays with each
rank's own engine, because a request carries the address and token of its rank's
server. Why not an executor per rank: N executors are N times the env processes (and,
for Ray, N drivers, each starting its own local cluster), ``rollout.workers`` would
change meaning with the process count, and a rank whose episodes run long could not use
another rank's idle workers.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
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
REQUEST_S = 30.0  # seconds a connection may take to send its request line


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
        self._secret = secrets.token_bytes(32)  # this rollout's: a token of an earlier one is worthless
        self.convs: dict[int, Conversation] = {}
        self.turns: dict[int, list[Turn]] = {k: [] for k in range(episodes)}
        self.texts: dict[int, list[str]] = {k: [] for k in range(episodes)}
        self.stopped: dict[int, str] = {}
        self.ended: set[int] = set()  # episodes whose final trajectory came back
        self.attempts: dict[int, int] = {k: 0 for k in range(episodes)}  # starts seen (a retry starts again)
        self.unfinished = episodes
        self.failure: BaseException | None = None
        self.batches: list[int] = []  # the size of every batch sent to the engine
        self._pending: list[_Slot] = []
        self._cond = threading.Condition()
        self._closed = False
        self._sock = socket.create_server((host, 0))
        self.address = f"{advertised(host)}:{self._sock.getsockname()[1]}"
        self._threads = [threading.Thread(target=self._accept, name="envh-grpo-accept", daemon=True),
                         threading.Thread(target=self._generate, name="envh-grpo-generate", daemon=True)]
        for t in self._threads:
            t.start()

    # -- the driver's side -----------------------------------------------------------
    def token_for(self, key: Any) -> str:
        """Episode ``key``'s token: a worker holds only the tokens of the episodes it plays,
        so code running beside the policy in a worker cannot write another episode's turns."""
        return hmac.new(self._secret, repr(key).encode(), hashlib.sha256).hexdigest()

    def finished(self, key: int) -> None:
        """An episode ended (its final trajectory came back): fewer turns to wait for. Once
        per episode: a repeated notice (a replayed ``end``) changes nothing."""
        with self._cond:
            if key in self.ended:
                return
            self.ended.add(key)
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
        try:  # shutdown wakes the thread blocked in accept(); close alone does not (it waited 10 s)
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
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
                conn.settimeout(REQUEST_S)  # a worker sends its line at once; an idle stranger is dropped
                data = _read_line(conn)
                conn.settimeout(600)
                reply = self._answer(data)
            except Exception as exc:  # noqa: BLE001 - a bad request gets an error reply, never a crash
                reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
            try:
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                pass

    def _answer(self, data: bytes) -> dict[str, Any]:
        request = json.loads(data)
        if not isinstance(request, dict):
            return {"error": "unauthorised"}
        key = request.get("key")
        if not secrets.compare_digest(str(request.get("token", "")), self.token_for(key)):
            return {"error": "unauthorised"}
        if isinstance(key, bool) or not isinstance(key, int) or key not in self.turns:
            return {"error": f"unknown episode {key!r}"}
        op = request.get("op")
        if op == "end":  # the executor's host (rank 0) saw this episode's final trajectory
            self.finished(key)
            return {"ok": True}
        if key in self.ended:  # its record is final: nothing may restart or extend it
            return {"error": f"episode {key} has ended"}
        if op == "start":
            head = self.segments.head(str(request.get("system", "")), str(request.get("observation", "")))
            with self._cond:  # a retried attempt starts its episode again
                self.attempts[key] += 1
                self.convs[key] = Conversation(self.segments, head, self.history)
                self.turns[key], self.texts[key] = [], []
                self.stopped.pop(key, None)
                attempt = self.attempts[key]
            return {"ok": True, "attempt": attempt}
        if op != "turn" or key not in self.convs:
            return {"error": f"bad request {op!r} for episode {key}"}
        if request.get("attempt") != self.attempts[key]:  # a worker the executor gave up on, still playing
            return {"error": "a newer attempt of this episode started"}
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


def advertised(host: str) -> str:
    """The address workers are given for a server bound to ``host``: a wildcard bind
    (``0.0.0.0``, for actors on other nodes) is announced as the address this node routes
    from (toward ``MASTER_ADDR`` when the launcher set one), not the hostname's entry in
    /etc/hosts, which is often loopback. Loopback only when the node has no other route."""
    if host not in ("", "0.0.0.0"):
        return host
    target = os.environ.get("MASTER_ADDR", "")
    if not target or target in ("localhost",) or target.startswith("127."):
        target = "192.0.2.1"  # TEST-NET-1: only the routing decision matters, nothing is sent
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((target, 9))  # UDP connect: picks the source address, sends no packet
            return str(probe.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())


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


class Unreachable(errors.PolicyError):
    """The worker cannot reach the trainer's generation server: the episode was not played."""


def lost(trajectory: Any) -> bool:
    """The executor lost the episode (its workers died past their retries) or its worker
    could not reach the trainer: nothing the policy did decided how it ended."""
    return trajectory.error_class == "infra_error" or (
        trajectory.error_class == "policy_error" and "Unreachable" in (trajectory.error or ""))


class RemotePolicy:
    """The ``grpo-remote`` policy: the trainer generates, this worker parses and acts.

    :param address: the trainer's ``GenerationServer`` (``127.0.0.1:PORT``).
    :param token: this episode's token for this rollout.
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
        self._attempt: int | None = None

    def start(self, *, task: Any, tools: list[Any], observation: Any, seed: int | None = None) -> None:
        del task, seed  # the task is the env's; sampling seeds come from the trainer
        self._last_obs, self._problem, self._turns = observation, None, 0
        reply = self._send({"op": "start", "system": system_prompt(tools), "observation": observation_text(observation)})
        self._attempt = reply.get("attempt")

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
        reply = self._send({"op": "turn", "message": message, "attempt": self._attempt})
        if reply.get("stop") == "context":
            raise ContextFull("the next prompt does not fit the model's context")
        self._turns += 1
        text = str(reply.get("text", ""))
        action, self._problem = parse_reply(text, tools)
        return PolicyStep(action=action, raw=text, invalid=self._problem,
                          usage={"completion_tokens": int(reply.get("tokens", 0))},
                          latency_s=time.monotonic() - t0)

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = _call(self.address, {"token": self.token, "key": self.episode, **request}, self.timeout_s)
        except OSError as exc:
            raise Unreachable(f"the trainer's generation server at {self.address} is unreachable from this "
                              f"worker: {type(exc).__name__}: {exc}") from exc
        if "error" in reply:
            raise errors.PolicyError(f"the trainer's generation server: {reply['error']}")
        return reply

    def close(self) -> None:
        pass


def _has_workspace(spec: Any) -> bool:
    data = envh.spec_to_data(envh.parse_spec(spec))
    return any(isinstance(layer, dict) and layer.get("kind") == "workspace" for layer in data.get("layers") or ())


class Exchange:
    """The processes of one job around one executor, over a gloo group of their own (object
    collectives on NCCL would need a device and its short timeout): rank 0 runs every
    rank's episodes and sends each rank its trajectories."""

    def __init__(self, rank: int, world: int, group: Any = None) -> None:
        self.rank, self.world, self.group = rank, world, group

    def all_gather(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def broadcast(self, obj: Any) -> Any:
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


def _drive(executor: Any, requests: list[tuple[int, int, Any]], local: GenerationServer,
           rank: int) -> dict[int, dict[int, Any]]:
    """Run ``(rank, episode, request)`` on ``executor``; final trajectories by rank and episode.
    Each final one is announced to its rank's server (fewer live turns to batch for)."""
    owner = {req.key: (r, j, req) for r, j, req in requests}
    finals: dict[int, dict[int, Any]] = {r: {} for r, _, _ in requests} | {rank: {}}
    for trajectory in executor.run([req for _, _, req in requests]):
        if not trajectory.final or trajectory.key not in owner:
            continue
        r, j, req = owner[trajectory.key]
        finals[r][j] = trajectory
        if r == rank:
            local.finished(j)
            continue
        try:
            _call(req.policy_options["address"], {"token": req.policy_options["token"], "key": j, "op": "end"}, 30)
        except (OSError, ValueError, errors.EnvhError):
            pass  # that rank is gone: the job ends through its launcher, its batches wait linger_s at most
    return finals


def play_remote(jobs: Sequence[RemoteJob], executor: Any, engine: Engine, segments: ChatSegments,
                sampling: SamplingConfig, *, max_turns: int, max_context: int, history: int | None = None,
                seed: int = 0, run_id: str = "grpo", linger_s: float = 0.05, host: str = "127.0.0.1",
                exchange: Exchange | None = None) -> list[Episode]:
    """``rollout.play`` with the env side in ``executor``'s workers; episodes in job order.

    With ``exchange``, every process of the job calls this together and only rank 0 passes
    an executor (the others pass ``None``): rank 0 plays all ranks' episodes on it while
    each rank generates its own episodes' turns."""
    from envh.rollout import EpisodeRequest

    rank = exchange.rank if exchange is not None else 0
    if executor is None and rank == 0:
        raise errors.EnvhError("play_remote needs an executor on rank 0")
    workspace = {id(job.spec): _has_workspace(job.spec) for job in jobs}
    server = GenerationServer(engine, segments, sampling, episodes=len(jobs),
                              expected=executor.workers if executor is not None else 1,
                              max_context=max_context, history=history, seed=seed, linger_s=linger_s, host=host)
    try:
        requests = []
        for j, job in enumerate(jobs):
            parsed = envh.parse_spec(job.spec)
            requests.append((rank, j, EpisodeRequest(
                key=f"{run_id}#{rank}.{j}", spec=envh.spec_to_data(parsed), spec_id=envh.spec_id(parsed),
                task=job.task, seed=job.seed, policy="grpo-remote", max_steps=max_turns, run_id=run_id,
                policy_options={"address": server.address, "token": server.token_for(j), "episode": j})))
        if exchange is None:
            finals = _drive(executor, requests, server, rank)[rank]
        else:
            table = exchange.all_gather({"requests": requests,
                                         "workers": executor.workers if executor is not None else None})
            with server._cond:  # the job's workers play this rank's episodes too
                server.expected = max(1, int(table[0]["workers"] or 1))
            outcome: dict[str, Any] | None = None
            if rank == 0:
                try:
                    everything = [item for entry in table for item in entry["requests"]]
                    outcome = {"finals": _drive(executor, everything, server, rank)}
                except Exception as exc:  # noqa: BLE001 - every rank stops with the same cause
                    outcome = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            outcome = exchange.broadcast(outcome)
            if "error" in outcome:
                raise errors.EnvhError(f"The rollout failed on the executor's host (rank 0): {outcome['error']}")
            finals = outcome["finals"][rank]
        if server.failure is not None:
            raise errors.EnvhError(f"Generation failed during the rollout: {server.failure!r}") from server.failure
        gone = [t for t in finals.values() if lost(t)]
        if jobs and len(gone) == len(jobs):  # nothing was played: not a batch of failed episodes to train on
            raise errors.InfraError(f"The executor lost every episode of the rollout ({len(gone)}), e.g. "
                                    f"{gone[0].key}: {(gone[0].error or '')[:500]}")
    finally:
        server.close()
    return [_episode(job, finals.get(j), j, server, workspace[id(job.spec)]) for j, job in enumerate(jobs)]


def _episode(job: RemoteJob, t: Any, j: int, server: GenerationServer, workspace: bool) -> Episode:
    """Join an episode's trajectory (env side) with the server's turns (model side)."""
    from .rollout import meta_action

    if t is None:
        raise errors.EnvhError(f"The executor returned no trajectory for episode {j}")
    turns, steps = server.turns[j], list(t.steps)
    invalid = [s.invalid is not None or bool(s.error) for s in steps][:len(turns)]
    invalid += [False] * (len(turns) - len(invalid))
    actions = tuple(f"{s.proposed.tool}({sorted(s.proposed.args.items())})" for s in steps if s.proposed)
    meta_turns = [meta_action({"envh": s.effects, "error": s.error}) for s in steps][:len(turns)]
    meta_turns += [""] * (len(turns) - len(meta_turns))
    meta = None
    if workspace:  # the counts the workspace layer kept, as its recorded effects show them
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
    return Episode(group=job.group, spec=job.name, task=str(job.task), turns=tuple(turns), facts=facts,
                   success=success, score=score, stop=stop, invalid_turns=tuple(invalid),
                   texts=tuple(server.texts[j]), lost=lost(t))
