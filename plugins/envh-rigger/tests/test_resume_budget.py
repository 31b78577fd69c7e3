"""Resume after SIGKILL (a real subprocess) and budget stops."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from envh.testing_llm import LLMReplayServer, tool_reply
from envh_rigger.budget import Budget
from envh_rigger.journal import Journal
from envh_rigger.run import RigConfig, rig

TASKS = "medium/1,2,6,6;medium/3,3,5,10;medium/2,3,6,13"
SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import envh, envh_rigger.hooks, rig_policies
from envh.plugins import set_registry
from envh_rigger.run import RigConfig, rig
reg = envh.make_plugin_manager(entry_points=False, plugins=[envh_rigger.hooks, rig_policies])
set_registry(reg)
config = RigConfig(policy="coin", policy_options={{"delay": float(sys.argv[2])}}, tasks={tasks!r},
                   out=sys.argv[1], resume=sys.argv[3] == "resume")
print(json.dumps(rig(config, registry=reg)))
"""


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # table not created yet
        return 0
    finally:
        con.close()


def test_resume_after_sigkill_redoes_no_finished_work(tmp_path):
    script = tmp_path / "rig_run.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent), tasks=TASKS))
    out, db = tmp_path / "run", tmp_path / "run" / "trajectories.sqlite"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    log = (tmp_path / "first.log").open("w")
    proc = subprocess.Popen([sys.executable, str(script), str(out), "0.03", "fresh"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    # kill once the first task is accepted and the second one is halfway through
    while time.monotonic() < deadline and proc.poll() is None:
        if (_count(db, "SELECT COUNT(*) FROM rig_journal WHERE kind = 'accepted'") >= 1
                and _count(db, "SELECT COUNT(*) FROM trajectories WHERE task LIKE '%3,3,5,10'") >= 7):
            break
        time.sleep(0.05)
    assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log.close()
    before = _count(db, "SELECT COUNT(*) FROM trajectories")
    first_pid_rows = _count(db, "SELECT COUNT(*) FROM trajectories WHERE task LIKE '%1,2,6,6'")
    assert before >= 12

    res = subprocess.run([sys.executable, str(script), str(out), "0.03", "resume"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(summary["stops"].values()) == {"accepted"}, summary
    journal = Journal(out)
    for task in ("toy24/medium/1,2,6,6", "toy24/medium/3,3,5,10", "toy24/medium/2,3,6,13"):
        assert len(journal.events(task, "accepted")) == 1
        assert len(journal.events(task, "task_done")) == 1
    assert len(journal.events("toy24/medium/1,2,6,6", "baseline")) == 1  # accepted work not redone
    # the store takes one episode per key: replaying a stored episode would have failed the run
    assert _count(db, "SELECT COUNT(*) FROM trajectories WHERE task LIKE '%1,2,6,6'") == first_pid_rows
    assert _count(db, "SELECT COUNT(*) FROM trajectories") > before
    assert summary["usage"]["rollouts"] == _count(db, "SELECT COUNT(*) FROM trajectories")


def test_rollout_budget_stops_and_resume_continues(registry, tmp_path):
    out = str(tmp_path / "run")
    summary = rig(RigConfig(policy="coin", tasks=TASKS, out=out, budget=Budget(max_rollouts=8)),
                  registry=registry)
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "budget:rollouts"}
    assert summary["usage"]["rollouts"] <= 8
    assert "budget:rollouts" in (tmp_path / "run" / "report.md").read_text()
    resumed = rig(RigConfig(policy="coin", tasks=TASKS, out=out, resume=True, budget=Budget(max_rollouts=200)),
                  registry=registry)
    assert set(resumed["stops"].values()) == {"accepted"}


def test_wall_clock_budget(registry, tmp_path):
    summary = rig(RigConfig(policy="coin", tasks=TASKS, out=str(tmp_path / "r"),
                            budget=Budget(max_seconds=0.0)), registry=registry)
    assert summary["stops"] == {"toy24/medium/1,2,6,6": "budget:wall_clock"}
    assert summary["usage"]["rollouts"] == 0


def test_token_and_dollar_budgets_stop_the_llm_designer(registry, tmp_path):
    explain = tool_reply("explain", {"failure_axis": "S0", "rationale": "x"},
                         usage={"prompt_tokens": 400_000, "completion_tokens": 100_000, "total_tokens": 500_000})
    bad = tool_reply("propose_candidate", {"diagnosis": "d", "rationale": "r", "layers": [
        {"kind": "contract", "code": "import os\ndef filter_action(a, s, m):\n    return None\n"}]},
        usage={"prompt_tokens": 400_000, "completion_tokens": 100_000, "total_tokens": 500_000})
    for budget, reason in ((Budget(max_tokens=600_000), "budget:tokens"),
                           (Budget(max_dollars=1.0, prices={"priced": [1.0, 4.0]}), "budget:dollars")):
        with LLMReplayServer([explain, bad] * 3) as server:
            summary = rig(RigConfig(policy="coin", tasks="medium/1,2,6,6", designer="llm:priced",
                                    designer_options={"base_url": server.base_url, "api_key": "k"},
                                    out=str(tmp_path / reason), budget=budget), registry=registry)
        assert summary["stops"] == {"toy24/medium/1,2,6,6": reason}
        assert summary["usage"]["llm_calls"] == 2
    # two calls: 800k prompt tokens at $1/M plus 200k completion tokens at $4/M
    assert summary["usage"]["dollars"] == pytest.approx(1.6)
