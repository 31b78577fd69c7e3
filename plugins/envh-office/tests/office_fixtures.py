"""Test data in the benchmarks' own formats: a small OfficeQA corpus and CSV, and
SpreadsheetBench workbooks built with openpyxl (formulas with no cached value, fills,
font colours, dates, two sheets), plus reference solutions."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

# -- OfficeQA ---------------------------------------------------------------------------------
GOLD = {"UID0001": "2,417 million", "UID0002": "March, 1977", "UID0003": "12.5, 40.25"}
QUESTIONS = [
    {"uid": "UID0001", "question": "What were total budget receipts in fiscal year 1941, in millions of dollars?",
     "answer": GOLD["UID0001"],
     "source_docs": "https://fraser.stlouisfed.org/title/treasury-bulletin-407/january-1941-6529?page=3",
     "source_files": "treasury_bulletin_1941_01.txt", "difficulty": "easy"},
    {"uid": "UID0002", "question": "In which month was the public debt limit last raised before the May 1977 "
                                   "bulletin?", "answer": GOLD["UID0002"],
     "source_docs": "https://fraser.stlouisfed.org/x/may-1977?page=2",
     "source_files": "treasury_bulletin_1977_05.txt", "difficulty": "hard"},
    {"uid": "UID0003", "question": "What were the 1948 yields of series A and series B bonds, in percent?",
     "answer": GOLD["UID0003"], "source_docs": "https://fraser.stlouisfed.org/x?page=2\nhttps://y?page=4",
     "source_files": "treasury_bulletin_1948_05.txt\ntreasury_bulletin_1948_07.txt", "difficulty": "hard"},
]


def bulletin_pages(year: int, month: int) -> list[str]:
    """Page texts of one synthetic bulletin (markdown tables, as the corpus scripts write)."""
    pages = [f"Treasury Bulletin\n{datetime.date(year, month, 1):%B %Y}\nContents: receipts, debt, yields."]
    pages.append("| Item | Amount (millions) |\n| --- | --- |\n"
                 f"| Total budget receipts | {2417 if (year, month) == (1941, 1) else 1000 + year % 100} |\n"
                 f"| Expenditures | {3000 + month} |")
    pages.append("The statutory public debt limit was last raised in "
                 f"{'March 1977' if (year, month) == (1977, 5) else 'June 1950'} by act of Congress.")
    pages.append(f"Yield of series A bonds: {12.5 if year == 1948 else 1.1} percent. "
                 f"Yield of series B bonds: {40.25 if (year, month) == (1948, 7) else 2.2} percent.")
    return pages


def write_corpus(root: Path, months: list[tuple[int, int]]) -> None:
    """The Hugging Face layout: transformed/ (one file per bulletin, page markers) and
    transformed_page_level/ (one file per page)."""
    full, paged = root / "treasury_bulletins_parsed" / "transformed", root / "treasury_bulletins_parsed" / \
        "transformed_page_level"
    full.mkdir(parents=True)
    paged.mkdir(parents=True)
    for year, month in months:
        name = f"treasury_bulletin_{year}_{month:02d}"
        pages = bulletin_pages(year, month)
        (full / f"{name}.txt").write_text("".join(f"--- PAGE {i} ---\n\n{p}\n\n" for i, p in enumerate(pages, 1)))
        for i, p in enumerate(pages, 1):
            (paged / f"{name}_{i}.txt").write_text(p + "\n")


MONTHS = [(1941, 1), (1941, 2), (1948, 5), (1948, 7), (1977, 5), (1977, 6)]


# -- SpreadsheetBench ---------------------------------------------------------------------------
YELLOW, RED = "FFFF00", "FF0000"
QTY = {1: [3, 5, 2, 7], 2: [1, 1, 4, 9], 3: [10, 0, 6, 2]}
PRICE = {1: [2.5, 4.0, 10.125, 1.2], 2: [3.3, 7.0, 0.5, 2.0], 3: [1.0, 9.99, 2.25, 4.5]}
START = {1: datetime.datetime(2024, 1, 15), 2: datetime.datetime(2023, 12, 31), 3: datetime.datetime(2024, 2, 28)}
INSTRUCTION = ("In sheet Summary, put the total of Data!D2:D5 in B1 and highlight it with a yellow fill; put the "
               "date 30 days after B3 in B2. In sheet Data, put each row's amount with 10% tax (D times 1.1) in "
               "E2:E5 and colour those numbers red.")


def _input_book(case: int, header: bool = True):
    import openpyxl

    wb = openpyxl.Workbook()
    data = wb.active
    data.title = "Data"
    data.append(["Item", "Qty", "Price", "Amount", "With tax" if header else None])
    for i, (q, p) in enumerate(zip(QTY[case], PRICE[case]), start=2):
        # Amounts are formulas with no cached value: they exist only after recalculation.
        data.append([f"item-{i - 1}", q, p, f"=B{i}*C{i}"])
    summary = wb.create_sheet("Summary")
    summary["A1"], summary["A2"], summary["A3"], summary["B3"] = "Total", "Due", "Start", START[case]
    return wb


def _answer_book(case: int):
    from openpyxl.styles import Font, PatternFill

    wb = _input_book(case)
    summary, data = wb["Summary"], wb["Data"]
    summary["B1"] = "=SUM(Data!D2:D5)"
    summary["B1"].fill = PatternFill(fill_type="solid", fgColor=YELLOW, bgColor=YELLOW)
    summary["B2"] = START[case] + datetime.timedelta(days=30)
    for r in range(2, 6):
        data[f"E{r}"] = f"=D{r}*1.1"
        data[f"E{r}"].font = Font(color=RED)
    return wb


def write_sheet_dataset(root: Path) -> Path:
    """Three tasks: 'tax-3' with three test cases (the original set's layout), 'tax-1'
    with one (the verified set's), and 'tax-h' whose input lacks the E1 header that its
    answer range includes."""
    rows = []
    for tid, cases, position in (("tax-3", (1, 2, 3), "'Summary'!B1:B2,Data!E2:E5"),
                                 ("tax-1", (1,), "'Summary'!B1:B2,Data!E2:E5"),
                                 ("tax-h", (1,), "Data!E1:E5")):
        folder = root / "spreadsheet" / tid
        folder.mkdir(parents=True)
        for k in cases:
            _input_book(k, header=tid != "tax-h").save(folder / f"{k}_{tid}_input.xlsx")
            _answer_book(k).save(folder / f"{k}_{tid}_answer.xlsx")
        rows.append({"id": tid, "instruction": INSTRUCTION, "spreadsheet_path": f"spreadsheet/{tid}",
                     "instruction_type": "Cell-Level Manipulation", "answer_position": position})
    (root / "dataset.json").write_text(json.dumps(rows, indent=1))
    return root


#: The generic solution as code: the same code passes every test case.
SOLUTION_CODE = '''import datetime, os
import openpyxl
from openpyxl.styles import Font, PatternFill
wb = openpyxl.load_workbook(os.environ["WORKBOOK"])
s, d = wb["Summary"], wb["Data"]
s["B1"] = "=SUM(Data!D2:D5)"
s["B1"].fill = PatternFill(fill_type="solid", fgColor="FFFF00", bgColor="FFFF00")
s["B2"] = s["B3"].value + datetime.timedelta(days=30)
for r in range(2, 6):
    d[f"E{r}"] = f"=D{r}*1.1"
    d[f"E{r}"].font = Font(color="FF0000")
wb.save(os.environ["WORKBOOK"])
print("done")
'''

#: The same solution through the native tools (formulas, so it holds on every case).
NATIVE_SOLUTION = [
    {"tool": "write_range", "args": {"range": "Summary!B1", "values": "=SUM(Data!D2:D5)", "fill_color": YELLOW}},
    {"tool": "write_range", "args": {"range": "Summary!B2", "values": "=B3+30"}},
    {"tool": "write_range", "args": {"range": "Data!E2:E5", "values": ["=D2*1.1", "=D3*1.1", "=D4*1.1", "=D5*1.1"],
                                     "font_color": RED}},
]
