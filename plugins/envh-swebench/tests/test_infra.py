"""Infrastructure failures are typed InfraErrors, and no container outlives its run."""

from __future__ import annotations

import subprocess
import sys

import pytest
from envh import Action, errors
from envh_swebench.containers import LABEL, OWNER_LABEL, cleanup_orphans


def test_killed_container_is_an_infra_error_and_leaks_nothing(make_env, own_containers):
    env = make_env()
    env.reset()
    assert env.step(Action(tool="bash", args={"command": "true"})).observation.data["exit_code"] == 0
    env.box.container.kill()
    with pytest.raises(errors.InfraError, match="exited"):
        env.step(Action(tool="bash", args={"command": "ls"}))
    env.close()
    assert own_containers() == []


def test_unreachable_daemon_is_an_infra_error(instances_file, tmp_path):
    from envh_swebench.bridge import SWEBenchEnv

    env = SWEBenchEnv(str(instances_file), docker_url=f"unix://{tmp_path}/no-docker.sock")
    assert [t.instance_id for t in env.list_tasks()] == ["envh__mathx-1"]  # no daemon needed
    with pytest.raises(errors.InfraError, match="Cannot reach the Docker daemon"):
        env.reset()
    env.close()


def test_missing_image_is_an_infra_error(instances_path, mathx_row, own_containers):
    from envh_swebench.bridge import SWEBenchEnv

    env = SWEBenchEnv([{**mathx_row, "image": "envh-swebench-test/no-such-image:never"}])
    with pytest.raises(errors.InfraError, match="not present locally"):
        env.reset()
    env.close()
    assert own_containers() == []


def test_resource_limits_labels_and_no_network(make_env, docker_client):
    env = make_env(cpus=0.5, memory="256m", pids=64)
    env.reset()
    host = env.box.container.attrs["HostConfig"]
    # a tmpfs workspace counts as memory: the limit grows by disk (4g) + 3 x scratch (512m)
    # + /dev/shm (64m) + Docker's /dev (64m)
    memory = 256 * 2**20 + (4 * 2**30 + 3 * 512 * 2**20 + 2 * 64 * 2**20 if env.box.disk_mode == "tmpfs" else 0)
    assert (host["NanoCpus"], host["Memory"], host["PidsLimit"], host["NetworkMode"]) == \
           (500_000_000, memory, 64, "none")
    assert env.box.container.labels[LABEL] == "episode"
    out = env.step(Action(tool="bash", args={"command": "cat /sys/class/net/*/operstate | sort | tr '\\n' ' '"}))
    assert out.observation.text.split() == ["unknown"]  # loopback only


def test_orphans_of_a_killed_run_are_removed(instances_path, docker_client):
    """A child process starts an episode and is SIGKILLed; start-up cleanup removes
    its container but leaves the containers of live processes alone."""
    script = (
        "import os, sys\n"
        "from envh_swebench.bridge import SWEBenchEnv\n"
        f"env = SWEBenchEnv({instances_path!r})\n"
        "env.reset()\n"
        "print(env.box.container.name, flush=True)\n"
        "os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    name = proc.stdout.strip()
    orphan = docker_client.containers.get(name)
    assert orphan.labels[OWNER_LABEL].split(":")[1] != str(__import__("os").getpid())
    removed = cleanup_orphans(docker_client)
    assert name in removed
    assert not docker_client.containers.list(all=True, filters={"name": name})


def test_live_owners_keep_their_containers(make_env, docker_client):
    env = make_env()
    env.reset()
    assert env.box.container.name not in cleanup_orphans(docker_client)
    assert env.step(Action(tool="bash", args={"command": "true"})).observation.data["exit_code"] == 0
