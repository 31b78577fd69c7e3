"""In-container runner for ``run_python``: one long-lived ``python3`` per episode container.

The host starts it once (``docker exec -i python3 -u -c <this source>``) and sends one
JSON request per line: the workbook (base64) and the code. The runner writes the workbook
to ``/work/workbook.xlsx``, runs the code as a fresh ``python3`` child in its own process
group (address-space limit, wall-clock timeout, output kept head + tail), then answers one
JSON line with the exit code, the output, and the workbook as the code left it
(base64; ``null`` when it is missing, not a regular file, or too large). Standard library
only: it runs on the image's interpreter.
"""

import base64
import json
import os
import resource
import selectors
import signal
import stat
import subprocess
import sys
import time

WORK = "/work"
BOOK = WORK + "/workbook.xlsx"
CODE = "/tmp/envh_step.py"


def _limits(mem):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _sweep():
    """Kill what earlier calls left running outside their process group (a daemon that
    called setsid), so every call starts alike. Spared: init (1), the container's main
    process (init's first child: the lowest pid whose parent is 1, even before it has
    exec'd), and every ``docker exec`` (parent 0), this runner included."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                procs[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    children_of_init = [pid for pid, ppid in procs.items() if ppid == 1]
    keep = {1, os.getpid(), min(children_of_init, default=0)}
    for pid, ppid in procs.items():
        if pid in keep or ppid == 0:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _remove(path):
    """Delete ``path`` whatever earlier code made of it (a directory it locked with chmod 0
    included: everything here belongs to the runner's user)."""
    if os.path.isdir(path) and not os.path.islink(path):
        subprocess.call(["chmod", "-R", "u+rwx", path], stderr=subprocess.DEVNULL)
        subprocess.call(["rm", "-rf", path], stderr=subprocess.DEVNULL)
    elif os.path.lexists(path):
        os.unlink(path)


def run(req):
    limit = max(int(req.get("limit", 16000)), 256)
    _sweep()
    for name in os.listdir(WORK):  # each call starts from the host's copy only
        _remove(os.path.join(WORK, name))
    with open(BOOK, "wb") as f:
        f.write(base64.b64decode(req["workbook"]))
    # what earlier code left at the code's path, or a /tmp it filled, is that code's doing:
    # cleared here, never reported as a runner failure
    _remove(CODE)
    try:
        with open(CODE, "w") as f:
            f.write(req["code"])
    except OSError:
        for name in os.listdir("/tmp"):
            _remove(os.path.join("/tmp", name))
        with open(CODE, "w") as f:
            f.write(req["code"])
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
           "WORKBOOK": BOOK, "PYTHONDONTWRITEBYTECODE": "1",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MPLCONFIGDIR": "/tmp"}
    proc = None
    for attempt in range(20):  # pids still held by a previous call's processes: wait for them
        try:
            proc = subprocess.Popen([sys.executable, CODE], cwd=WORK, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_limits(int(req.get("memory", 1 << 30))))
            break
        except OSError as exc:
            if attempt == 19:
                return {"exit_code": -1, "output": f"python could not start: {exc}\n", "timed_out": False,
                        "dropped": 0, "workbook": None, "workbook_problem": "the code did not run"}
            time.sleep(0.1)
    deadline = time.monotonic() + float(req.get("timeout", 60))
    head, tail, dropped, keep_tail = bytearray(), bytearray(), 0, limit // 2
    timed_out, exited_at = False, None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = time.monotonic()
        if exited_at is not None and time.monotonic() - exited_at > 0.2:
            break  # a background child keeps the pipe open: stop soon after the code exits
        if not sel.select(min(left, 0.05)):
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        room = limit - keep_tail - len(head)
        if room > 0:
            head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            tail += chunk
            if len(tail) > keep_tail:
                dropped += len(tail) - keep_tail
                del tail[:len(tail) - keep_tail]
    sel.close()
    if not timed_out:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.stdout.close()
    code = proc.wait()
    gone = time.monotonic() + 5
    while time.monotonic() < gone:  # the group's last members (a fork bomb's) are reaped by init
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            break
        time.sleep(0.02)
    out = head.decode("utf-8", "replace")
    if dropped:
        out += f"\n[... {dropped} bytes of output cut ...]\n"
    out += tail.decode("utf-8", "replace")
    book, problem = None, None
    try:
        st = os.lstat(BOOK)
        if not stat.S_ISREG(st.st_mode):
            problem = "workbook.xlsx is no longer a regular file"
        elif st.st_size > int(req.get("max_bytes", 32 << 20)):
            problem = f"workbook.xlsx grew to {st.st_size} bytes"
        else:
            with open(BOOK, "rb") as f:
                book = base64.b64encode(f.read()).decode()
    except FileNotFoundError:
        problem = "workbook.xlsx was deleted"
    return {"exit_code": code, "output": out, "timed_out": timed_out, "dropped": dropped,
            "workbook": book, "workbook_problem": problem}


def _private():
    """Make this process non-dumpable: the code runs as the same user, and could otherwise
    open /proc/<runner>/fd/1 and write lines of its own into the reply stream (a forged
    'runner_error' reads as an infrastructure failure, and every later reply is off by one)."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _private()
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = run(json.loads(line))
        except Exception as exc:  # a runner failure must answer, not hang the host
            reply = {"runner_error": repr(exc)}
        try:  # the host matches each reply to its request by this token
            reply["nonce"] = json.loads(line).get("nonce")
        except ValueError:
            pass
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
