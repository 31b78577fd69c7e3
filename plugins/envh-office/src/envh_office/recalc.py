"""Headless LibreOffice recalculation, cached by workbook content.

``soffice --headless --convert-to xlsx`` opens each workbook, recalculates every formula
(the private profile sets Calc's "recalculate on load: always" for OOXML) and writes it
back with cached values, which ``openpyxl`` reads with ``data_only=True``. Each process
uses its own LibreOffice profile (removed at exit) and one conversion at a time, so it
never collides with another soffice. Results are cached on disk by a hash of the
workbook's parts (``docProps`` excluded: saving stamps a time there), so the golden
workbooks are recalculated once. Any failure is ``envh.errors.InfraError``: a broken
recalculation is never the policy's fault.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import zipfile
from pathlib import Path

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
stats = {"conversions": 0, "workbooks": 0, "seconds": 0.0, "cache_hits": 0}


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
    h = hashlib.sha256()
    try:
        with zipfile.ZipFile(path) as z:
            for info in sorted(z.infolist(), key=lambda i: i.filename):
                if info.filename.startswith("docProps/"):
                    continue
                h.update(info.filename.encode() + b"\0")
                with z.open(info) as f:
                    for chunk in iter(lambda: f.read(1 << 16), b""):
                        h.update(chunk)
    except (zipfile.BadZipFile, OSError, RuntimeError, ValueError):
        h = hashlib.sha256(b"raw\0" + Path(path).read_bytes())
    return h.hexdigest()


def _profile_dir() -> str:
    global _profile
    if _profile is None:
        _profile = tempfile.mkdtemp(prefix=f"envh-office-lo-{os.getpid()}-")
        user = Path(_profile) / "user"
        user.mkdir()
        (user / "registrymodifications.xcu").write_text(XCU)
        atexit.register(shutil.rmtree, _profile, True)
    return _profile


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
    with _lock, tempfile.TemporaryDirectory(prefix="envh-office-recalc-") as work:
        src, out = Path(work) / "in", Path(work) / "out"
        src.mkdir()
        out.mkdir()
        for key, path in todo.items():
            shutil.copyfile(path, src / f"{key}.xlsx")
        argv = [exe, f"-env:UserInstallation=file://{_profile_dir()}", "--headless", "--norestore",
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
                                    f"({len(todo)} workbook(s))") from None
        finally:
            try:  # soffice may leave helpers (oosplash children) in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        stats["conversions"] += 1
        stats["workbooks"] += len(todo)
        stats["seconds"] += time.perf_counter() - t0
        missing = [k for k in todo if not (out / f"{k}.xlsx").is_file()]
        if proc.returncode != 0 or missing:
            text = (log or b"").decode("utf-8", "replace").strip()[-800:]
            raise errors.InfraError(f"LibreOffice recalculation failed (exit {proc.returncode}) for "
                                    f"{len(missing)} of {len(todo)} workbook(s): {text}")
        for key in todo:
            tmp = cache / f".{key}.{os.getpid()}.tmp"
            shutil.copyfile(out / f"{key}.xlsx", tmp)
            os.replace(tmp, cache / f"{key}.xlsx")
