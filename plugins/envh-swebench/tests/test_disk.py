"""The disk bound that holds on any daemon (disk_mode 'tmpfs'): the repository and the
scratch places are size-limited tmpfs volumes, the rest of the container is read-only.
A write past the bound fails with ENOSPC inside the container, within the step, and the
host's disk is never written."""

from __future__ import annotations

import re

import pytest
from envh import Action, errors


def bash(env, command):
    return env.step(Action(tool="bash", args={"command": command}))


def edit(env, **args):
    return env.step(Action(tool="str_replace_editor", args=args))


@pytest.fixture(scope="module")
def env(instances_path):
    from envh_swebench.bridge import SWEBenchEnv

    shared = SWEBenchEnv(instances_path, disk="16m", scratch="8m", shm="4m", disk_mode="tmpfs", memory="256m",
                         reward_on_submit=False)
    shared.reset()
    yield shared
    shared.close()


def test_writes_past_the_bound_fail_inside_the_container(env):
    assert env.box.disk_mode == "tmpfs"
    # many files in one step: the bound holds within the step, not only after it
    many = bash(env, "for i in 1 2 3 4 5 6; do head -c 5000000 /dev/zero > f$i.bin || echo failed $i; done; "
                     "echo total=$(cat f*.bin | wc -c)")
    assert "No space left on device" in many.observation.text and "failed 4" in many.observation.text
    assert 10_000_000 < int(re.search(r"total=(\d+)", many.observation.text).group(1)) <= 16 * 2**20
    assert many.info["error"]["type"] == "disk_limit" and "disk limit" in many.observation.text
    assert "delete what you do not need" in many.observation.text
    bash(env, "rm -f f*.bin")
    again = bash(env, "head -c 5000000 /dev/zero > f.bin && stat -c size=%s f.bin; rm f.bin")
    assert "size=5000000" in again.observation.text and "error" not in again.info
    for scratch in ("/tmp", "/root", "/var/tmp"):
        full = bash(env, f"head -c 12000000 /dev/zero > {scratch}/x.bin; stat -c size=%s {scratch}/x.bin; "
                         f"rm {scratch}/x.bin")
        assert "No space left on device" in full.observation.text, scratch
        assert f"size={8 * 2**20}" in full.observation.text and full.info["error"]["type"] == "disk_limit"
    # files, not only bytes: millions of empty files would cost kernel memory
    for place in ("/tmp", "/root", "."):
        files = bash(env, f"mkdir -p {place}/many && cd {place}/many && "
                          "for i in $(seq 1 9000); do : > f$i || { echo stopped at $i; break; }; done; "
                          f"cd - >/dev/null; rm -rf {place}/many")
        assert "No space left on device" in files.observation.text and "stopped at" in files.observation.text, place
    elsewhere = bash(env, "touch /etc/x /usr/x /opt/x /x 2>&1 | grep -c 'Read-only file system'")
    assert elsewhere.observation.text.split()[0] == "4"


def test_the_hosts_disk_is_not_written(env, docker_client):
    bash(env, "head -c 3000000 /dev/urandom > r.bin; head -c 3000000 /dev/urandom > /tmp/r.bin")
    assert env.box.disk_used() == 0  # the container's writable layer on the host's disk
    host = env.box.container.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    mounts = {m["Destination"]: m for m in env.box.container.attrs["Mounts"]}
    for path in ("/testbed", "/tmp"):
        volume = docker_client.volumes.get(mounts[path]["Name"])
        assert volume.attrs["Options"]["type"] == "tmpfs", path
    assert set(host["Tmpfs"]) == {"/root", "/var/tmp"}
    # tmpfs pages count as the container's memory: the limit grows by what tmpfs may hold
    # (the workspace, the three scratch places, /dev/shm and Docker's fixed 64m /dev)
    assert host["Memory"] == 256 * 2**20 + 16 * 2**20 + 3 * 8 * 2**20 + 4 * 2**20 + 64 * 2**20
    assert host["ShmSize"] == 4 * 2**20
    bash(env, "rm -f r.bin /tmp/r.bin")


def test_shared_memory_and_message_queues_are_bounded(env):
    """/dev/shm is a tmpfs of `shm` bytes (Docker's default, 64m, unless configured): a write
    past it fails with ENOSPC inside the container, the step says so, and the episode goes
    on; POSIX message queues are bounded by RLIMIT_MSGQUEUE."""
    full = bash(env, "head -c 6000000 /dev/zero > /dev/shm/big; stat -c size=%s /dev/shm/big; "
                     "df -k /dev/shm | awk 'NR == 2 { print \"kb=\" $2 }'")
    assert "No space left on device" in full.observation.text
    assert f"size={4 * 2**20}" in full.observation.text and "kb=4096" in full.observation.text
    assert full.info["error"]["type"] == "disk_limit" and "/dev/shm (4m)" in full.observation.text
    after = bash(env, "rm /dev/shm/big; head -c 1000000 /dev/zero > /dev/shm/ok && stat -c size=%s /dev/shm/ok; "
                      "rm /dev/shm/ok; ulimit -q")
    assert "size=1000000" in after.observation.text and "error" not in after.info
    assert after.observation.text.split()[-1] == str(512 * 2**10)


def test_the_repository_tools_and_submission_work_in_the_workspace(env):
    status = bash(env, "git status --short; git log --oneline | wc -l; python3 -m pytest -q tests 2>&1 | tail -1")
    assert "passed" in status.observation.text or "failed" in status.observation.text
    created = edit(env, command="create", path="notes.txt", file_text="hello\n")
    assert "created" in created.observation.text
    assert "hello" in edit(env, command="view", path="notes.txt").observation.text
    patch = env._diff(env.box, env.inst)
    assert "+hello" in patch
    bash(env, "rm notes.txt")


def test_a_snapshot_keeps_the_repository(make_env):
    env = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", snapshot=True, reward_on_submit=False)
    env.reset()
    bash(env, "echo kept > kept.txt; echo lost > /tmp/lost.txt")
    saved = env.save_state()
    other = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", reward_on_submit=False)
    other.from_state(saved)
    assert other.box.disk_mode == "tmpfs" and other.box.container.image.id == saved["snapshot"]["image"]
    seen = bash(other, "cat kept.txt; ls /tmp; git status --short").observation.text
    assert "kept" in seen and "?? kept.txt" in seen and "lost.txt" not in seen
    assert other.box.disk_used() == 0
    other.close()  # first: the snapshot's owner cannot remove an image a container still runs


def test_volumes_go_with_their_container(make_env, docker_client):
    from envh_swebench.containers import LABEL, OWNER_LABEL, cleanup_orphans

    env = make_env(disk="16m", scratch="8m", disk_mode="tmpfs")
    env.reset()
    names = list(env.box.volumes)
    assert len(names) == 2 and all(docker_client.volumes.get(n) for n in names)
    env.close()
    for name in names:
        with pytest.raises(Exception, match="no such volume|not found"):
            docker_client.volumes.get(name)
    # a killed run's volume (its owner is gone) is collected by the next run's start-up;
    # another host's is not ours to judge
    import socket

    foreign = docker_client.volumes.create(name="envh-swebench-ws-orphan-test", labels={
        LABEL: "episode", OWNER_LABEL: "another-host-of-this-test:1:1"})
    dead = docker_client.volumes.create(name="envh-swebench-ws-orphan-test2", labels={
        LABEL: "episode", OWNER_LABEL: f"{socket.gethostname()}:999999999:1"})
    try:
        removed = cleanup_orphans(docker_client)
        assert dead.name in removed and foreign.name not in removed
    finally:
        foreign.remove(force=True)


def test_bad_disk_settings_are_refused_before_any_container(make_env, instances_path):
    from envh_swebench.bridge import SWEBenchEnv
    from envh_swebench.containers import _storage_opt_supported

    with pytest.raises(errors.SpecError, match="Unknown disk_mode 'tmfps'. Choose one of: auto, storage-opt"):
        SWEBenchEnv(instances_path, disk_mode="tmfps")
    with pytest.raises(errors.SpecError, match="scratch '10k' is under 1m"):
        SWEBenchEnv(instances_path, scratch="10k")
    env = make_env(disk_mode="storage-opt", disk="64m")
    from envh_swebench import runtime

    if _storage_opt_supported(runtime.client()):
        env.reset()
        assert env.box.disk_mode == "storage-opt"
    else:  # this daemon cannot: say so, never fall back to a weaker bound silently
        with pytest.raises(errors.InfraError, match="disk_mode 'storage-opt' needs a daemon"):
            env.reset()


def test_a_workspace_that_cannot_be_filled_is_an_infra_error_and_leaves_nothing(make_env, own_containers,
                                                                                docker_client):
    from envh_swebench.containers import LABEL, OWNER_LABEL, owner_token

    def volumes():
        return {v.name for v in docker_client.volumes.list(filters={"label": LABEL})
                if (v.attrs.get("Labels") or {}).get(OWNER_LABEL) == owner_token()}

    before, before_volumes = {c.id for c in own_containers()}, volumes()
    env = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", workdir="/no-such-repo")
    with pytest.raises(errors.InfraError, match="/no-such-repo is not a directory in the image"):
        env.reset()
    assert {c.id for c in own_containers()} == before and volumes() == before_volumes


def test_a_full_disk_is_the_policys_to_clear_not_an_infra_error(make_env):
    """Found by attacking the bound: submit stages the diff through /tmp, so a policy that
    filled /tmp made submit raise InfraError ("index file smaller than expected") and left
    no diff to grade at close. Now submit says what to do and the episode goes on; at
    the episode's end /tmp is emptied to capture the diff."""
    env = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", reward_on_submit=False)
    env.reset()
    bash(env, "echo fixed >> mathx/stats.py; head -c 9000000 /dev/zero > /tmp/fill")
    refused = env.step(Action(tool="submit"))
    assert refused.info["error"]["type"] == "disk_limit" and not refused.terminated
    assert "delete files you do not need" in refused.observation.text
    assert not env.get_env_state()["submitted"]
    bash(env, "rm /tmp/fill")
    done = env.step(Action(tool="submit"))
    assert done.terminated and "+fixed" in done.observation.data["patch"]

    unsubmitted = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", reward_on_submit=False)
    unsubmitted.reset()
    bash(unsubmitted, "echo fixed >> mathx/stats.py; head -c 9000000 /dev/zero > /tmp/fill")
    unsubmitted.close()
    assert unsubmitted.patch is not None and "+fixed" in unsubmitted.patch


def test_sparse_files_cannot_carry_a_snapshot_past_the_bound(make_env):
    """Found by attacking the bound: a sparse file takes no room in tmpfs, but a snapshot
    (docker commit) writes it out whole on the host's disk, and git hashes all of it. No
    file may be larger than `disk` (as in 'check'), and a snapshot whose files add up to
    more is skipped: the state restores by replay instead."""
    env = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", snapshot=True, reward_on_submit=False)
    env.reset()
    huge = bash(env, "truncate -s 100G huge.bin; ls -la huge.bin")
    assert "File too large" in huge.observation.text and "No such file" not in huge.observation.text
    bash(env, "rm -f huge.bin; truncate -s 15M a.bin b.bin; echo kept > kept.txt")
    saved = env.save_state()
    assert "snapshot" not in saved and "over the 16777216" in saved["snapshot_skipped"]
    other = make_env(disk="16m", scratch="8m", disk_mode="tmpfs", reward_on_submit=False)
    other.from_state(saved)  # by replay
    assert "kept" in bash(other, "cat kept.txt").observation.text
    bash(env, "rm a.bin b.bin")
    assert "snapshot" in env.save_state()


def test_a_daemon_that_refuses_the_layer_cap_gets_the_tmpfs_bound(make_env, docker_client, monkeypatch):
    """Where the daemon looks able to cap the layer but refuses (xfs without pquota), auto
    takes the tmpfs workspace in the same reset; an explicit storage-opt says why it fails.
    Here the daemon is made to look able: it then refuses for real (overlay2 on extfs)."""
    from envh_swebench import containers, runtime

    client = runtime.client()
    if containers._storage_opt_supported(client):  # a daemon that really caps the layer: it does
        capped = make_env(disk="64m")
        capped.reset()
        assert capped.box.disk_mode == "storage-opt"
        return
    monkeypatch.setitem(containers._STORAGE_OPT, id(client), True)
    env = make_env(disk="16m", scratch="8m", reward_on_submit=False)
    env.reset()
    assert env.box.disk_mode == "tmpfs" and containers._STORAGE_OPT[id(client)] is False
    assert "ok" in bash(env, "echo ok").observation.text
    monkeypatch.setitem(containers._STORAGE_OPT, id(client), True)
    strict = make_env(disk="16m", disk_mode="storage-opt")
    with pytest.raises(errors.InfraError, match="refused to cap the writable layer"):
        strict.reset()


def test_an_edit_into_a_full_workspace_is_the_policys_error_and_leaves_the_file_whole(make_env):
    """The editor writes through Docker's archive API: into a full tmpfs workspace that
    was an InfraError (the episode lost), and left the file cut off where ENOSPC struck."""
    env = make_env(disk="8m", disk_mode="tmpfs", output_limit=2000)
    env.reset()
    original = env.box.read_file(f"{env.box.workdir}/mathx/stats.py")[0].decode()
    bash = lambda c: env.step(Action(tool="bash", args={"command": c}))  # noqa: E731
    bash("for i in 1 2 3 4 5 6 7 8 9; do head -c 1000000 /dev/urandom > f$i || break; done")
    for args in ({"command": "create", "path": "/testbed/big.py", "file_text": "x" * 150_000},
                 {"command": "str_replace", "path": "/testbed/mathx/stats.py", "old_str": "def mean(",
                  "new_str": "def mean" + "y" * 150_000 + "("}):
        resp = env.step(Action(tool="str_replace_editor", args=args))
        assert resp.info["error"]["type"] == "editor_error", resp.info
        assert "No space left on device" in resp.observation.text
    assert "No such file" in bash("ls big.py").observation.text
    assert env.box.read_file(f"{env.box.workdir}/mathx/stats.py")[0].decode() == original
    # an undo that needs more room than is left: an editor error too, the edit still undoable
    bash("rm f1")
    longer = {"command": "str_replace", "path": "/testbed/mathx/stats.py", "old_str": "def mean(",
              "new_str": "def mean" + "z" * 150_000 + "("}
    assert "error" not in env.step(Action(tool="str_replace_editor", args=longer)).info
    shorter = {**longer, "old_str": "def mean" + "z" * 150_000 + "(", "new_str": "def mean("}
    assert "error" not in env.step(Action(tool="str_replace_editor", args=shorter)).info
    bash("head -c 2000000 /dev/urandom > f1")  # fill again
    undo = env.step(Action(tool="str_replace_editor", args={"command": "undo_edit", "path": "/testbed/mathx/stats.py"}))
    assert undo.info["error"]["type"] == "editor_error", undo.info
    assert env.box.read_file(f"{env.box.workdir}/mathx/stats.py")[0].decode() == original
    bash("rm f1 f2")
    undo = env.step(Action(tool="str_replace_editor", args={"command": "undo_edit", "path": "/testbed/mathx/stats.py"}))
    assert "error" not in undo.info, undo.info
    assert "z" * 1000 in env.box.read_file(f"{env.box.workdir}/mathx/stats.py")[0].decode()
