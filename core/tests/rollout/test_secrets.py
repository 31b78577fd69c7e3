"""Secrets stay with the parent, for real, as root: a worker's code reads neither the
parent's environment (not even through ``/proc/<ppid>/environ``) nor root's files, and
gets only the one secret its policy names (``api_key_env``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import envh
import pytest
from envh.rollout.trajectory import EpisodeRequest

HERE = Path(__file__).parent  # this folder: the helper policies the workers import

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the isolation levels that hold as root need root")


DRIVER = """
import json, os, sys
import envh, hostile, rollout_policies
from envh.rollout.executors.pool import PoolExecutor
from envh.rollout.trajectory import EpisodeRequest
reg = envh.make_plugin_manager(entry_points=False, plugins=[rollout_policies, hostile])
envh.plugins.set_registry(reg)
options = {"parent_pid": os.getpid(), "secret_file": sys.argv[2], **json.loads(sys.argv[3])}
spec = {"bridge": options.pop("bridge", "toy24")}
request = EpisodeRequest(key="snoop", spec=envh.spec_to_data(envh.parse_spec(spec, reg), reg),
                         spec_id=envh.spec_id(spec, reg), policy="snoop", policy_options=options)
with PoolExecutor(1, isolation=sys.argv[1], plugins=["rollout_policies", "hostile"], entry_points=False) as pool:
    (t,) = pool.run([request])
assert t.error_class is None, t.error
print(json.dumps(t.steps[0].raw))
"""


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "credentials"
    path.write_text("root-only-secret")
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    return path


def snoop(isolation, secret_file, **options):
    """What a worker's code can read, in a pool run by a parent started with secrets in
    its environment (as a real run is: they are in its /proc/<pid>/environ)."""
    env = {**os.environ, "PARENT_SECRET_API_KEY": "sk-parent-only", "SNOOP_API_KEY": "sk-for-the-policy",
           "OTHER_API_KEY": "sk-other", "AWS_SECRET_ACCESS_KEY": "aws-parent-only",
           "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, "-c", DRIVER, isolation, str(secret_file), json.dumps(options)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_without_isolation_the_parent_is_readable(secret_file):
    """The control: what the isolation levels take away is really there to take."""
    raw = snoop("none", secret_file)
    assert "sk-parent-only" in raw["parent_environ"] and raw["secret_file"] == "root-only-secret"


def test_namespace_workers_cannot_see_the_parent(secret_file):
    raw = snoop("namespace", secret_file)
    assert raw["parent_environ"].startswith("FileNotFoundError")  # the parent is not in its /proc
    assert "sk-parent-only" not in raw["pid1_environ"] and "aws-parent-only" not in raw["pid1_environ"]
    assert raw["api_key"] == "sk-for-the-policy" and raw["others"] == ["SNOOP_API_KEY"]
    assert raw["uid"] == 0  # same user: its private data (test fixtures) stays readable


def test_user_workers_read_neither_the_parent_nor_root_files(secret_file):
    raw = snoop("user", secret_file)
    assert raw["uid"] == 65534
    assert raw["parent_environ"].startswith("FileNotFoundError")
    assert "root-only-secret" not in raw["secret_file"]  # hidden (its /tmp is its own) or refused
    home = os.path.expanduser("~root")
    # root's home is an empty stand-in holding only the Python installation, if that lives there
    assert all(os.path.join(home, name) in sys.base_prefix + sys.prefix for name in raw["root_home"])
    assert raw["api_key"] == "sk-for-the-policy" and raw["others"] == ["SNOOP_API_KEY"]


# secrets as they are commonly named, none of them ``*_API_KEY`` or ``AWS_*``
COMMON = {"API_KEY": "plain-api-key", "SECRET_KEY": "django-secret", "PGPASSWORD": "pg-password",
          "MYSQL_PWD": "mysql-password", "DATABASE_URL": "postgres://app:db-password@db/app",
          "SENTRY_DSN": "https://sentry-key@sentry.example/1", "STRIPE_KEY": "stripe-live-key",
          "SSH_PRIVATE_KEY": "-----BEGIN KEY-----", "GITHUB_PAT": "github-pat", "SMTP_PASS": "smtp-password",
          "ANTHROPIC_AUTH_TOKEN_FILE_CONTENTS": "auth-token-contents", "OPENAI_API_KEY_2": "second-openai-key",
          "GOOGLE_CREDENTIALS_JSON": "google-credentials"}


def test_commonly_named_secrets_do_not_reach_a_worker(secret_file, monkeypatch):
    """The scrub is a deny-list; it let through secrets not shaped like ``*_API_KEY``."""
    for name, value in COMMON.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # not a secret: it must still pass
    raw = snoop("namespace", secret_file)
    leaked = {k: v for k, v in raw["environ"].items() if v in COMMON.values()}
    assert leaked == {}
    assert raw["environ"].get("TOKENIZERS_PARALLELISM") == "false"
    assert raw["api_key"] == "sk-for-the-policy"


def test_a_worker_inherits_no_descriptor_of_the_parent(secret_file):
    """Only its own protocol pipes and /dev/null-like standard streams: no socket, no
    store, no file of the parent's."""
    raw = snoop("user", secret_file)
    assert [t for t in raw["fds"] if not t.startswith(("pipe:", "/dev/null", "/proc/", "gone"))] == [], raw["fds"]


def test_a_policy_names_its_own_key(secret_file):
    raw = snoop("namespace", secret_file, api_key_env="OTHER_API_KEY")
    assert raw["api_key"] == "sk-other" and raw["others"] == ["OTHER_API_KEY"]


def test_ray_actors_cannot_read_the_driver(registry, ray_executor, secret_file, monkeypatch):
    monkeypatch.setenv("SNOOP_API_KEY", "sk-for-the-policy")
    spec = {"bridge": "toy24"}
    request = EpisodeRequest(key="snoop", spec=envh.spec_to_data(envh.parse_spec(spec, registry), registry),
                             spec_id=envh.spec_id(spec, registry), policy="snoop",
                             policy_options={"parent_pid": os.getpid(), "secret_file": str(secret_file)})
    (t,) = ray_executor.run([request])
    raw = t.steps[0].raw
    assert t.error_class is None and raw["parent_environ"].startswith("PermissionError"), raw["parent_environ"]
    assert raw["others"] == ["SNOOP_API_KEY"] and raw["api_key"] == "sk-for-the-policy"


def test_ray_actors_cannot_read_the_driver_through_another_thread(registry, ray_executor, secret_file,
                                                                   monkeypatch):
    """Capabilities are per thread: dropped on the actor's task thread only, Ray's GC
    thread in the same process kept them and runs a replaceable function on request."""
    monkeypatch.setenv("SNOOP_API_KEY", "sk-for-the-policy")
    spec = {"bridge": "toy24"}
    request = EpisodeRequest(key="gcsnoop", spec=envh.spec_to_data(envh.parse_spec(spec, registry), registry),
                             spec_id=envh.spec_id(spec, registry), policy="gcsnoop",
                             policy_options={"parent_pid": os.getpid()})
    (t,) = ray_executor.run([request])
    assert t.error_class is None, t.error
    assert t.steps[0].raw["parent_environ"].startswith("PermissionError"), t.steps[0].raw["parent_environ"][:40]


DOCKER_SOCKET = "/var/run/docker.sock"


def _docker_up():
    if not os.path.exists(DOCKER_SOCKET):
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("no Docker daemon (dev/setup.d/docker.sh starts it; required under CI)", pytrace=False)
        pytest.skip("no Docker daemon here")


def test_the_docker_daemon_is_out_of_reach_unless_the_bridge_declares_it(secret_file):
    """Docker's socket is root on the host: a uid-0 worker (``namespace``) of a bridge that
    does not drive Docker must not reach it; one of a bridge that declares it does."""
    _docker_up()
    assert snoop("none", secret_file)["docker"].startswith("HTTP/1.")  # the control: the daemon answers
    assert snoop("namespace", secret_file)["docker"].startswith("ConnectionRefusedError")
    assert snoop("namespace", secret_file, bridge="toy24-docker")["docker"].startswith("HTTP/1.")


def test_user_workers_reach_docker_only_for_a_bridge_that_declares_it(secret_file):
    _docker_up()
    denied = snoop("user", secret_file)
    assert denied["uid"] == 65534 and not denied["docker"].startswith("HTTP/1."), denied["docker"]
    granted = snoop("user", secret_file, bridge="toy24-docker")
    assert granted["uid"] == 65534 and granted["docker"].startswith("HTTP/1."), granted["docker"]
    assert "root-only-secret" not in granted["secret_file"]  # the group opens Docker, nothing of root's


def test_an_unknown_host_access_is_refused_at_registration():
    with pytest.raises(ValueError, match="unknown host access"):
        envh.BridgeInfo(name="x", factory="a:b", host_access=("internet",))
