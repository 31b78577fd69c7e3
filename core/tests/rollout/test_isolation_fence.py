"""Secrets stay with the parent at the library default (issue 9, property 5): a pool worker
of a root parent reads neither the parent's environment nor root-owned files outside its
work directory (in root's home, in another directory of /tmp, /etc/shadow), writes nothing
outside its work directory, and still reads the data its bridge declares
(``BridgeInfo.data_paths``), even from a directory only root can open."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import envh
import pytest
from envh.rollout.executors import isolation as fence

HERE = Path(__file__).parent  # this folder: the helper policies the workers import

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the isolation levels that hold as root need root")

DRIVER = """
import json, os, sys
import envh, hostile, rollout_policies, fence_probe
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.trajectory import EpisodeRequest
reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies, hostile, fence_probe])
envh.plugins.set_registry(reg)
level, probe, data = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
def request(key, spec, policy, options, data=()):
    return EpisodeRequest(key=key, spec=envh.spec_to_data(envh.parse_spec(spec, reg), reg),
                          spec_id=envh.spec_id(spec, reg), policy=policy, policy_options=options, max_steps=8,
                          timeout_s=60, data=data)
requests = [request("probe", {"bridge": "toy24"}, "fenceprobe", {"parent_pid": os.getpid(), **probe})]
if data:
    # the caller grants the directory its spec names, unless told "ungranted"
    granted = () if sys.argv[4:] == ["ungranted"] or not data.get("data_dir") else (data["data_dir"],)
    requests.append(request("data", {"bridge": "fence-data", "config": data}, "solver", {}, granted))
kwargs = {} if level == "default" else {"isolation": level}
with PoolExecutor(1, plugins=["rollout_policies", "hostile", "fence_probe"], entry_points=False, **kwargs) as pool:
    out = {t.key: t for t in pool.run(requests) if t.final}
    isolation = pool.isolation
probe = out["probe"]
assert probe.error_class is None, probe.error
result = {"isolation": isolation, "probe": probe.steps[0].raw}
if data:
    result["data"] = {"error": out["data"].error, "success": bool(out["data"].success)}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def secrets():
    """Root-owned 0600 files where a worker must not reach: root's home, a private and a
    world-readable directory of /tmp; plus a private data directory a bridge declares."""
    tag = uuid.uuid4().hex[:8]
    made: list[Path] = []
    home = Path(os.path.expanduser("~root"))
    in_home = home / f".envh-fence-secret-{tag}"
    in_home.write_text("secret-in-root-home")
    in_home.chmod(0o600)
    made.append(in_home)
    private = Path(tempfile.mkdtemp(prefix="envh-fence-other-"))  # 0700, like another run's directory
    (private / "credentials").write_text("secret-in-private-tmp")
    (private / "credentials").chmod(0o600)
    shared = Path(tempfile.mkdtemp(prefix="envh-fence-shared-"))
    shared.chmod(0o755)
    (shared / "store").write_text("secret-in-shared-tmp")
    (shared / "store").chmod(0o644)
    data = Path(tempfile.mkdtemp(prefix="envh-fence-data-"))  # 0700, files 0600: only root reads them
    (data / "seed").write_text("7")
    (data / "seed").chmod(0o600)
    (data / "beside").write_text("not the worker's")
    (data / "leak").symlink_to(in_home)  # a link in declared data to a secret: followed inside the fence
    made += [private, shared, data]
    yield {"home": str(in_home), "private": str(private / "credentials"), "shared": str(shared / "store"),
           "data": str(data), "tag": tag}
    for path in made:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _knobs():
    """What root may write by ownership alone, capabilities or not: the kernel's knobs
    (``core_pattern`` runs a program as root on the host), raw disks, swap and loop devices."""
    import stat

    knobs = ["/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger",
             "/sys/kernel/mm/transparent_hugepage/enabled", "/dev/kmsg"]
    for name in sorted(os.listdir("/dev")):
        try:
            if stat.S_ISBLK(os.stat(f"/dev/{name}").st_mode):
                knobs.append(f"/dev/{name}")
        except OSError:
            continue
    return knobs


KNOBS = _knobs()


def run(level, secrets, data=None, extra_env=None, grant=True):
    tag = secrets["tag"]
    writes = [f"/etc/envh-fence-{tag}", f"/usr/envh-fence-{tag}", f"/root/envh-fence-{tag}",
              f"/var/tmp/envh-fence-{tag}", f"/tmp/envh-fence-{tag}", f"{secrets['data']}/written-{tag}",
              f"envh-fence-{tag}"]  # the last one: relative, in the work dir (allowed)
    probe = {"reads": [secrets["home"], secrets["private"], secrets["shared"], "/etc/shadow",
                       f"{secrets['data']}/leak"], "writes": writes,
             "unmount": [os.path.expanduser("~root"), "/tmp"], "opens": KNOBS}
    env = {**os.environ, "PARENT_SECRET_API_KEY": "sk-parent-only", **(extra_env or {}),
           "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, "-c", DRIVER, level, json.dumps(probe), json.dumps(data or {}),
                           *([] if grant else ["ungranted"])],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    on_host = [w for w in writes[:-1] if os.path.exists(w)]
    for path in on_host:
        os.unlink(path)
    out["on_host"] = on_host
    return out


def assert_fenced(out, secrets):
    raw = out["probe"]
    assert "sk-parent-only" not in raw["parent_environ"], "the parent's environ"
    for key in ("home", "private", "shared"):
        assert "secret-in" not in raw["reads"][secrets[key]], (key, raw["reads"][secrets[key]])
    assert not raw["reads"]["/etc/shadow"].startswith("root:"), "/etc/shadow"
    assert "secret-in" not in raw["reads"][f"{secrets['data']}/leak"], "a symlink in declared data"
    assert out["on_host"] == [], f"a worker wrote outside its work dir: {out['on_host']}"
    written = {p: r for p, r in raw["writes"].items() if r == "written"}
    # what it may write: its work dir, and its own private /tmp and /var/tmp (gone with it)
    assert set(written) <= {p for p in raw["writes"] if not p.startswith("/") or p.startswith(("/tmp/", "/var/tmp/"))}
    assert raw["writes"][f"envh-fence-{secrets['tag']}"] == "written", "its own work dir is writable"
    # its mount table names what it was given (Python, its directory, declared data), not the rest
    assert os.path.dirname(secrets["private"]) not in raw["mountinfo"]
    assert os.path.dirname(secrets["shared"]) not in raw["mountinfo"]
    opened = [p for p, r in raw["opens"].items() if r == "opened"]
    assert opened == [], f"a worker may write the kernel's knobs or devices: {opened}"
    # nothing it can do in a user namespace of its own uncovers what the fence hides
    assert "secret-in" not in raw["escape"], raw["escape"]


def test_the_control_without_isolation_reads_everything(secrets):
    out = run("none", secrets)
    raw = out["probe"]
    assert "sk-parent-only" in raw["parent_environ"]
    assert raw["reads"][secrets["private"]] == "secret-in-private-tmp"
    assert raw["reads"]["/etc/shadow"].startswith("root:")
    assert f"/etc/envh-fence-{secrets['tag']}" in out["on_host"]


def test_the_library_default_holds_for_a_root_parent(secrets):
    """A default-constructed pool, a bridge reading a 0600 seed file in a 0700 directory it
    declares (by its config), and a policy trying every way out."""
    out = run("default", secrets, data={"data_dir": secrets["data"]})
    assert out["isolation"] == "user"
    assert out["probe"]["uid"] == fence.NOBODY
    assert_fenced(out, secrets)
    assert out["data"] == {"error": None, "success": True}, out["data"]


@pytest.mark.parametrize("level", ["user", "namespace"])
def test_each_isolating_level_holds(level, secrets):
    out = run(level, secrets, data={"data_dir": secrets["data"]})
    assert out["isolation"] == level
    assert out["probe"]["uid"] == (fence.NOBODY if level == "user" else 0)
    assert_fenced(out, secrets)
    assert out["data"] == {"error": None, "success": True}, out["data"]


def test_data_declared_through_an_environment_variable(secrets):
    """``FENCE_DATA=`` in ``data_paths``: the parent's variable names the directory; the
    worker gets it (bound in, readable) and the variable with it."""
    out = run("default", secrets, data={"data_dir": None}, extra_env={"FENCE_DATA": secrets["data"]})
    assert out["data"] == {"error": None, "success": True}, out["data"]


def test_an_untrusted_spec_cannot_name_root_only_data_into_its_workers(secrets):
    """Its config is the author's: a path it names that the caller did not grant is refused
    where the worker builds the env; and it comes read-only and as it is on the host, not as
    the worker's own (``declared_data``: ``test_secure_default_attack.py``), so the 0600 seed
    stays closed to nobody either way."""
    out = run("default", secrets, data={"data_dir": secrets["data"]}, grant=False)
    assert out["data"]["success"] is False and "host path" in (out["data"]["error"] or ""), out["data"]


# -- a container daemon over TCP: no mount hides it from workers on the parent's network -----

def test_a_tcp_daemon_is_found_in_the_environment_and_the_daemon_config(tmp_path):
    config = tmp_path / "daemon.json"
    config.write_text(json.dumps({"hosts": ["unix:///var/run/docker.sock", "tcp://127.0.0.1:2375"]}))
    found = fence.docker_tcp_endpoints({"DOCKER_HOST": "tcp://10.0.0.5:2376"}, str(config))
    assert found == ["DOCKER_HOST=tcp://10.0.0.5:2376", f"{config} hosts tcp://127.0.0.1:2375"]
    config.write_text(json.dumps({"hosts": ["unix:///var/run/docker.sock", "fd://"]}))
    assert fence.docker_tcp_endpoints({"DOCKER_HOST": "unix:///run/docker.sock"}, str(config)) == []


FAKE_DAEMON = "envh-fence-dkd"


@pytest.fixture
def tcp_daemon(tmp_path):
    """A process listening on a loopback TCP port under a daemon-like name (an interpreter
    copied under that name: ``comm`` is what the check reads). Not ``dockerd`` itself: every
    pool started meanwhile on this machine (other tests) would refuse to run."""
    import socket
    import time

    binary = tmp_path / FAKE_DAEMON
    shutil.copy2(os.path.realpath(sys.executable), binary)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONHOME"] = sys.base_prefix
    code = ("import socket, sys, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
            "print(s.getsockname()[1], flush=True)\n"
            "while True:\n    c, _ = s.accept(); c.recv(1024)\n"
            "    c.sendall(b'HTTP/1.0 200 OK\\r\\nApi-Version: 1.41\\r\\n\\r\\nOK'); c.close()\n")
    proc = subprocess.Popen([str(binary), "-S", "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        port = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield proc.pid, port
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_a_running_daemon_listening_on_tcp_is_found(tcp_daemon):
    pid, port = tcp_daemon
    assert (FAKE_DAEMON, pid, f"127.0.0.1:{port}") in fence._listening_daemons((*fence.DAEMONS, FAKE_DAEMON))
    assert all(name in fence.DAEMONS for name, _, _ in fence._listening_daemons())


def test_workers_reach_the_host_loopback_only_when_they_declare_the_network(tcp_daemon, registry, worker_env,
                                                                             monkeypatch):
    """A root service on the loopback (a Docker daemon over TCP or a proxy to its socket, a
    browser's DevTools port) would be root to any worker: workers get a network of their
    own unless their bridge or policy declares ``network``; with it, a TCP Docker daemon
    stops the run."""
    import fence_probe
    from envh.rollout.executors.pool import PoolExecutor
    from envh.rollout.trajectory import EpisodeRequest

    registry.register(fence_probe)
    _pid, port = tcp_daemon

    def request(bridge, policy):
        spec = {"bridge": bridge}
        return EpisodeRequest(key=f"{bridge}-{policy}", spec=envh.spec_to_data(envh.parse_spec(spec, registry),
                                                                              registry),
                              spec_id=envh.spec_id(spec, registry), policy=policy, max_steps=2, timeout_s=60,
                              policy_options={"connect": [port]})

    env = {**worker_env, "plugins": [*worker_env["plugins"], "fence_probe"]}
    with PoolExecutor(1, **env) as pool:  # what a pool's workers may reach only grows
        (own,) = [t for t in pool.run([request("toy24", "fenceprobe")]) if t.final]
        (shared,) = [t for t in pool.run([request("toy24", "fenceprobe-net")]) if t.final]
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    with PoolExecutor(1, **env) as pool:
        (unreached,) = [t for t in pool.run([request("toy24", "fenceprobe")]) if t.final]  # no way there
        with pytest.raises(envh.errors.EnvhError, match="reachable over TCP"):
            list(pool.run([request("toy24", "fenceprobe-net")]))
        (granted,) = [t for t in pool.run([request("toy24-docker", "fenceprobe-net")]) if t.final]
    assert own.steps[0].raw["connect"][str(port)].startswith("ConnectionRefusedError"), own.steps[0].raw
    assert shared.steps[0].raw["connect"][str(port)].startswith("HTTP/1.0 200"), shared.steps[0].raw
    assert unreached.error is None and unreached.steps[0].raw["connect"][str(port)].startswith("Connection")
    assert granted.error is None and granted.steps[0].raw["connect"][str(port)].startswith("HTTP/1.0 200")


# -- declared paths that would undo the fence --------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/root", "/tmp", "/home", "/var", "/etc", "/etc/ssl", "/proc/1",
                                  "/root/.cache", "/dev/shm", "/run"])
def test_a_declared_path_that_would_undo_the_fence_is_refused(path):
    os.makedirs(path, exist_ok=True) if path == "/root/.cache" else None
    with pytest.raises(envh.errors.EnvhError, match="Refusing"):
        fence.check_data_path(path)


def test_a_hidden_directory_of_a_home_is_refused():
    """Where keys and credentials live (~/.ssh, ~/.aws, ~/.config/gcloud)."""
    dot = Path(tempfile.mkdtemp(dir=os.path.expanduser("~root"), prefix=".envh-fence-keys-"))
    try:
        (dot / "sub").mkdir()
        for path in (dot, dot / "sub"):
            with pytest.raises(envh.errors.EnvhError, match="hidden directory"):
                fence.check_data_path(str(path))
    finally:
        shutil.rmtree(dot)


def test_a_symlink_is_judged_by_where_it_points(tmp_path):
    link = tmp_path / "innocent"
    link.symlink_to("/root/.npmrc" if os.path.exists("/root/.npmrc") else "/root")
    with pytest.raises(envh.errors.EnvhError, match="really /root"):
        fence.check_data_path(str(link))
    parent = tmp_path / "up"
    parent.symlink_to("/")
    with pytest.raises(envh.errors.EnvhError, match="Refusing"):
        fence.check_data_path(str(parent / "root" / ".."))


def test_a_socket_is_no_data_path(tmp_path):
    """Shown as nobody's own, a root-owned socket would be one it may connect to."""
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "daemon.sock"))
        with pytest.raises(envh.errors.EnvhError, match="not a file or directory"):
            fence.check_data_path(str(tmp_path / "daemon.sock"))


def test_relative_missing_and_ordinary_paths(tmp_path):
    assert fence.check_data_path("data/games") is None  # the worker's own directory
    assert fence.check_data_path(str(tmp_path / "missing")) is None
    assert fence.check_data_path(str(tmp_path)) == str(tmp_path.resolve())
    cache = Path(os.path.expanduser("~/.cache"))
    if cache.is_dir():
        inside = Path(tempfile.mkdtemp(dir=cache, prefix="envh-fence-"))
        try:
            assert fence.check_data_path(str(inside)) == str(inside)
        finally:
            inside.rmdir()


def test_a_work_dir_holding_a_hidden_place_is_refused():
    with pytest.raises(envh.errors.EnvhError, match="holds /tmp"):
        fence.wrap(["true"], "user", "/tmp")
    with pytest.raises(envh.errors.EnvhError, match="holds"):
        fence.wrap(["true"], "user", "/")


def test_a_spec_that_declares_root_s_home_is_refused_before_any_worker_reads_it(registry, worker_env):
    """The data path comes from a spec's config, which an untrusted author writes."""
    from envh.rollout.executors.pool import PoolExecutor
    from envh.rollout.trajectory import EpisodeRequest

    spec = {"bridge": "fence-data", "config": {"data_dir": "/root"}}
    import fence_probe

    registry.register(fence_probe)
    request = EpisodeRequest(key="x", spec=envh.spec_to_data(envh.parse_spec(spec, registry), registry),
                             spec_id=envh.spec_id(spec, registry), policy="solver", max_steps=4, timeout_s=30)
    with PoolExecutor(1, **worker_env) as pool, pytest.raises(envh.errors.EnvhError, match="Refusing"):
        list(pool.run([request]))


# -- Ray actors: the same fence, without a PID namespace (Ray watches its actors' pids) --------

@pytest.fixture(scope="module")
def fenced_ray(ray_executor):
    from envh.rollout.executors.ray import RayExecutor

    # the session's executor may hold every CPU of the local cluster with its idle actors
    for actor in list(ray_executor.actors):
        ray_executor._retire(actor)
    executor = RayExecutor(1, plugins=["rollout_policies", "hostile", "fence_probe"], entry_points=False,
                           grace_s=1.0, retries=0, memory_mb=3000)
    yield executor
    executor.close()


def test_ray_actors_read_no_root_file_outside_their_directory(fenced_ray, secrets):
    import fence_probe

    reg = envh.make_plugin_manager(entry_points=False, plugins=[__import__("rollout_policies"), fence_probe])
    envh.plugins.set_registry(reg)
    try:
        from envh.rollout.trajectory import EpisodeRequest

        tag = secrets["tag"]
        writes = [f"/etc/envh-fence-{tag}", f"/usr/envh-fence-{tag}", f"/root/envh-fence-{tag}",
                  f"{secrets['data']}/written-{tag}", f"envh-fence-{tag}"]
        probe = {"parent_pid": os.getpid(), "reads": [secrets["home"], secrets["private"], secrets["shared"],
                                                       "/etc/shadow"], "writes": writes,
                 "unmount": [os.path.expanduser("~root"), "/tmp"], "opens": KNOBS}

        def request(key, spec, policy, options, data=()):
            return EpisodeRequest(key=key, spec=envh.spec_to_data(envh.parse_spec(spec, reg), reg),
                                  spec_id=envh.spec_id(spec, reg), policy=policy, policy_options=options,
                                  max_steps=8, timeout_s=120, data=data)

        out = {t.key: t for t in fenced_ray.run([
            request("probe", {"bridge": "toy24"}, "fenceprobe", probe),
            request("data", {"bridge": "fence-data", "config": {"data_dir": secrets["data"]}}, "solver", {},
                    (secrets["data"],))])
            if t.final}
    finally:
        envh.plugins.set_registry(None)
    assert out["probe"].error is None, out["probe"].error
    raw = out["probe"].steps[0].raw
    assert raw["uid"] == fence.NOBODY
    assert "sk-" not in raw["parent_environ"], raw["parent_environ"][:60]
    for key in ("home", "private", "shared"):
        assert "secret-in" not in raw["reads"][secrets[key]], (key, raw["reads"][secrets[key]])
    assert not raw["reads"]["/etc/shadow"].startswith("root:")
    on_host = [w for w in writes[:-1] if os.path.exists(w)]
    for path in on_host:
        os.unlink(path)
    assert on_host == [] and raw["writes"][f"envh-fence-{tag}"] == "written", raw["writes"]
    assert "secret-in" not in raw["escape"], raw["escape"]
    assert [p for p, r in raw["opens"].items() if r == "opened"] == []
    assert out["data"].error is None and out["data"].success, out["data"].error


def test_the_local_ray_cluster_stays_on_loopback(ray_executor):
    import ray

    assert {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]} == {"127.0.0.1"}


def test_ray_refuses_an_unknown_level(ray_executor):
    from envh.rollout.executors.ray import RayExecutor

    with pytest.raises(envh.errors.EnvhError, match="Unknown isolation"):
        RayExecutor(1, isolation="users")


def test_a_writable_data_dir_others_can_reach_gets_no_setuid_root_program(tmp_path):
    """Through a writable idmapped bind, nobody's files land as root's on disk, setuid bit
    and all. Where other users can reach the directory that would plant a setuid-root
    program for them: there the bind is plain (nobody writes only what nobody may)."""
    work = tempfile.mkdtemp(prefix="envh-fence-work-")
    os.chown(work, fence.NOBODY, fence.NOBODY)
    private = Path(tempfile.mkdtemp(prefix="envh-fence-rw-private-"))  # 0700: root alone reaches it
    reachable = Path(tempfile.mkdtemp(prefix="envh-fence-rw-shared-"))
    reachable.chmod(0o777)
    try:
        plant = " ; ".join(f"cp /bin/true {d}/t && chmod 4755 {d}/t" for d in (private, reachable))
        cmd = fence.wrap(["sh", "-c", plant], "user", work, data=[(str(private), True, True),
                                                                   (str(reachable), True, True)])
        subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert (private / "t").exists() and (private / "t").stat().st_uid == 0  # works where only root reaches
        planted = reachable / "t"
        assert not (planted.exists() and planted.stat().st_uid == 0 and planted.stat().st_mode & 0o4000)
    finally:
        for path in (work, private, reachable):
            shutil.rmtree(path, ignore_errors=True)


def test_another_nobody_process_cannot_read_a_worker_s_environ(registry, worker_env, monkeypatch):
    """Every fenced worker and Ray actor is nobody, and Ray actors share the host's PID
    namespace: without PR_SET_DUMPABLE 0 one read another's key from /proc/<pid>/environ."""
    from envh.rollout.executors.pool import PoolExecutor
    from envh.rollout.trajectory import EpisodeRequest

    monkeypatch.setenv("SNOOP_API_KEY", "sk-worker-key")
    spec = {"bridge": "toy24"}
    request = EpisodeRequest(key="k", spec=envh.spec_to_data(envh.parse_spec(spec, registry), registry),
                             spec_id=envh.spec_id(spec, registry), policy="snoop", max_steps=2, timeout_s=60)
    with PoolExecutor(1, **worker_env) as pool:
        (t,) = [t for t in pool.run([request]) if t.final]
        assert t.steps[0].raw["api_key"] == "sk-worker-key"  # the worker holds it
        (pid,) = pool.pids()
        peer = subprocess.run(["setpriv", f"--reuid={fence.NOBODY}", f"--regid={fence.NOBODY}", "--clear-groups",
                               "cat", f"/proc/{pid}/environ"], capture_output=True, text=True, timeout=30)
    assert "sk-worker-key" not in peer.stdout and peer.returncode != 0, peer.stdout[:200]
