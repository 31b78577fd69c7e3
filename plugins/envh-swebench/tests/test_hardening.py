"""What a hostile or careless policy can do, and what it cannot: editor confinement and
caps, test runs that prove themselves, container privileges and disk, an image without
Python, evaluation after close, snapshot images that do not pile up."""

from __future__ import annotations

import pytest
from envh import Action
from envh_swebench.containers import EPISODE_CAPS


def bash(env, command):
    return env.step(Action(tool="bash", args={"command": command}))


def edit(env, **args):
    return env.step(Action(tool="str_replace_editor", args=args))


@pytest.fixture(scope="module")
def env(instances_path):
    """One episode container shared by the read-mostly checks of this module."""
    from envh_swebench.bridge import SWEBenchEnv

    shared = SWEBenchEnv(instances_path, output_limit=2000, disk="8m")
    shared.reset()
    yield shared
    shared.close()


@pytest.mark.parametrize("path", [
    "../etc/hostname", "/etc/hostname", "/testbed/../etc/passwd", "mathx/../../etc/hostname",
    "/testbedx/file", "",
])
def test_editor_paths_stay_in_the_repository(env, path):
    for command in ("view", "create", "str_replace", "insert"):
        resp = edit(env, command=command, path=path, file_text="x", old_str="a", new_str="b",
                    insert_line=0)
        assert resp.info["error"]["type"] in ("editor_error", "invalid_arguments"), (command, path)
        assert "root:" not in resp.observation.text


def test_editor_does_not_follow_links_out_of_the_repository(env):
    bash(env, "ln -sfn /etc escape && ln -sf /etc/hostname host.txt")
    try:
        for path in ("escape/hostname", "host.txt", "escape"):
            resp = edit(env, command="view", path=path)
            assert "leads outside the repository" in resp.info["error"]["message"], path
        resp = edit(env, command="create", path="escape/evil.txt", file_text="x")
        assert resp.info["error"] and bash(env, "ls /etc/evil.txt").observation.data["exit_code"] == 2
    finally:
        bash(env, "rm -f escape host.txt")


def test_view_output_is_capped_and_says_how_to_see_more(env):
    bash(env, "seq 1 200000 > big.txt")
    try:
        resp = edit(env, command="view", path="big.txt")
        text = resp.observation.text
        assert len(text) < 2300 and "use `view_range`" in text and "of 200001" in text
        assert text.splitlines()[1] == "     1\t1"
        tail = edit(env, command="view", path="big.txt", view_range=[199999, -1]).observation.text
        assert "199999\t199999" in tail and "200000\t200000" in tail
        bash(env, "head -c 100000 /dev/zero | tr '\\0' a > wide.txt")
        wide = edit(env, command="view", path="wide.txt").observation.text
        assert len(wide) < 2300 and "characters long" in wide
    finally:
        bash(env, "rm -f big.txt wide.txt")


def test_str_replace_that_changes_nothing_is_an_error(env):
    resp = edit(env, command="str_replace", path="mathx/stats.py", old_str="def mean", new_str="def mean")
    assert resp.info["error"]["type"] == "editor_error" and "the same" in resp.observation.text
    assert edit(env, command="str_replace", path="mathx/stats.py", old_str="", new_str="x").info["error"]
    assert edit(env, command="view", path="mathx/stats.py", view_range=["1", 2]).info["error"]


@pytest.mark.parametrize("command", [
    "python3 -m pytest --version", "false && python3 -m pytest tests", "python3 -m pytest -q tests/nope.py",
    "echo pytest", "python3 -m pytest --collect-only -q tests", "true || python3 -m pytest tests",
])
def test_commands_that_run_no_test_do_not_count(env, command):
    before = env.get_env_state()["test_runs"]
    bash(env, command)
    assert env.get_env_state()["test_runs"] == before, command


def test_a_real_test_run_counts(env):
    before = env.get_env_state()["test_runs"]
    bash(env, "python3 -m pytest -q tests")
    bash(env, "timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_stats.py")
    state = env.get_env_state()
    assert state["test_runs"] == before + 2 and state["last_test_exit_code"] == 0


def test_edits_through_bash_are_edits(env):
    before = env.get_env_state()["edits"]
    bash(env, "python3 -m pytest -q tests")
    assert env.get_env_state()["tests_since_last_edit"]
    bash(env, "sed -i 's/Middle value/The middle value/' mathx/stats.py")
    state = env.get_env_state()
    assert state["edits"] == before + 1 and not state["tests_since_last_edit"]
    bash(env, "cat mathx/stats.py > /dev/null; ls")  # reading is not editing
    bash(env, "sed -i 's/The middle value/Middle value/' mathx/stats.py")  # back to the base: still an edit
    assert env.get_env_state()["edits"] == before + 2


def test_container_runs_without_privileges(env):
    host = env.box.container.attrs["HostConfig"]
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["CapDrop"] == ["ALL"]
    assert sorted(host["CapAdd"]) == sorted(EPISODE_CAPS) and host["NetworkMode"] == "none"
    status = bash(env, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status").observation.text
    assert "NoNewPrivs:\t1" in status
    assert "CapEff:\t00000000a80425fb" not in status  # docker's default set is not there
    assert bash(env, "mount -t tmpfs none /mnt").observation.data["exit_code"] != 0


def test_files_and_the_writable_layer_are_bounded(make_env):
    """disk_mode 'check' (the bound where no other holds): per file, and after each step."""
    env = make_env(disk="8m", disk_mode="check", reward_on_submit=False)
    env.reset()
    assert env.box.disk_mode == "check"
    big = bash(env, "head -c 20000000 /dev/zero > /tmp/big.bin; stat -c 'size=%s' /tmp/big.bin; rm /tmp/big.bin")
    assert "File too large" in big.observation.text and f"size={8 * 2**20}\n" in big.observation.text
    assert "error" not in big.info
    full = bash(env, "for i in 1 2; do head -c 7000000 /dev/zero > /tmp/f$i.bin; done; true")
    assert full.info["error"]["type"] == "disk_limit" and "over the 8m" in full.observation.text
    # Over the bound, nothing may grow (before, each step could add up to `disk` per file).
    more = bash(env, "head -c 3000000 /dev/zero > /tmp/g.bin; stat -c size=%s /tmp/g.bin")
    assert "File too large" in more.observation.text and "size=1\n" in more.observation.text
    assert more.info["error"]["type"] == "disk_limit"
    bash(env, "rm -f /tmp/*.bin")
    assert "error" not in bash(env, "true").info
    again = bash(env, "head -c 3000000 /dev/zero > /tmp/g.bin; stat -c size=%s /tmp/g.bin; rm /tmp/g.bin")
    assert "size=3000000\n" in again.observation.text


def test_files_touched_and_state_stay_bounded(make_env):
    env = make_env(reward_on_submit=False)
    env.reset()
    bash(env, "mkdir -p junk && cd junk && seq 1 500 | xargs touch")
    state = env.get_env_state()
    assert len(state["files_touched"]) == 200 and state["files_touched_more"] == 300
    bash(env, "echo " + "x" * 50_000)
    state = env.get_env_state()
    assert len(state["last_command"]) < 2100 and len(state["last_output"]) <= 2000


def test_evaluate_after_close_grades_the_captured_diff(make_env, fix_action):
    env = make_env()
    env.reset()
    env.step(fix_action)
    env.close()
    assert env.box is None
    verdict = env.evaluate()
    assert verdict.success and verdict.metrics["submitted"] is False


def test_nothing_a_command_starts_outlives_its_step(env):
    """Each call starts a fresh shell and its process group is killed after it; a process
    that left the group (setsid) lived on, e.g. to swap a link while the editor checks a
    path, or to write between steps. Now every process the runner did not find at start
    is killed after each request."""
    count = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done "
             "| grep -c '^sleep 3[01]7 $'")
    started = bash(env, "setsid sleep 317 >/dev/null 2>&1 < /dev/null & "
                        "nohup setsid bash -c 'sleep 307' >/dev/null 2>&1 < /dev/null & sleep 0.3; " + count)
    assert started.observation.text.strip().endswith("2"), started.observation.text  # both ran
    after = bash(env, count)
    assert after.observation.text.split()[0] == "0", after.observation.text
    assert bash(env, "echo alive").observation.text.strip() == "alive"  # the runner lives on


def test_evaluation_container_matches_run_instance(instances_path, docker_client, mathx_row, monkeypatch):
    """As run_instance: root, no cpu/memory limits; but no network, a pids bound and no
    SYS_ADMIN (the patch under test is the policy's code)."""
    from envh_swebench import grading
    from envh_swebench.bridge import SWEBenchEnv

    seen = []
    real_start = grading.Sandbox.start

    def spy(*args, **kwargs):
        box = real_start(*args, **kwargs)
        seen.append(box.container.attrs["HostConfig"] | {"User": box.container.attrs["Config"]["User"]})
        return box

    monkeypatch.setattr(grading.Sandbox, "start", spy)
    env = SWEBenchEnv(instances_path)
    try:
        env.reset()
        assert env.evaluate().success is False
    finally:
        env.close()
    host = seen[-1]  # the episode's container came first
    assert len(seen) == 2 and (host["NanoCpus"], host["Memory"], host["PidsLimit"]) == (0, 0, 4096)
    assert not host["CapAdd"] and host["User"] == "root" and host["NetworkMode"] == "none"
    assert SWEBenchEnv(instances_path, eval_sys_admin=True).eval_limits.cap_add == ("SYS_ADMIN",)


def test_evaluated_patch_cannot_mount_the_hosts_cgroups(instances_path, mathx_row):
    """The patch's code runs as root in the evaluation container. With SYS_ADMIN (as
    run_instance adds it) root there mounts the host's cgroup v1 hierarchies read-write,
    release_agent included: the known way out of a container. Without it, mount fails;
    and a fork bomb stops at the pids bound (a small one here, to keep the test cheap)."""
    from envh_swebench import runtime
    from envh_swebench.bridge import SWEBenchEnv
    from envh_swebench.containers import Sandbox

    env = SWEBenchEnv(instances_path, eval_pids=64)
    inst = next(iter(env.instances.values()))
    box = Sandbox.start(runtime.client(env.docker_url), inst.image, workdir=inst.workdir,
                        limits=env.eval_limits, instance_id="attack", purpose="eval")
    try:
        probe = box.run("mkdir -p /tmp/c && mount -t cgroup -o pids cgroup /tmp/c && ls /tmp/c; "
                        "mount -t tmpfs t /mnt && echo TMPFS", timeout=30, limit=4000)
        assert probe["exit_code"] != 0 and "release_agent" not in probe["output"], probe
        assert "TMPFS" not in probe["output"], probe
        bomb = box.run("python3 -c 'import os, time\nn = 0\ntry:\n    while n < 200:\n"
                       "        if os.fork() == 0:\n            time.sleep(5)\n            os._exit(0)\n"
                       "        n += 1\nexcept OSError as e:\n    print(\"refused\", e.errno)\nprint(\"forks\", n)'",
                       timeout=60, limit=4000)
        forks = int(bomb["output"].rsplit("forks ", 1)[1].split()[0])
        assert "refused 11" in bomb["output"] and forks < 64, bomb
    finally:
        box.close()


def test_image_without_python_falls_back_to_exec(nopython_image, mathx_row, fix_action):
    from envh_swebench.bridge import SWEBenchEnv

    env = SWEBenchEnv([{**mathx_row, "image": nopython_image}], output_limit=1000, command_timeout=2,
                      reward_on_submit=False)
    try:
        first = env.reset()
        assert "median" in first.observation.text and env.box.no_runner
        assert bash(env, "command -v python3; echo $?").observation.text.strip() == "1"
        big = bash(env, "seq 1 100000")
        assert "bytes of output truncated" in big.observation.text and len(big.observation.text) < 1200
        assert big.observation.text.rstrip().endswith("100000")
        slow = bash(env, "sleep 20")
        assert slow.info["error"]["type"] == "timeout"
        env.step(fix_action)
        bash(env, "sed -i 's/Middle value/The middle value/' mathx/stats.py")
        state = env.get_env_state()
        assert state["files_touched"] == ["mathx/stats.py"] and state["edits"] == 2
        done = env.step(Action(tool="submit"))
        assert "(ordered[middle - 1] + ordered[middle]) / 2" in done.observation.data["patch"]
    finally:
        env.close()


def test_nothing_a_command_starts_outlives_its_step_without_python(nopython_image, mathx_row):
    """The one-exec-per-command fallback kills what a command leaves behind too: a
    background job, a setsid'd daemon and a forking one are gone by the next step, the
    container's own processes stay, and the tracking after each step still works."""
    from envh_swebench.bridge import SWEBenchEnv

    env = SWEBenchEnv([{**mathx_row, "image": nopython_image}], command_timeout=10, reward_on_submit=False)
    count = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done "
             "| grep -c '^sleep 3[012]7 $'")
    try:
        env.reset()
        assert env.box.no_runner
        started = bash(env, "sleep 327 & setsid sleep 317 >/dev/null 2>&1 < /dev/null & "
                            "nohup setsid bash -c 'while :; do sleep 307; done' >/dev/null 2>&1 < /dev/null & "
                            "sleep 0.3; " + count)
        assert started.observation.text.strip().endswith("3"), started.observation.text  # all ran
        after = bash(env, count)
        assert after.observation.text.split()[0] == "0", after.observation.text
        writer = bash(env, "setsid bash -c 'while :; do date >> late.txt; sleep 0.05; done' "
                           ">/dev/null 2>&1 < /dev/null & sleep 0.3")
        assert "exit code" not in writer.observation.text
        size = bash(env, "wc -c < late.txt").observation.text.split()[0]
        assert bash(env, "sleep 0.5; wc -c < late.txt").observation.text.split()[0] == size  # nobody writes
        assert env.get_env_state()["files_touched"] == ["late.txt"]
        init = env.box.container.exec_run(["sh", "-c", "cat /proc/1/cmdline"]).output
        assert env.box.status()["Status"] == "running" and init  # the container's init lives
    finally:
        env.close()


def test_snapshot_images_are_collected(make_env, docker_client):
    import docker.errors

    env = make_env(snapshot=True, max_snapshots=2)
    env.reset()
    made = []
    for i in range(3):
        bash(env, f"echo {i} > n.txt")
        made.append(env.save_state()["snapshot"]["image"])

    def exists(image):
        try:
            docker_client.images.get(image)
            return True
        except docker.errors.ImageNotFound:
            return False

    assert [exists(i) for i in made] == [False, True, True]
    env.close()
    assert not any(exists(i) for i in made)


def test_odd_paths_are_editor_errors_not_crashes(env):
    """Found by attacking the editor: a FIFO read as a directory, a path through a regular
    file and an over-long name reached the daemon and came back as InfraErrors."""
    bash(env, "mkfifo pipe; touch plain")
    try:
        cases = {"pipe": "not a regular file", "plain/x": "does not exist", "x" * 300: "too long",
                 "d/" * 2100: "too long"}
        for path, message in cases.items():
            resp = edit(env, command="view", path=path)
            assert message in resp.observation.text and resp.info["error"]["type"] == "editor_error", path
        created = edit(env, command="create", path="plain/x", file_text="x")
        assert created.info["error"]["type"] == "editor_error" and "Cannot create" in created.observation.text
    finally:
        bash(env, "rm -f pipe plain")


def test_a_diff_too_large_to_submit_is_refused_not_cut(make_env, monkeypatch):
    """The diff is read back whole; one beyond the bound is refused at submit (the episode
    goes on), never cut in the middle (which would grade a different patch)."""
    from envh_swebench import bridge

    monkeypatch.setattr(bridge, "MAX_DIFF_BYTES", 200_000)
    env = make_env(reward_on_submit=False)
    env.reset()
    bash(env, "seq 1 100000 > numbers.txt")
    refused = env.step(Action(tool="submit"))
    assert refused.info["error"]["type"] == "diff_too_large" and not refused.terminated
    assert not env.get_env_state()["submitted"]
    bash(env, "rm numbers.txt; seq 1 20000 > numbers.txt")
    done = env.step(Action(tool="submit"))
    patch = done.observation.data["patch"]
    assert done.terminated and patch.rstrip().endswith("+20000") and "+10000\n" in patch


# A static x86-64 program (no libc) whose main thread exits while a second thread appends
# "x\n" to late2.txt every 50 ms: /proc shows the process as a zombie (its leader), yet
# it runs. Built from: clone(CLONE_VM|FS|FILES|SIGHAND|THREAD) then SYS_exit in the leader.
_ZOMBIE_LEADER_GZ_B64 = "H4sIAAAAAAACA6t39XFjYmRkgAEmBjsGEG8DgwOY7wAVP4BQAhSzAKpzYGBjYAWrZQerhwCYPhh9ACp+QQFCQymGwKclKWwMxAMBKO1qeMnV8IDhpR0WQI5Hr2kN0MD9DPyMDPysHq0HSjMdwxxDHUNCgz2an3zYwQRUs8+RhYFh1xJGkGrbOKAAP6tPr248kOHZedBxD8j9jvuYwIbp+gOp3cpwW3w6H/h0nvfpfOfT+Ymf1fCSR+cNj873Hp3X+Flf34Uo2WED0tl5HSL4j4EhJ7Ek1UivpKKEoYIL2f0NH36BLGFwd3a2UtBwSU3KTMxTMDTSM9Iz0DU00U5JTTI0KjXUhAoxMOgVZxSXFJUkJjHolaQCTdMryk9JLElk0EsqLmbQS87PzU3NK2GgHHADMSwOUeMPAuahqWdE4wtCxZig/ABGByiNGt/o8QgDkkDMAcTMsHCC6i+AWYRmALp5clD7DdDEYfrVcbgfmWbGEi7TCeiHAQBaUtZsQAMAAA=="


def test_a_process_whose_leader_exited_does_not_outlive_its_step_without_python(nopython_image, mathx_row):
    """The fallback's sweep skipped zombies; a process whose main thread exits (the rest
    of its threads running) looks like one, and wrote on between steps."""
    import base64
    import gzip
    import platform

    from envh_swebench.bridge import SWEBenchEnv

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the program is x86-64")
    env = SWEBenchEnv([{**mathx_row, "image": nopython_image}], command_timeout=10, reward_on_submit=False)
    try:
        env.reset()
        assert env.box.no_runner
        env.box.write_file(f"{env.box.workdir}/zl", gzip.decompress(base64.b64decode(_ZOMBIE_LEADER_GZ_B64)), 0o755)
        started = bash(env, "setsid ./zl >/dev/null 2>&1 </dev/null & sleep 0.3; wc -c < late2.txt")
        assert int(started.observation.text.split()[0]) > 0, started.observation.text  # it runs
        size = bash(env, "wc -c < late2.txt").observation.text.split()[0]
        assert bash(env, "sleep 0.5; wc -c < late2.txt").observation.text.split()[0] == size  # nobody writes
    finally:
        env.close()
