"""The host-side workbook guard on hostile files, without a container."""

from __future__ import annotations

import subprocess
import sys
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
        if name not in zin.namelist():
            zout.writestr(name, body)
    return str(out)


def test_entity_expansion_is_refused_fast(tmp_path):
    path = _with_sheet(tmp_path, LAUGHS)
    t0 = time.perf_counter()
    with pytest.raises(WorkbookError, match="document type"):
        workbook.load(path)
    assert time.perf_counter() - t0 < 10


NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def _sheet_xml(body: str, decl: str = '<?xml version="1.0" encoding="UTF-8"?>', before: str = "",
               after: str = "") -> str:
    return f'{decl}{before}<worksheet xmlns="{NS}"><sheetData>{body}</sheetData>{after}</worksheet>'


def _rows(cells: int, per_row: int = 1000) -> str:
    return "".join(f'<row r="{r + 1}">' + "<c><v>1</v></c>" * per_row + "</row>" for r in range(cells // per_row))


@pytest.fixture
def no_openpyxl(monkeypatch):
    """The hostile workbooks below must be refused before openpyxl parses anything."""
    import openpyxl

    def refuse(*args, **kwargs):
        raise AssertionError("openpyxl was asked to open a workbook the guard must refuse")
    monkeypatch.setattr(openpyxl, "load_workbook", refuse)


def _refused(path: str, match: str) -> None:
    with pytest.raises(WorkbookError, match=match):
        workbook.load(path)
    with pytest.raises(WorkbookError, match=match):
        workbook.check_contents(path)


@pytest.mark.parametrize("encode", [
    lambda x: x.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16"),      # with a BOM
    lambda x: x.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16-le"),   # none: '<\0'
    lambda x: x.replace('encoding="UTF-8"', 'encoding="UTF-32"').encode("utf-32"),
    lambda x: x.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16-be"),
    lambda x: x.replace('encoding="UTF-8"', "encoding = 'ISO-8859-1'").encode("latin-1"),
])
def test_xml_in_another_encoding_is_refused(tmp_path, no_openpyxl, encode):
    """UTF-16 hid every cell tag from the byte count: 174 KB of zip held 1.2 M cells
    (21.7 s and 557 MB in openpyxl). Any XML part not in UTF-8 is refused."""
    _refused(_with_sheet(tmp_path, encode(_sheet_xml(_rows(2000)))), "not UTF-8|only UTF-8")


def test_internal_entities_are_refused(tmp_path, no_openpyxl):
    """100 cells in one entity, 100 of those in another, one per row: 5 KB of zip held
    1.5 M cells. Any document type or entity declaration is refused."""
    dtd = '<!DOCTYPE worksheet [<!ENTITY a "' + "<c/>" * 100 + '"><!ENTITY b "' + "&a;" * 100 + '">]>'
    body = "".join(f'<row r="{r + 1}">&b;</row>' for r in range(150))
    _refused(_with_sheet(tmp_path, _sheet_xml(body, before=dtd)), "document type or entity")


def test_shared_strings_bomb_is_refused(tmp_path, no_openpyxl):
    """5 M <si> entries took 61 s and 584 MB in openpyxl; shared strings are capped."""
    sst = (f'<?xml version="1.0" encoding="UTF-8"?><sst xmlns="{NS}">'
           + "<si><t>a</t></si>" * (workbook.MAX_SHARED_STRINGS + 1) + "</sst>")
    _refused(_with_sheet(tmp_path, sst, name="xl/sharedStrings.xml"), "shared strings")


@pytest.mark.parametrize(("part", "xml", "match"), [
    ("xl/styles.xml", f'<styleSheet xmlns="{NS}"><cellXfs>' + '<xf numFmtId="0"/>' * (workbook.MAX_STYLES + 1) + "</cellXfs></styleSheet>",
     "style records"),
    ("xl/worksheets/sheet1.xml", _sheet_xml('<row r="1"/>' * 500_001), "rows"),
    # one merged range of 20 x 50 000 cells: openpyxl makes a MergedCell for each (10 s per million)
    ("xl/worksheets/sheet1.xml", _sheet_xml("", after='<mergeCells><mergeCell ref="A1:T50000"/></mergeCells>'),
     "cells"),
    ("xl/worksheets/sheet1.xml", _sheet_xml("", after='<hyperlinks><hyperlink ref="A1:XFD1048576" '
                                                      'display="x"/></hyperlinks>'), "cells"),
    ("xl/worksheets/sheet1.xml", _sheet_xml("", after="<extLst>" + "<ext/>" * 4_000_001 + "</extLst>"),
     "XML elements"),
])
def test_other_repeated_elements_are_capped(tmp_path, no_openpyxl, part, xml, match):
    _refused(_with_sheet(tmp_path, xml, name=part), match)


def test_ordinary_workbooks_pass_the_census(tmp_path):
    plain = tmp_path / "plain.xlsx"
    _input_book(1).save(plain)
    found = workbook.census(str(plain))
    assert (found.cells, found.shared_strings) == (25, 0) and 0 < found.styles < 200  # theme fonts too
    workbook.check_contents(str(plain))
    bom = _with_sheet(tmp_path, b"\xef\xbb\xbf" + _sheet_xml(_rows(1000), decl="<?xml version='1.0' "
                                                                            "encoding='utf-8'?>").encode())
    assert workbook.count_cells(bom) == 1000 + 4  # and the Summary sheet's 4
    workbook.load(bom).close()


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


def test_sparse_corners_do_not_fill_the_rectangle(tmp_path):
    """Two cells, A1 and XFD1048576, pass every count; iterating the used rectangle
    (17 billion cells) hung find_cells and validate. Only stored cells are visited."""
    import openpyxl

    path = tmp_path / "corners.xlsx"
    wb = openpyxl.Workbook()
    wb.active["A1"], wb.active["XFD1048576"] = "=#REF!+1", "needle"
    wb.save(path)
    code = ("from envh_office import workbook\n"
            f"text, hits = workbook.find_cells({str(path)!r}, 'needle')\n"
            "assert hits == 1 and 'XFD1048576' in text, text\n"
            f"ok, problems = workbook.validate({str(path)!r}, None)\n"
            "assert not ok and 'A1' in problems[0], problems\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
