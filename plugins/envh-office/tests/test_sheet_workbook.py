"""The host-side workbook guard on hostile files, without a container."""

from __future__ import annotations

import time
import zipfile

import pytest
from envh_office import workbook
from envh_office.workbook import WorkbookError
from office_fixtures import _input_book

LAUGHS = ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
          + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
          + ']><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
          '<row r="1"><c r="A1" t="inlineStr"><is><t>&i;</t></is></c></row></sheetData></worksheet>')


def _with_sheet(tmp_path, body: bytes | str, name: str = "xl/worksheets/sheet1.xml"):
    src, out = tmp_path / "src.xlsx", tmp_path / "hostile.xlsx"
    _input_book(1).save(src)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, body if item.filename == name else zin.read(item.filename))
    return str(out)


def test_entity_expansion_is_refused_fast(tmp_path):
    path = _with_sheet(tmp_path, LAUGHS)
    t0 = time.perf_counter()
    with pytest.raises(WorkbookError, match="corrupt"):
        workbook.load(path)
    assert time.perf_counter() - t0 < 10


def test_guards(tmp_path):
    (tmp_path / "not.xlsx").write_bytes(b"hello")
    with pytest.raises(WorkbookError, match="not an xlsx zip"):
        workbook.check_file(str(tmp_path / "not.xlsx"))
    (tmp_path / "link.xlsx").symlink_to(tmp_path / "not.xlsx")
    with pytest.raises(WorkbookError, match="not a regular file"):
        workbook.check_file(str(tmp_path / "link.xlsx"))
    many = _with_sheet(tmp_path, '<c r="A1"/>' * 600_000)
    assert workbook.count_cells(many) > workbook.MAX_CELLS
    plain = tmp_path / "plain.xlsx"
    _input_book(1).save(plain)
    assert workbook.count_cells(str(plain)) == 25  # Data: 5 headers + 4 rows x 4; Summary: 4
