"""SpreadsheetBench's comparison after real LibreOffice recalculation: formula values,
2-decimal rounding, date normalisation, no colour checks (the benchmark's are commented
out), multi-sheet positions; a broken recalculation is an infrastructure error naming the
dataset file."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import openpyxl
import pytest
from envh import errors
from envh_office import recalc
from envh_office.sheet_grading import compare_workbooks, transform_value, values_equal
from office_fixtures import _answer_book, _input_book
from openpyxl.styles import Font, PatternFill

POSITION = "'Summary'!B1:B2,Data!E2:E5"


@pytest.fixture(scope="module")
def books(tmp_path_factory, soffice):
    """Golden, unsolved and variously wrong outputs of case 1, all recalculated in one
    LibreOffice run (the module's warm-up)."""
    root = tmp_path_factory.mktemp("grading")
    paths = {}

    def save(name, wb):
        paths[name] = str(root / f"{name}.xlsx")
        wb.save(paths[name])

    save("gold", _answer_book(1))
    save("input", _input_book(1))
    wb = _answer_book(1)
    wb["Summary"]["B1"].fill = PatternFill(fill_type="solid", fgColor="00FF00", bgColor="00FF00")
    save("wrong_fill", wb)
    wb = _answer_book(1)
    wb["Data"]["E3"].font = Font(color="0000FF")
    save("wrong_font", wb)
    wb = _answer_book(1)
    wb["Summary"]["B2"] = "=B3+30"  # a serial number, no date format: the same day
    save("serial_date", wb)
    wb = _answer_book(1)
    wb["Summary"]["B2"] = "=B3+31"
    save("wrong_date", wb)
    wb = _answer_book(1)
    wb["Data"]["E2"] = 8.2549  # 8.25 after rounding to 2 decimals, as the gold 7.5*1.1
    save("rounded", wb)
    wb = _answer_book(1)
    wb["Data"]["E2"] = 8.26
    save("off_by_cent", wb)
    wb = _answer_book(1)
    del wb["Summary"]
    save("no_sheet", wb)
    names = list(paths)
    out = dict(zip(names, recalc.recalculate([paths[n] for n in names])))
    return {"raw": paths, "calc": out}


def test_formula_values_exist_only_after_recalculation(books):
    raw = openpyxl.load_workbook(books["raw"]["gold"], data_only=True)
    assert raw["Data"]["D2"].value is None and raw["Summary"]["B1"].value is None
    calc = openpyxl.load_workbook(books["calc"]["gold"], data_only=True)
    assert calc["Data"]["D2"].value == 7.5
    assert calc["Summary"]["B1"].value == pytest.approx(56.15)
    assert calc["Data"]["E4"].value == pytest.approx(22.275)


@pytest.mark.parametrize(("name", "passed", "reason"), [
    ("gold", True, ""),
    ("input", False, "value differs at Summary!B1"),
    ("wrong_fill", True, ""),   # evaluation.py@6e07492: compare_fill_color is commented out
    ("wrong_font", True, ""),   # and so is compare_font_color
    ("serial_date", True, ""),
    ("wrong_date", False, "value differs at Summary!B2"),
    ("rounded", True, ""),
    ("off_by_cent", False, "value differs at Data!E2"),
    ("no_sheet", False, "worksheet 'Summary' not found"),
])
def test_benchmark_comparison(books, name, passed, reason):
    verdict = compare_workbooks(books["calc"]["gold"], books["calc"][name], POSITION)
    assert (verdict.passed, verdict.reason) == (passed, reason)


def test_first_sheet_default(books):
    # no sheet in the position: the golden workbook's first sheet (Data), as upstream
    assert compare_workbooks(books["calc"]["gold"], books["calc"]["wrong_fill"], "E2:E5").passed
    assert not compare_workbooks(books["calc"]["gold"], books["calc"]["input"], "E2:E5").passed
    assert not compare_workbooks(books["calc"]["gold"], books["calc"]["input"], "'Summary'!B1:B2").passed
    # unbalanced quotes are stripped, as upstream strips them
    assert not compare_workbooks(books["calc"]["gold"], books["calc"]["input"], "'Summary!B1:B2'").passed
    assert compare_workbooks(books["calc"]["gold"], books["calc"]["gold"], "Summary'!B1:B2'").passed


def test_value_normalisation_rules():
    assert transform_value(datetime.time(9, 30)) == "09:30"
    assert transform_value(datetime.datetime(2024, 2, 14, 11)) == 45336.0
    assert transform_value(datetime.datetime(2024, 2, 14, 13)) == 45337.0  # half a day rounds up
    assert values_equal("3.14159", 3.14) and values_equal(None, "") and values_equal("", None)
    assert not values_equal("abc", 1) and not values_equal(None, 0) and not values_equal("1", "x")
    assert values_equal(True, 1)  # the benchmark rounds booleans as numbers


def test_recalculation_is_cached_by_content(books, tmp_path):
    copy = tmp_path / "copy.xlsx"
    wb = openpyxl.load_workbook(books["raw"]["gold"])
    wb.save(copy)  # new bytes (zip times, docProps), same parts
    before = dict(recalc.stats)
    assert recalc.recalculate([str(copy)]) == [books["calc"]["gold"]]
    assert recalc.stats["cache_hits"] == before["cache_hits"] + 1
    assert recalc.stats["conversions"] == before["conversions"]


def test_libreoffice_runs_jailed(books):
    """No network and no host files for the office: a formula cannot reach the host."""
    import http.server
    import subprocess
    import threading

    prefix = recalc.jail()
    assert prefix and recalc.stats["jailed"], "bubblewrap must confine LibreOffice (dev/setup.d/office.sh installs it)"
    probe = ("import os, socket\nprint(sorted(os.listdir('/')))\n"
             "print(os.path.exists('/root'), os.path.exists('/work'), os.path.exists('/etc/shadow'))\n"
             "try:\n    socket.create_connection(('127.0.0.1', 22), timeout=2)\nexcept OSError as e:\n"
             "    print('net', e.errno)\n")
    out = subprocess.run([*prefix, "/usr/bin/python3", "-c", probe], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert lines[0] == str(sorted(["bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr"]))
    assert lines[1] == "False False False" and lines[2].startswith("net ")

    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"LOOPBACK-SECRET")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wb = openpyxl.Workbook()
        wb.active["A1"] = f'=_xlfn.WEBSERVICE("http://127.0.0.1:{server.server_port}/")'
        wb.active["A2"] = '=INDIRECT("\'file:///etc/hostname\'#$Sheet1.A1")'
        path = os.path.join(os.path.dirname(books["raw"]["gold"]), "ssrf.xlsx")
        wb.save(path)
        values = openpyxl.load_workbook(recalc.recalculate([path])[0], data_only=True).active
        assert "LOOPBACK-SECRET" not in str(values["A1"].value) and hits == []
        assert str(values["A2"].value).startswith("#")
    finally:
        server.shutdown()
        server.server_close()


def test_recalculation_failures_are_infra_errors(books, tmp_path, monkeypatch):
    fresh = tmp_path / "fresh.xlsx"
    wb = _input_book(2)
    wb["Data"]["F1"] = "=1+1"
    wb.save(fresh)
    with pytest.raises(errors.InfraError, match="timed out"):
        recalc.recalculate([str(fresh)], timeout=0.01)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(errors.InfraError, match="not installed"):
        recalc.recalculate([str(fresh)])
    monkeypatch.undo()
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"PK\x03\x04 this is no workbook")
    with pytest.raises(errors.InfraError, match="failed") as caught:
        recalc.recalculate([str(broken)])
    assert str(broken) in str(caught.value)  # the dataset's file, not the office's working copy
    assert recalc.content_key(str(broken)) not in str(caught.value)
    assert not list(Path(recalc.cache_dir()).glob(".*.tmp"))


def test_warm_office_stops_with_its_helpers(books):
    """The warm soffice and its helper form one process group; stopping it leaves nothing."""
    import subprocess

    recalc._stop_warm()
    marker = f"envh-office-lo-{os.getpid()}-"
    deadline = time.monotonic() + 15  # the jail's pid namespace is torn down by the kernel, not at once
    while True:
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == []


def test_colours_are_not_compared(tmp_path):
    """evaluation.py@6e07492 commented its fill and font colour checks out: a cell with the
    right value and any colour passes there, so it passes here."""
    from openpyxl.styles.colors import Color

    def book(name, fill, font):
        wb = openpyxl.Workbook()
        wb.active["A1"] = 1
        wb.active["A1"].fill = PatternFill("solid", fgColor=fill)
        wb.active["A1"].font = Font(color=font)
        wb.save(tmp_path / name)
        return str(tmp_path / name)

    gold = book("gold.xlsx", Color(theme=4), Color(indexed=10))
    assert compare_workbooks(gold, book("same.xlsx", Color(theme=4), Color(indexed=10)), "A1").passed
    assert compare_workbooks(gold, book("fill.xlsx", Color(theme=5), Color(indexed=10)), "A1").passed
    assert compare_workbooks(gold, book("tint.xlsx", Color(theme=4, tint=0.4), Color(indexed=10)), "A1").passed
    assert compare_workbooks(gold, book("font.xlsx", "FFFF0000", Color(indexed=12)), "A1").passed


def test_content_key_frames_each_part(tmp_path):
    """Two different workbooks must never share a cache entry: a part whose bytes end with
    the next part's name and bytes used to hash like the two parts."""
    import zipfile

    with zipfile.ZipFile(tmp_path / "two.xlsx", "w") as z:
        z.writestr("xl/a.xml", b"<a/>")
        z.writestr("xl/b.xml", b"<b/>")
    with zipfile.ZipFile(tmp_path / "one.xlsx", "w") as z:
        z.writestr("xl/a.xml", b"<a/>xl/b.xml\0<b/>")
    assert recalc.content_key(tmp_path / "two.xlsx") != recalc.content_key(tmp_path / "one.xlsx")
