"""Headless LibreOffice recalculation, cached by workbook content.

LibreOffice opens each workbook, recalculates every formula and writes it back with
cached values, which ``openpyxl`` reads with ``data_only=True``. Two ways, same result:

* warm (default when the system ``python3`` has Debian's ``python3-uno``): one
  ``soffice`` per process, started on first use and driven over UNO by ``_lo_helper``
  (``calculateAll`` then store), about a tenth of a second per workbook;
* cold: ``soffice --headless --convert-to xlsx`` per batch (the private profile sets
  "recalculate on load: always"), seconds per call.

LibreOffice runs jailed with bubblewrap when ``bwrap`` works here: no network (formulas
such as ``WEBSERVICE`` cannot reach the host's services or the internet), only ``/usr``,
a few ``/etc`` entries and its private folder visible (``INDIRECT`` into host files finds
nothing). Each process uses its own profile folder (removed at exit) and one conversion
at a time, so it never collides with another soffice. Results are cached on disk by a hash of
the workbook's parts (``docProps`` excluded: saving stamps a time there), so the golden
workbooks are recalculated once. Any failure is ``envh.errors.InfraError``: a broken
recalculation is never the policy's fault.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

from envh import errors

XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" \
xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="OOXMLRecalcMode" oor:op="fuse">\
<value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load"><prop oor:name="ODFRecalcMode" oor:op="fuse">\
<value>0</value></prop></item>
</oor:items>
"""
_lock = threading.Lock()
_profile: str | None = None
_warm: dict[str, Any] = {}
_uno_ok: bool | None = None
stats: dict[str, Any] = {"conversions": 0, "workbooks": 0, "seconds": 0.0, "cache_hits": 0, "starts": 0, "jailed": False}
UNO_PYTHON = os.environ.get("ENVH_OFFICE_UNO_PYTHON", "/usr/bin/python3")


def soffice_path() -> str | None:
    return shutil.which("soffice") or shutil.which("libreoffice")


def cache_dir() -> Path:
    root = os.environ.get("ENVH_OFFICE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "envh-office")
    path = Path(root) / "recalc"
    path.mkdir(parents=True, exist_ok=True)
    return path


def content_key(path: str | os.PathLike[str]) -> str:
    """Hash of a workbook's parts, ignoring ``docProps/*`` and zip timestamps; the raw
    bytes' hash for a file that is not a zip."""
    h = hashlib.sha256(b"parts-v2\0")
    try:
        with zipfile.ZipFile(path) as z:
            for info in sorted(z.infolist(), key=lambda i: i.filename):
                if info.filename.startswith("docProps/"):
                    continue
                # each part framed by its name's and content's lengths: unframed, one part's
                # bytes could carry the next part's name and bytes, and two different workbooks
                # (one of them made by a policy) would share a cached recalculation
                name = info.filename.encode()
                h.update(len(name).to_bytes(8, "big") + name)
                part = hashlib.sha256()
                size = 0
                with z.open(info) as f:
                    for chunk in iter(lambda: f.read(1 << 16), b""):
                        part.update(chunk)
                        size += len(chunk)
                h.update(size.to_bytes(8, "big") + part.digest())
    except (zipfile.BadZipFile, OSError, RuntimeError, ValueError):
        h = hashlib.sha256(b"raw\0" + Path(path).read_bytes())
    return h.hexdigest()


def _remove_stale_profiles() -> None:
    """Profile folders of processes that are gone (killed before their atexit ran)."""
    for path in Path(tempfile.gettempdir()).glob("envh-office-lo-*-*"):
        pid = path.name.split("-")[3]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _profile_dir() -> str:
    global _profile
    if _profile is None:
        _remove_stale_profiles()
        _profile = tempfile.mkdtemp(prefix=f"envh-office-lo-{os.getpid()}-")
        user = Path(_profile) / "user"
        user.mkdir()
        (user / "registrymodifications.xcu").write_text(XCU)
        atexit.register(shutil.rmtree, _profile, True)
    return _profile


_ETC = ("fonts", "libreoffice", "ld.so.cache", "alternatives", "passwd", "group", "nsswitch.conf", "localtime")
_jail: list[str] | None = None


def jail() -> list[str]:
    """The bubblewrap prefix that confines LibreOffice ([] when bwrap is missing or cannot
    create namespaces here, or ``ENVH_OFFICE_RECALC_JAIL=0``)."""
    global _jail
    if _jail is None:
        base = _profile_dir()
        argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
                "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                *[a for e in _ETC for a in ("--ro-bind-try", f"/etc/{e}", f"/etc/{e}")],
                "--bind", base, base, "--setenv", "HOME", base, "--chdir", base]
        _jail = []
        if os.environ.get("ENVH_OFFICE_RECALC_JAIL", "1") != "0" and shutil.which("bwrap"):
            try:
                probe = subprocess.run([*argv, "/usr/bin/true"], capture_output=True, timeout=30)
                _jail = argv if probe.returncode == 0 else []
            except (OSError, subprocess.TimeoutExpired):
                pass
        stats["jailed"] = bool(_jail)
    return _jail


def recalculate(paths: list[str], *, timeout: float = 180.0) -> list[str]:
    """Recalculated copies of ``paths`` (same order), from the cache when present."""
    cache = cache_dir()
    keys = [content_key(p) for p in paths]
    todo = {k: p for k, p in zip(keys, paths) if not (cache / f"{k}.xlsx").exists()}
    stats["cache_hits"] += len(paths) - len(todo)
    if todo:
        _convert(todo, cache, timeout)
    return [str(cache / f"{k}.xlsx") for k in keys]


def _convert(todo: dict[str, str], cache: Path, timeout: float) -> None:
    exe = soffice_path()
    if exe is None:
        raise errors.InfraError("LibreOffice (soffice) is not installed; dev/setup.d/office.sh installs "
                                "Debian's libreoffice-calc-nogui.")
    xfer = Path(_profile_dir()) / "xfer"
    xfer.mkdir(exist_ok=True)
    with _lock, tempfile.TemporaryDirectory(prefix="recalc-", dir=xfer) as work:
        src, out = Path(work) / "in", Path(work) / "out"
        src.mkdir()
        out.mkdir()
        for key, path in todo.items():
            shutil.copyfile(path, src / f"{key}.xlsx")
        try:
            if _uno_available() and os.environ.get("ENVH_OFFICE_RECALC") != "cold":
                _convert_warm(exe, [(str(src / f"{k}.xlsx"), str(out / f"{k}.xlsx")) for k in todo], timeout)
            else:
                _convert_cold(exe, src, out, len(todo), timeout)
        except errors.InfraError as exc:
            raise errors.InfraError(_named(str(exc), todo, work)) from exc
        for key in todo:
            tmp = cache / f".{key}.{os.getpid()}.tmp"
            shutil.copyfile(out / f"{key}.xlsx", tmp)
            os.replace(tmp, cache / f"{key}.xlsx")


def _named(message: str, todo: dict[str, str], work: str) -> str:
    """``message`` with the office's working copies replaced by the files they copy."""
    for key, path in todo.items():
        for copy in (f"{work}/in/{key}.xlsx", f"{work}/out/{key}.xlsx", f"{key}.xlsx"):
            message = message.replace(copy, path)
    files = ", ".join(todo.values()) if len(todo) <= 5 else f"{', '.join(list(todo.values())[:5])}, ..."
    return f"{message} [workbook(s): {files}]"


def healthy(timeout: float = 120.0) -> bool:
    """Does LibreOffice recalculate a tiny fresh workbook (never from the cache)? Tells a
    broken office (infrastructure) from a workbook that breaks it (the policy's doing)."""
    import openpyxl

    with tempfile.TemporaryDirectory(prefix="envh-office-canary-") as tmp:
        path = os.path.join(tmp, "canary.xlsx")
        wb = openpyxl.Workbook()
        wb.active["A1"] = f"={time.monotonic_ns() % 1000003}+1"
        wb.save(path)
        exe = soffice_path()
        if exe is None:
            return False
        try:
            _convert({content_key(path): path}, Path(tmp), timeout)
        except errors.InfraError:
            return False
    return True


def _uno_available() -> bool:
    global _uno_ok
    if _uno_ok is None:
        try:
            _uno_ok = subprocess.run([UNO_PYTHON, "-c", "import uno"], capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _uno_ok = False
    return _uno_ok


def _read_line(proc: subprocess.Popen[bytes], buf: bytearray, deadline: float) -> bytes | None:
    """One line from the helper, or None at the deadline or when it exits."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


def _stop_warm() -> None:
    proc = _warm.pop("proc", None)
    _warm.pop("buf", None)
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


atexit.register(_stop_warm)


def _start_warm(exe: str) -> None:
    helper = str(resources.files("envh_office").joinpath("_lo_helper.py"))
    pipe = f"envh-office-{os.getpid()}-{time.monotonic_ns()}"
    source = Path(helper).read_text()
    proc = subprocess.Popen([*jail(), UNO_PYTHON, "-c", source, exe, _profile_dir(), pipe], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "HOME": _profile_dir(), "SAL_USE_VCLPLUGIN": "svp"})
    _warm.update(proc=proc, buf=bytearray())
    stats["starts"] += 1
    line = _read_line(proc, _warm["buf"], time.monotonic() + 180)
    if line is None or not json.loads(line).get("ready"):
        _stop_warm()
        raise errors.InfraError(f"LibreOffice did not start: {(line or b'no answer in 180 s').decode()[:500]}")


def _convert_warm(exe: str, pairs: list[tuple[str, str]], timeout: float) -> None:
    proc = _warm.get("proc")
    if proc is None or proc.poll() is not None:
        _stop_warm()
        _start_warm(exe)
        proc = _warm["proc"]
    t0 = time.perf_counter()
    try:
        proc.stdin.write(json.dumps({"files": pairs}).encode() + b"\n")
        proc.stdin.flush()
    except OSError as exc:
        _stop_warm()
        raise errors.InfraError(f"LibreOffice helper is gone: {exc}") from exc
    line = _read_line(proc, _warm["buf"], time.monotonic() + timeout)
    stats["conversions"] += 1
    stats["workbooks"] += len(pairs)
    stats["seconds"] += time.perf_counter() - t0
    if line is None:
        _stop_warm()
        raise errors.InfraError(f"LibreOffice recalculation timed out after {timeout:g} s "
                                f"({len(pairs)} workbook(s)); the office was restarted")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise errors.InfraError(f"LibreOffice recalculation failed: {reply.get('error', reply)}")


def _convert_cold(exe: str, src: Path, out: Path, count: int, timeout: float) -> None:
    argv = [*jail(), exe, f"-env:UserInstallation=file://{_profile_dir()}", "--headless", "--norestore",
            "--nolockcheck", "--calc", "--convert-to", "xlsx:Calc MS Excel 2007 XML", "--outdir", str(out),
            *sorted(str(p) for p in src.iterdir())]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "HOME": _profile_dir(), "SAL_USE_VCLPLUGIN": "svp"})
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise errors.InfraError(f"LibreOffice recalculation timed out after {timeout:g} s "
                                f"({count} workbook(s))") from None
    finally:
        try:  # soffice may leave helpers (oosplash children) in its group
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    stats["conversions"] += 1
    stats["workbooks"] += count
    stats["seconds"] += time.perf_counter() - t0
    missing = sum(1 for p in src.iterdir() if not (out / p.name).is_file())
    if proc.returncode != 0 or missing:
        text = (log or b"").decode("utf-8", "replace").strip()[-800:]
        raise errors.InfraError(f"LibreOffice recalculation failed (exit {proc.returncode}) for "
                                f"{missing} of {count} workbook(s): {text}")
