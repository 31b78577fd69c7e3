"""SpreadsheetBench episodes on real containers and real LibreOffice: native tools and
their transactions, run_python against hostile code, multi-test-case grading, clean-up,
and the answer never reaching the policy."""

from __future__ import annotations

import hashlib
import json
import socket
import time
import uuid

import pytest
from envh import Action, TaskRef, errors
from office_fixtures import NATIVE_SOLUTION, SOLUTION_CODE

T3 = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-3")
T1 = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-1")


def step(env, tool, **args):
    return env.step(Action(tool=tool, args=args))


def digest(env) -> str:
    with open(env.unwrapped.work, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def env(sheet_data, soffice, docker_ready):
    """One env for the module (one container warm-up); tests reset it."""
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    e = SpreadsheetBenchEnv(sheet_data, python_timeout=30)
    yield e
    e.close()


@pytest.fixture(scope="module")
def short_env(sheet_data, soffice, docker_ready):
    """A 2-second run_python limit, for code that never ends."""
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    e = SpreadsheetBenchEnv(sheet_data, python_timeout=2)
    yield e
    e.close()


def test_native_tools_and_recalculation(env):
    first = env.reset(task=T3, seed=0).observation.text
    assert "Data (A1:E5), Summary (A1:B3)" in first
    before = step(env, "inspect_range", range="Data!D2:D3").observation.text
    assert "D2 = =B2*C2 → (not recalculated)" in before
    assert step(env, "recalculate").info == {}
    assert env.get_env_state()["recalculated"] is True
    after = step(env, "inspect_range", range="Data!D2:D3").observation.text
    assert "D2 = =B2*C2 → 7.5" in after and "D3 = =B3*C3 → 20" in after
    found = step(env, "find_cells", pattern=r"^item-[24]$").observation.text
    assert "Data!A3 = item-2" in found and "Data!A5 = item-4" in found
    step(env, "write_range", range="Summary!C1", values="=SUM(Data!D2:D5)")
    state = env.get_env_state()
    assert state["recalculated"] is False and state["cells_written"] == 1 and state["written_ranges"] == ["Summary!C1"]
    assert "C1 = =SUM(Data!D2:D5) → (not recalculated)" in step(env, "inspect_range", range="Summary!C1").observation.text
    step(env, "recalculate")
    assert "→ 56.15" in step(env, "inspect_range", range="Summary!C1").observation.text


@pytest.mark.parametrize(("args", "kind"), [
    ({"range": "Nope!A1", "values": 1}, "No sheet 'Nope'"),
    ({"range": "Data!A1:B2", "values": [1, 2, 3]}, "do not fit"),
    ({"range": "Data!A1:B2", "values": [[1, 2], [3, {"x": 1}]]}, "must be strings, numbers"),
    ({"range": "Data!A1", "values": "bad\x01char"}, "refused"),
    ({"range": "Data!A1", "values": "x" * 40000}, "32767"),
    ({"range": "Data!A1:ZZ999", "values": 0}, "at most 20000"),
    ({"range": "Data!XFE1", "values": 0}, "outside a worksheet"),
    ({"range": "A1:B", "values": 0}, "not a cell reference"),
    ({"range": "Data!A1", "fill_color": "yellow"}, "hex RGB"),
    ({"range": "Data!A1"}, "Nothing to write"),
    ({"range": "'New[1]'!A1", "values": 1, "create_sheet": True}, "not a valid sheet name"),
])
def test_failed_writes_change_nothing(env, args, kind):
    env.reset(task=T1, seed=0)
    before = digest(env)
    resp = env.step(Action(tool="write_range", args=args))
    assert resp.info["error"]["type"] == "workbook_error" and kind in resp.observation.text
    assert digest(env) == before and env.get_env_state()["edits"] == 0


def test_validate_finds_error_values(env):
    env.reset(task=T1, seed=0)
    step(env, "write_range", range="Summary!D1:D3", values=["=1/0", "=NOSUCHFUNC(1)", "=Data!B2*2"])
    bad = step(env, "validate")
    assert bad.info["error"]["type"] == "validation_failed"
    assert "Summary!D1: #DIV/0!" in bad.observation.text and "Summary!D2: #NAME?" in bad.observation.text
    assert "D3" not in bad.observation.text
    state = env.get_env_state()
    assert state["validated"] is False and state["validation_problems"] == 2
    step(env, "write_range", range="Summary!D1:D2", values=[None, None])
    assert step(env, "validate").info == {} and env.get_env_state()["validated"] is True


def test_run_python_edits_and_reports(env):
    env.reset(task=T1, seed=0)
    resp = step(env, "run_python", code="import os, openpyxl\nwb = openpyxl.load_workbook(os.environ['WORKBOOK'])\n"
                                        "wb['Data']['F1'] = 'from code'\nwb.save(os.environ['WORKBOOK'])\n"
                                        "print(wb.sheetnames)")
    assert "['Data', 'Summary']" in resp.observation.text and not resp.info
    assert "F1 = from code" in step(env, "inspect_range", range="Data!F1").observation.text
    state = env.get_env_state()
    assert state["python_runs"] == 1 and state["edits"] == 1 and state["sheets"][0]["dimensions"] == "A1:F5"
    err = step(env, "run_python", code="import pandas as pd\nprint(pd.__version__)\nraise SystemExit(3)")
    assert err.info["error"]["type"] == "python_error" and "[exit code 3]" in err.observation.text
    assert "F1 = from code" in step(env, "inspect_range", range="Data!F1").observation.text


@pytest.mark.parametrize(("code", "expect", "kind"), [
    ("while True:\n    pass", "was killed", "timeout"),
    ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", "bytes of output cut", "timeout"),
    ("open('/work/workbook.xlsx', 'wb').write(b'garbage')", "refused", "workbook_refused"),
    ("import os\nos.remove('/work/workbook.xlsx')\nos.symlink('/etc/passwd', '/work/workbook.xlsx')",
     "no longer a regular file", "workbook_refused"),
    ("import os\nos.remove(os.environ['WORKBOOK'])", "deleted", "workbook_refused"),
    # a zip whose directory claims 300 MB of parts (a zip bomb, as far as the guard can tell)
    ("import zipfile\nz = zipfile.ZipFile('/work/workbook.xlsx', 'w')\nz.writestr('xl/workbook.xml', b'<w/>')\n"
     "z.infolist()[0].file_size = 300 << 20\nz.close()", "unpacks to", "workbook_refused"),
    ("x = bytearray(4 << 30)", "MemoryError", "python_error"),
    # a workbook too big for the host-side tools: a sheet part with 510k cells, 20 KB zipped
    ("import zipfile\nz = zipfile.ZipFile('/work/workbook.xlsx', 'a', zipfile.ZIP_DEFLATED)\n"
     "z.writestr('xl/worksheets/sheet9.xml', b'<c r=\"A1\"/>' * 510000)\nz.close()",
     "more than 500000 cells", "workbook_refused"),
    ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)", "exit code 1", "python_error"),
    ("import os\nos.kill(os.getppid(), 9)", "runner died", "python_error"),
])
def test_hostile_code_is_contained(env, short_env, code, expect, kind):
    env = short_env if kind == "timeout" else env
    env.reset(task=T1, seed=0)
    before = digest(env)
    t0 = time.perf_counter()
    resp = step(env, "run_python", code=code)
    assert time.perf_counter() - t0 < 30
    assert expect in resp.observation.text and resp.info["error"]["type"] == kind
    assert len(resp.observation.text) < 20_000
    assert digest(env) == before
    ok = step(env, "run_python", code="print('still here')")  # the sandbox serves the next call
    assert "still here" in ok.observation.text


def test_code_runs_unprivileged(env):
    """Root with Docker's default capabilities could make device nodes, chown, bypass file
    modes; the code runs as nobody with no capabilities and no way to gain any."""
    env.reset(task=T1, seed=0)
    code = ("import os, stat\nst = dict(l.split(':\\t') for l in open('/proc/self/status').read().splitlines()"
            " if ':\\t' in l)\nprint('uid', os.getuid(), 'cap', st['CapEff'].strip(), 'nnp', st['NoNewPrivs'].strip())"
            "\ntry:\n    os.mknod('/tmp/disk', stat.S_IFBLK | 0o600, os.makedev(8, 0))\n    print('mknod ok')\n"
            "except OSError as e:\n    print('mknod refused', e.errno)\n"
            "import openpyxl\nwb = openpyxl.load_workbook(os.environ['WORKBOOK'])\nwb['Data']['F1'] = 'ok'\n"
            "wb.save(os.environ['WORKBOOK'])")
    out = step(env, "run_python", code=code).observation.text
    assert "uid 65534 cap 0000000000000000 nnp 1" in out and "mknod refused" in out, out
    assert "F1 = ok" in step(env, "inspect_range", range="Data!F1").observation.text


def test_code_cannot_forge_runner_replies(env):
    """The code runs as the runner's user: it could open /proc/<runner>/fd/1 and write a
    reply of its own. A forged runner_error raised an InfraError (the policy's doing blamed
    on the infrastructure, also during grading) and every later call got the reply before
    its own."""
    env.reset(task=T1, seed=0)
    forge = ("import os\nfor fd in (1, 2):\n    try:\n"
             "        f = open('/proc/%d/fd/%d' % (os.getppid(), fd), 'w')\n"
             "        f.write('{\"runner_error\": \"forged\"}\\n{\"exit_code\": 0, \"output\": \"forged\"}\\n')\n"
             "        f.flush()\n        print('wrote', fd)\n    except OSError as e:\n        print('refused', fd, e.errno)\n")
    resp = step(env, "run_python", code=forge)
    assert "refused 1" in resp.observation.text and "forged" not in resp.observation.text
    nxt = step(env, "run_python", code="print('my own reply')")
    assert nxt.observation.text.startswith("my own reply") and not nxt.info
    verdict = env.evaluate()  # replays nothing forged either
    assert verdict.metrics["test_case_results"] == [0]


@pytest.mark.parametrize("code", [
    "import os\nos.remove('/tmp/envh_step.py')\nos.mkdir('/tmp/envh_step.py')",
    "import os\nos.remove('/work/workbook.xlsx')\nos.makedirs('/work/workbook.xlsx/x')\nos.chmod('/work/workbook.xlsx', 0)",
    "import os\nos.makedirs('/work/sub/deep')\nos.chmod('/work/sub', 0)",
])
def test_code_that_sabotages_the_runners_files_fails_only_itself(env, code):
    """The runner writes the code to /tmp and the workbook to /work; a directory left at
    either path (locked with chmod 0) made the next call a 'sandbox runner error', an
    InfraError, for the policy's own doing (in grading replays too)."""
    env.reset(task=T1, seed=0)
    step(env, "run_python", code=code)
    nxt = step(env, "run_python", code="import os\nprint('next ok', sorted(os.listdir('/work')))")
    assert "next ok ['workbook.xlsx']" in nxt.observation.text and not nxt.info


def test_fork_bomb_is_bounded(env):
    env.reset(task=T1, seed=0)
    code = "import os\nfor _ in range(10000):\n    try:\n        os.fork()\n    except OSError:\n        break\n"
    t0 = time.perf_counter()
    step(env, "run_python", code=code)
    assert time.perf_counter() - t0 < 30
    assert "still here" in step(env, "run_python", code="print('still here')").observation.text


def test_multiple_test_cases_replay_the_solution(env):
    # literal values of case 1 pass case 1 only: the grader replays them on cases 2 and 3
    env.reset(task=T3, seed=0)
    step(env, "write_range", range="Summary!B1", values=56.15, fill_color="FFFF00")
    step(env, "write_range", range="Summary!B2", values="=B3+30")
    step(env, "write_range", range="Data!E2:E5", values=[8.25, 22, 22.275, 9.24], font_color="FF0000")
    verdict = env.evaluate()
    assert verdict.metrics["test_case_results"] == [1, 0, 0]
    assert not verdict.success and verdict.score == pytest.approx(1 / 3) and verdict.metrics["pass_at_1"] == 0
    assert set(verdict.metrics["failures"]) == {"2", "3"}
    # generic code passes all three
    env.reset(task=T3, seed=0)
    assert not env.evaluate().success  # the unsolved workbook fails
    step(env, "run_python", code=SOLUTION_CODE)
    done = step(env, "submit")
    assert done.terminated and done.reward == 1.0
    assert env.evaluate().metrics["test_case_results"] == [1, 1, 1]
    assert step(env, "list_sheets").info["error"]["type"] == "episode_over"


def test_native_reference_solution_on_every_case(env):
    env.reset(task=T3, seed=0)
    for op in NATIVE_SOLUTION:
        assert not env.step(Action(tool=op["tool"], args=op["args"])).info
    verdict = env.evaluate()
    assert verdict.success and verdict.metrics["mean_score"] == 1.0


def test_gold_never_leaks(env):
    # answer_position is no secret: the benchmark's prompts give it, and so does the first
    # observation by default (show_answer_position); the golden values stay hidden
    secrets = ["56.15", "8.25", "22.275", "9.24", "2024-02-14", "45336"]
    seen = []
    for task in (T3, T1):
        seen.append(env.reset(task=task, seed=0).observation.text)
        for action in [Action(tool="list_sheets"), Action(tool="recalculate"),
                       Action(tool="inspect_range", args={"range": "Data!A1:Z50"}),
                       Action(tool="inspect_range", args={"range": "Summary!A1:Z50"}),
                       Action(tool="find_cells", args={"pattern": "."}), Action(tool="validate"),
                       Action(tool="run_python", args={"code": "import os; print(os.listdir('/work'), os.listdir('/'))"}),
                       Action(tool="submit")]:
            resp = env.step(action)
            seen += [resp.observation.text, json.dumps(dict(resp.observation.data)), json.dumps(resp.info, default=str),
                     json.dumps(env.get_env_state())]
    blob = "\n".join(seen)
    for secret in secrets:
        assert secret not in blob
    assert "answer.xlsx" not in blob and env.workdir not in blob


def test_recalculation_failure_in_grading_is_infra(env, monkeypatch, tmp_path):
    env.reset(task=T1, seed=0)
    step(env, "write_range", range="Summary!E9", values="=2+2")  # content no cache has seen
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(errors.InfraError, match="LibreOffice"):
        env.evaluate()
    with pytest.raises(errors.InfraError):  # raised, never blamed on the policy
        step(env, "recalculate")


def test_a_workbook_that_stalls_libreoffice_is_the_policys_failure(sheet_data, soffice, docker_ready):
    """Formulas that keep the office busy past the limit fail the policy's case (and the
    recalculate tool), they are not passed off as an infrastructure error."""
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    with SpreadsheetBenchEnv(sheet_data) as env:
        env.reset(task=T1, seed=0)
        assert not env.evaluate().success  # golden files recalculated (and cached) at the normal limit
        env.recalc_timeout = 3
        step(env, "write_range", range="Summary!F1:F300", values="=SUMPRODUCT(ROW(A1:A1048576)*1)+RAND()")
        resp = step(env, "recalculate")
        assert resp.info["error"]["type"] == "workbook_error" and "could not recalculate" in resp.observation.text
        verdict = env.evaluate()
        assert not verdict.success and "could not recalculate" in verdict.metrics["failures"]["1"]


def test_daemons_do_not_outlive_their_call(env):
    """A process that escapes the call's process group (setsid) is swept before the next
    call, so it cannot tamper with later calls or with the grader's replays."""
    env.reset(task=T1, seed=0)
    daemon = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              "        while True:\n            open('/work/workbook.xlsx', 'wb').write(b'sabotage')\n"
              "            time.sleep(0.01)\n    os._exit(0)\n")
    step(env, "run_python", code=daemon)
    good = step(env, "run_python", code="import os, time, openpyxl\ntime.sleep(0.5)\n"
                                         "wb = openpyxl.load_workbook(os.environ['WORKBOOK'])\n"
                                         "wb['Data']['G1'] = 'kept'\nwb.save(os.environ['WORKBOOK'])")
    assert not good.info.get("error"), good.observation.text
    assert "G1 = kept" in step(env, "inspect_range", range="Data!G1").observation.text
    ps = step(env, "run_python", code="import os\nprint(sorted(open(f'/proc/{p}/cmdline').read().split(chr(0))[0] "
                                      "for p in os.listdir('/proc') if p.isdigit()))")
    assert "sabotage" not in ps.observation.text and ps.observation.text.count("python3") <= 3


def test_containers_are_removed_and_orphans_collected(sheet_data, soffice, docker_ready):
    from envh_office import sandbox
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    c = sandbox.client()

    def ours():
        return [b.name for b in c.containers.list(all=True, filters={"label": sandbox.LABEL})
                if b.labels.get(sandbox.OWNER_LABEL) == sandbox.owner_token()]

    before = set(ours())
    env = SpreadsheetBenchEnv(sheet_data)
    env.reset(task=T1, seed=0)
    step(env, "run_python", code="print(1)")
    box = env.box.container.name
    assert box in ours()
    inspect = c.api.inspect_container(box)["HostConfig"]
    assert inspect["NetworkMode"] == "none" and inspect["ReadonlyRootfs"] and inspect["PidsLimit"] == 128
    assert inspect["Memory"] == 1 << 30 and inspect["NanoCpus"] == 10**9
    assert inspect["CapDrop"] == ["ALL"] and inspect["SecurityOpt"] == ["no-new-privileges"]
    assert c.api.inspect_container(box)["Config"]["User"] == "65534:65534"
    env.close()
    assert set(ours()) <= before
    # a container left by a process that is gone (another pid, a start time that never was)
    dead = c.containers.run(sandbox.IMAGE, ["sleep", "infinity"], detach=True, network_mode="none",
                            name=f"envh-office-orphan-{uuid.uuid4().hex[:8]}",
                            labels={sandbox.LABEL: "episode", sandbox.OWNER_LABEL: f"{socket.gethostname()}:999999:1"})
    try:
        assert dead.name in sandbox.cleanup_orphans(c)
    finally:
        try:
            dead.remove(force=True)
        except Exception:  # noqa: BLE001 - already removed, as expected
            pass


def test_write_range_can_create_a_sheet(env):
    env.reset(task=T1, seed=0)
    step(env, "write_range", range="'Report 2024'!A1:B1", values=["Total", "=SUM(Data!D2:D5)"], create_sheet=True)
    assert [s["name"] for s in env.get_env_state()["sheets"]] == ["Data", "Summary", "Report 2024"]
    step(env, "recalculate")
    assert "B1 = =SUM(Data!D2:D5) → 56.15" in step(env, "inspect_range", range="'Report 2024'!A1:B1").observation.text


KILL_MAIN = ("import os, signal, time\n"
             "pids = [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
             "main = min(p for p in pids if open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1] == '1')\n"
             "os.kill(main, signal.SIGKILL)\ntime.sleep(30)\n")  # still running when the container goes


def test_code_that_stops_the_container_is_the_policys_error(env):
    env.reset(task=T3, seed=0)
    step(env, "run_python", code="print(1)")
    first = env.box.container.name
    resp = step(env, "run_python", code=KILL_MAIN)
    assert resp.info["error"]["type"] == "sandbox_stopped" and not resp.terminated
    ok = step(env, "run_python", code="print('fresh-sandbox-ok')")
    assert "fresh-sandbox-ok" in ok.observation.text and not ok.info
    assert env.box.container.name != first
    # the same code inside the solution: replaying it on cases 2 and 3 fails those cases, not the run
    env.reset(task=T3, seed=0)
    step(env, "run_python", code=SOLUTION_CODE)
    env.ops.append({"tool": "run_python", "args": {"code": KILL_MAIN}})  # as if it had run on case 1 unharmed
    verdict = env.evaluate()  # no InfraError: the stopped sandbox is the solution's doing
    assert verdict.metrics["test_case_results"] == [1, 0, 0]
    assert "stopped the sandbox" in verdict.metrics["failures"]["2"]


def test_no_docker_daemon_is_an_infra_error(sheet_data, soffice, tmp_path):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    with SpreadsheetBenchEnv(sheet_data, docker_url=f"unix://{tmp_path}/no-docker.sock") as env:
        env.reset(task=T1, seed=0)
        assert "Data!A2 = item-1" in step(env, "find_cells", pattern="item-1").observation.text  # native: no docker
        with pytest.raises(errors.InfraError, match="Cannot reach the Docker daemon"):
            step(env, "run_python", code="print(1)")
