"""In-container command runner: one long-lived ``python3`` per episode container.

The host starts it once with ``docker exec -i python3 -u -c <this source>`` and then
sends one JSON request per line on stdin; each request runs as a fresh
``bash -c COMMAND`` in its own process group (so steps stay stateless, as in the
SWE-bench paper) and answers one JSON line on stdout. This saves a runtime ``exec``
(a new runc process, ~40 ms) per step. It uses only the standard library and runs on
any Python 3.6+ (f-strings, no walrus), because it executes with the image's interpreter, not the host's.

Request:  {"cmd": str, "cwd": str, "timeout": float, "limit": int, "env": {..},
           "post": str | null, "fsize": int | null, "witness": bool}
Response: {"exit_code": int, "output": str, "timed_out": bool, "dropped": int,
           "post_output": str | null, "witness": dict | null}
``post`` is a bookkeeping command run right after ``cmd`` (the bridge's ``git status``),
saving a round trip per step. ``fsize`` bounds every file the command writes
(RLIMIT_FSIZE; a larger write fails with EFBIG). ``witness``: the command runs the
test-run witness (``_witness.py``): before it starts, every process the policy left is
gone (the sweep), so nothing but the command itself can reach the two channels the
runner gives it, a fresh key on its stdin and a pipe named by ``ENVH_WITNESS_FD``; the
reply's ``witness`` is the report read from that pipe if its HMAC under the key holds.
"""

import hashlib
import hmac
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time


def run(req):
    limit = max(int(req.get("limit", 16000)), 64)
    env = dict(os.environ)
    env.update(req.get("env") or {})
    fsize = req.get("fsize")
    witness = bool(req.get("witness"))
    pipe, key = (os.pipe(), os.urandom(32).hex().encode()) if witness else (None, None)
    if witness:
        sweep(KEEP)  # nothing the policy started may be running while the witness is
        env["ENVH_WITNESS_FD"] = str(WITNESS_FD)
        try:  # a fixed number, so the command can keep the pipe from what runs before the witness
            os.fstat(WITNESS_FD)
            raise RuntimeError(f"fd {WITNESS_FD} is in use in the runner")
        except OSError:
            os.dup2(pipe[1], WITNESS_FD)
        os.close(pipe[1])
        pipe = (pipe[0], WITNESS_FD)

    def limit_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails, the shell lives
        if fsize:
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(fsize), int(fsize)))

    try:
        proc = subprocess.Popen(
            ["bash", "-c", req["cmd"]], cwd=req.get("cwd") or None, env=env,
            stdin=subprocess.PIPE if witness else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=limit_files,
            pass_fds=(pipe[1],) if witness else ())
    except OSError as exc:
        if witness:
            os.close(pipe[0])
            os.close(pipe[1])
        return {"exit_code": 127, "output": f"bash: {exc}\n", "timed_out": False, "dropped": 0}
    if witness:
        os.close(pipe[1])
        try:
            proc.stdin.write(key)
            proc.stdin.close()
        except OSError:  # the command exited before reading it
            pass
    deadline = time.monotonic() + float(req.get("timeout", 60))
    head, tail, dropped, keep_tail = bytearray(), bytearray(), 0, limit // 2
    timed_out, exited_at = False, None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        # Background jobs may keep the pipe open after the command exits: stop soon after.
        if exited_at is not None and now - exited_at > 0.2:
            break
        if not sel.select(min(deadline - now, 0.05)):
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
        try:  # output closed or the command exited: collect its status within the deadline
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    try:  # the command, or what it left running in the background
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.stdout.close()
    code = proc.wait()
    out = head.decode("utf-8", "replace")
    if dropped:
        out += f"\n[... {dropped} bytes of output truncated ...]\n"
    out += tail.decode("utf-8", "replace")
    reply = {"exit_code": code, "output": out, "timed_out": timed_out, "dropped": dropped,
             "post_output": None, "witness": _report(pipe[0], key) if witness else None}
    if req.get("post"):
        post = run({"cmd": req["post"], "cwd": req.get("cwd"), "env": req.get("env"),
                    "timeout": 60, "limit": 1_000_000})
        reply["post_output"] = post["output"] if post["exit_code"] == 0 else None
    return reply


def _report(fd, key):
    """The last line on the witness pipe whose HMAC holds, parsed; None if there is none."""
    os.set_blocking(fd, False)
    data = bytearray()
    try:
        while len(data) < 1 << 16:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:  # something the command started still holds the pipe open
        pass
    finally:
        os.close(fd)
    found = None
    for line in bytes(data).splitlines():
        mac, _, msg = line.partition(b" ")
        if hmac.compare_digest(mac, hmac.new(key, msg, hashlib.sha256).hexdigest().encode()):
            try:
                found = json.loads(msg)
            except ValueError:
                pass
    return found if isinstance(found, dict) else None


KEEP = set()
WITNESS_FD = 63  # where the witness finds its pipe (see the bridge's witnessed command)


def _pids():
    return set(int(d) for d in os.listdir("/proc") if d.isdigit())


def sweep(keep):
    """Kill every process that was not there when the runner started: what a command left
    behind outside its process group (``setsid``, ``nohup ... &`` in a new session) would
    otherwise outlive the step, racing the editor or filling the disk between steps.
    Stopped first, so a forking stray cannot outrun the kills."""
    for _ in range(20):
        strays = _pids() - keep - {os.getpid()}
        if not strays:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in strays:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        time.sleep(0.01)


def main():
    keep = KEEP
    given = os.environ.pop("ENVH_RUNNER_KEEP", None)
    if given is not None:  # a runner started again: the first one's list, not what runs now
        keep.update(int(p) for p in given.split())
    else:
        keep.update(_pids())  # the container's own processes (its init and main command)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sweep(keep)
    sys.stdout.write(json.dumps({"ready": True, "keep": sorted(keep)}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = run(json.loads(line))
            sweep(keep)
        except Exception as exc:  # a runner bug must answer, not hang the host
            reply = {"exit_code": -1, "output": "", "timed_out": False, "dropped": 0,
                     "runner_error": repr(exc)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
