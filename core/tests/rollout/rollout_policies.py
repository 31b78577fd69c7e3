"""Small policies for the rollout tests, registered as a plugin module.

``solver`` plays Toy24 perfectly from the observation's data; ``fuzz`` sends random,
often malformed tool calls and unparseable outputs; ``sleepy`` blocks in ``act`` (for
time limits, concurrency and killing a worker mid-episode).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from fractions import Fraction
from pathlib import Path

import envh
from envh import Action
from envh.bridges import toy24, toy24_solver
from envh.rollout.policy import PolicyStep


class Solver:
    policy_id = "test-solver"

    def __init__(self, arg=None, **options):
        self.options = options

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        data = observation.data
        if "numbers" not in data:
            return PolicyStep(action=Action(tool="stop"), raw="stop")
        nums = [Fraction(x) for x in data["numbers"]]
        plan = toy24_solver.solve(nums, data.get("target", 24)) if len(nums) > 1 else []
        if not plan:
            return PolicyStep(action=Action(tool="stop"), raw="stop()", usage={"completion_tokens": 1})
        i, j, op = plan[0]
        return PolicyStep(action=Action(tool="combine", args={"i": i, "j": j, "op": op}),
                          raw=f"combine({i}, {j}, {op})", usage={"completion_tokens": 3})

    def close(self):
        pass


class Fuzz:
    """Random actions: valid, wrong, huge and unparseable ones, seeded by ``arg``."""

    def __init__(self, arg=None, **options):
        self.policy_id = f"test-fuzz:{arg}"
        self.seed = int(arg or 0)
        self.rng = random.Random(self.seed)

    def start(self, *, task, tools, observation, seed=None):
        self.rng = random.Random(f"{self.seed}:{task}")  # the same episode wherever it runs

    def act(self, observation, tools):
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            return PolicyStep(action=None, raw="<garbage>", invalid="no tool call found")
        if roll < 0.2:
            return PolicyStep(action=Action(tool=rng.choice(["nope", "", "x" * 500])), raw="?")
        if roll < 0.3:
            return PolicyStep(action=Action(tool="combine", args={"i": "a", "j": [1], "op": 7}), raw="?")
        if roll < 0.35:
            return PolicyStep(action=Action(tool="stop"), raw="stop")
        tool = rng.choice(tools)
        if tool.name == "combine":
            args = {"i": rng.randint(-1, 4), "j": rng.randint(-1, 4),
                    "op": rng.choice(["add", "sub", "mul", "div", "pow"])}
        else:
            args = {}
        return PolicyStep(action=Action(tool=tool.name, args=args), raw=repr(args))

    def close(self):
        pass


class Sleepy:
    """Sleeps ``seconds`` in every act, then stops. With ``pid_file`` it writes its pid
    first and sleeps only while that file does not exist yet (a retried episode runs
    fast); ``hang`` blocks the episode timer's signal; ``burn`` spins the CPU instead."""

    policy_id = "test-sleepy"

    def __init__(self, arg=None, seconds=0.5, pid_file=None, hang=False, burn=False, **options):
        self.seconds, self.pid_file = float(arg or seconds), pid_file
        self.hang, self.burn = hang, burn

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        if self.hang:  # ignore the episode timer, like code stuck in C
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        if self.burn:
            end = time.monotonic() + self.seconds
            while time.monotonic() < end:
                sum(range(1000))
        elif self.pid_file is None:
            time.sleep(self.seconds)
        elif not Path(self.pid_file).exists():
            Path(self.pid_file).write_text(str(os.getpid()))
            time.sleep(self.seconds)
        return PolicyStep(action=Action(tool="stop"), raw="stop")

    def close(self):
        pass


class Env:
    """Reports what the worker's environment holds (secrets scrubbing, rlimits)."""

    policy_id = "test-env"

    def __init__(self, arg=None, **options):
        self.names = (arg or "").split(",")

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        import resource

        seen = {n: os.environ.get(n) for n in self.names}
        try:  # a fenced worker is not dumpable: its /proc entries are root's, closed to itself too
            proc = Path("/proc/self/environ").read_bytes().decode(errors="replace")
        except OSError:
            proc = None
        return PolicyStep(action=Action(tool="stop"), raw={
            "env": seen, "proc_environ_has": None if proc is None else [n for n in self.names if n and n + "=" in proc],
            "rlimit_data": resource.getrlimit(resource.RLIMIT_DATA)[0], "pid": os.getpid()})

    def close(self):
        pass


class Flaky(Solver):
    """The solver behind an endpoint that is down while the file ``arg`` exists."""

    def __init__(self, arg=None, **options):
        super().__init__(arg, **options)
        self.outage = Path(arg or "/nonexistent")
        self.policy_id = "test-flaky"

    def act(self, observation, tools):
        if self.outage.exists():
            raise envh.errors.EndpointError("connection refused by http://127.0.0.1:9/v1 after 3 retries",
                                            kind="transport", endpoint="http://127.0.0.1:9/v1")
        return super().act(observation, tools)


def _fd_target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "gone"


def _docker_ping() -> str:
    """What the Docker daemon answers a worker on its socket (root on the host)."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect("/var/run/docker.sock")
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return sock.recv(4096).decode(errors="replace").splitlines()[0]
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror}"


class Snoop:
    """Tries to read what a worker must not: the parent's environment through /proc, a
    secret file, a variable. ``api_key_env`` is read like an LLM policy would."""

    policy_id = "test-snoop"

    def __init__(self, arg=None, parent_pid=0, secret_file="", api_key_env="SNOOP_API_KEY", **options):
        self.parent_pid, self.secret_file, self.key_name = int(parent_pid), secret_file, api_key_env

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        def attempt(path):
            try:
                return Path(path).read_bytes().decode(errors="replace")[:20000]
            except OSError as exc:
                return f"{type(exc).__name__}: {exc.strerror}"

        home = os.path.expanduser("~root")
        try:
            root_home = sorted(os.listdir(home))
        except OSError as exc:
            root_home = f"{type(exc).__name__}: {exc.strerror}"
        return PolicyStep(action=Action(tool="stop"), raw={
            "parent_environ": attempt(f"/proc/{self.parent_pid}/environ"),
            "pid1_environ": attempt("/proc/1/environ"),
            "secret_file": attempt(self.secret_file) if self.secret_file else None,
            "api_key": os.environ.get(self.key_name), "uid": os.getuid(), "root_home": root_home,
            "others": sorted(n for n in os.environ if n.endswith("_API_KEY")), "environ": dict(os.environ),
            "fds": sorted(_fd_target(fd) for fd in os.listdir("/proc/self/fd")),
            "docker": _docker_ping()})

    def close(self):
        pass


class GcSnoop(Snoop):
    """Reads the parent's environ from a thread of its own process that kept the
    capabilities its task thread gave up (Ray's PythonGCThread runs a replaceable
    function on request)."""

    def act(self, observation, tools):
        import threading

        got, done = {}, threading.Event()

        def read():
            try:
                got["parent_environ"] = Path(f"/proc/{self.parent_pid}/environ").read_bytes().decode(errors="replace")
            except OSError as exc:
                got["parent_environ"] = f"{type(exc).__name__}: {exc.strerror}"
            done.set()
            return 0

        thread = next((t for t in threading.enumerate() if t.name == "PythonGCThread"), None)
        if thread is None:
            got["parent_environ"] = "no such thread"
        else:
            thread._gc_collect_func = read
            thread.trigger_gc()
            done.wait(10)
        return PolicyStep(action=Action(tool="stop"), raw=got)


class Forker:
    """Leaves a child process behind (sleeping forever) and writes its pid to ``pid_file``."""

    policy_id = "test-forker"

    def __init__(self, arg=None, pid_file="", **options):
        self.pid_file = pid_file

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        Path(self.pid_file).write_text(str(child.pid))
        return PolicyStep(action=Action(tool="stop"))

    def close(self):
        pass


class _InterruptingRaw:
    """A raw output whose recording meets a person's Ctrl-C: the process gets SIGINT while
    the runner turns it into data (where it drops whatever the object raises)."""

    def __repr__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the handler runs here, on the main thread
        return "never reached"

    __str__ = __repr__


class CtrlCInRecording:
    """Stops at once; its raw output meets a Ctrl-C while it is recorded."""

    policy_id = "test-ctrl-c-in-recording"

    def __init__(self, arg=None, **options):
        pass

    def start(self, *, task, tools, observation, seed=None):
        pass

    def act(self, observation, tools):
        return PolicyStep(action=Action(tool="stop"), raw=_InterruptingRaw())

    def close(self):
        pass


@envh.hookimpl
def envh_policies():
    # the files the parent and the test share with a policy: isolated workers see them only so
    paths = {"sleepy": ("rw:{pid_file}",), "flaky": ("rw:{arg}",), "forker": ("rw:{pid_file}",)}
    return [envh.PolicyInfo(name=name, factory=cls, data_paths=paths.get(name, ())) for name, cls in
            (("solver", Solver), ("fuzz", Fuzz), ("sleepy", Sleepy), ("envprobe", Env), ("flaky", Flaky),
             ("snoop", Snoop), ("gcsnoop", GcSnoop), ("forker", Forker), ("ctrl-c-in-recording", CtrlCInRecording))]


class Reader(toy24.Toy24Env):
    """Toy24 that reads the file its config's ``data`` names when built, and shows it in
    its first observation (what a bridge's loader does with its questions)."""

    def __init__(self, data=None):
        super().__init__()
        self.read = Path(data).read_text() if data is not None else ""

    def reset(self, *, task=None, seed=None):
        import attrs

        result = super().reset(task=task, seed=seed)
        return attrs.evolve(result, observation=attrs.evolve(result.observation, text=self.read + result.observation.text))


@envh.hookimpl
def envh_bridges():
    return [envh.BridgeInfo(name="reader", factory=Reader, data_paths=("{data}",),
                            description="reads the file its config names (test)")]
