"""Per-step latency of the swebench bridge's ``bash`` tool vs a raw ``docker exec`` CLI
subprocess per step (what the reference SWE-bench agents do), on the same container in
the same run (interleaved rounds, median per step); plus container start-to-first-
observation time of ``reset()``.

Two configurations of the tool are measured: the default (after each command a git
fingerprint of the working tree for ``files_touched``/edit counting, and the disk bound
of ``disk_mode: auto``) and a lean one (``track_files=False, disk=None``), so the cost of
that bookkeeping shows on its own. ``reset()`` is timed per disk mode: the default
(``auto``: storage-opt where the daemon can, else a tmpfs workspace filled by a helper
container), ``check`` (per-file bound plus a layer-size check after each step) and no
disk bound, so the cost of the real bound shows against both.

Needs dockerd and the test images (``source dev/setup.d/docker.sh``).
Last line: JSON with ``ratio`` = default bash-tool ms/step ÷ raw ``docker exec`` CLI ms/step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from envh import Action, TaskRef, grant, make

INSTANCES = Path(__file__).resolve().parents[1] / "plugins/envh-swebench/tests/images/mathx/instances.json"
TASK = TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")
COMMAND = "ls -la mathx && git log --oneline -1"


def tool_ms(env, steps: int) -> float:
    action = Action(tool="bash", args={"command": COMMAND})
    t0 = time.perf_counter()
    for _ in range(steps):
        resp = env.step(action)
        assert resp.observation.data["exit_code"] == 0, resp.observation.text
    return (time.perf_counter() - t0) / steps * 1e3


def cli_ms(container_id: str, workdir: str, steps: int) -> float:
    argv = ["docker", "exec", "-w", workdir, container_id, "bash", "-c", COMMAND]
    t0 = time.perf_counter()
    for _ in range(steps):
        subprocess.run(argv, capture_output=True, check=True)
    return (time.perf_counter() - t0) / steps * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20, help="steps per round and variant")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--resets", type=int, default=5)
    p.add_argument("--instances", default=str(INSTANCES))
    args = p.parse_args()
    grant(args.instances)  # the caller named them

    env = make({"bridge": "swebench", "config": {"instances": args.instances}})
    lean_env = make({"bridge": "swebench", "config": {"instances": args.instances,
                                                      "track_files": False, "disk": None}})
    check_env = make({"bridge": "swebench", "config": {"instances": args.instances, "disk_mode": "check"}})
    by_mode: dict[str, list[float]] = {"default": [], "check": [], "none": []}
    starts: list[float] = []
    try:
        for _ in range(args.resets):  # interleaved, as the steps below
            for mode, e in (("default", env), ("check", check_env), ("none", lean_env)):
                t0 = time.perf_counter()
                result = e.reset(task=TASK, seed=0)
                by_mode[mode].append((time.perf_counter() - t0) * 1e3)  # the last container goes in the background
                if mode == "default":
                    starts.append(result.info["start_to_first_observation"] * 1e3)
        resets = by_mode["default"]
        inner = env.unwrapped
        mode_name = inner.box.disk_mode
        box = inner.box
        tool, lean, cli = [], [], []
        tool_ms(env, 3)
        tool_ms(lean_env, 3)
        cli_ms(box.container.id, box.workdir, 3)  # warm every path
        for _ in range(args.rounds):  # interleave so machine noise hits all alike
            tool.append(tool_ms(env, args.steps))
            lean.append(tool_ms(lean_env, args.steps))
            cli.append(cli_ms(box.container.id, box.workdir, args.steps))
    finally:
        env.close()
        lean_env.close()
        check_env.close()

    t, c, le = statistics.median(tool), statistics.median(cli), statistics.median(lean)
    s, r = statistics.median(starts), statistics.median(resets)
    print(f"bash tool (default)  : {t:8.2f} ms/step  (runner session in the container, plus git "
          f"status + tree fingerprint; disk mode here: {mode_name})")
    print(f"bash tool (lean)     : {le:8.2f} ms/step  (track_files=False, disk=None)")
    print(f"docker exec CLI      : {c:8.2f} ms/step  (one subprocess per step)")
    print(f"start to first obs.  : {s:8.2f} ms      (container create + start + runner ready)")
    print(f"reset()              : {r:8.2f} ms      (disk mode {mode_name}; the previous container is removed "
          "in the background)")
    for mode in ("check", "none"):
        print(f"reset() disk {mode:6}   : {statistics.median(by_mode[mode]):8.2f} ms")
    print(json.dumps({"bench": "swebench_exec", "bash_tool_ms_per_step": round(t, 3),
                      "docker_exec_cli_ms_per_step": round(c, 3), "ratio": round(t / c, 3),
                      "lean_bash_tool_ms_per_step": round(le, 3), "lean_ratio": round(le / c, 3),
                      "start_to_first_observation_ms": round(s, 1), "reset_ms": round(r, 1),
                      "disk_mode": mode_name, "reset_ms_check": round(statistics.median(by_mode["check"]), 1),
                      "reset_ms_no_disk_bound": round(statistics.median(by_mode["none"]), 1),
                      "steps": args.steps * args.rounds}))


if __name__ == "__main__":
    main()
