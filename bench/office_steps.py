"""envh-office step costs, measured in one run on real parts:

* SpreadsheetBench: a native ``write_range`` step vs a ``run_python`` step doing the same
  edit (write a formula and a fill colour to one cell) on the same episode, interleaved
  rounds, median per step;
* LibreOffice recalculation time per workbook: the warm office (first call includes its
  start) and, for reference, a cold ``soffice --convert-to`` per workbook;
* OfficeQA ``grep`` over a 100-document corpus (a literal, a regex with classes and
  alternation, and a case-insensitive pattern), ms per call.

Needs dockerd, the sandbox image and LibreOffice (``source dev/setup.d/office.sh``).
Last line: JSON with ``ratio`` = native write_range ms/step ÷ run_python ms/step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from envh import Action, TaskRef

TESTS = Path(__file__).resolve().parents[1] / "plugins/envh-office/tests"
sys.path.insert(0, str(TESTS))

from office_fixtures import write_corpus, write_sheet_dataset  # noqa: E402

TASK = TaskRef(suite="spreadsheetbench", split="test", instance_id="tax-1")
EDIT_CODE = ("import os, openpyxl\nfrom openpyxl.styles import PatternFill\n"
             "wb = openpyxl.load_workbook(os.environ['WORKBOOK'])\nc = wb['Summary']['C{row}']\n"
             "c.value = '=SUM(Data!D2:D5)*{row}'\n"
             "c.fill = PatternFill(fill_type='solid', fgColor='FFFF00', bgColor='FFFF00')\n"
             "wb.save(os.environ['WORKBOOK'])\n")


def timed(env, action: Action) -> float:
    t0 = time.perf_counter()
    resp = env.step(action)
    ms = (time.perf_counter() - t0) * 1e3
    assert not resp.info.get("error"), resp.observation.text
    return ms


def sheet_steps(root: Path, rounds: int, steps: int) -> tuple[list[float], list[float]]:
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    env = SpreadsheetBenchEnv(str(root))
    native, python = [], []
    try:
        env.reset(task=TASK, seed=0)
        timed(env, Action(tool="run_python", args={"code": "print('warm')"}))  # container start, not a step
        for r in range(rounds):
            nat, py = [], []
            for i in range(steps):  # the same edit, different rows: every step really writes
                row = r * steps + i + 1
                nat.append(timed(env, Action(tool="write_range", args={
                    "range": f"Summary!C{row}", "values": f"=SUM(Data!D2:D5)*{row}", "fill_color": "FFFF00"})))
                py.append(timed(env, Action(tool="run_python", args={"code": EDIT_CODE.format(row=row + 1000)})))
            native.append(statistics.median(nat))
            python.append(statistics.median(py))
    finally:
        env.close()
    return native, python


def recalc_times(root: Path, count: int) -> dict[str, float]:
    import openpyxl
    from envh_office import recalc

    books = []
    for i in range(count + 1):
        wb = openpyxl.load_workbook(root / "spreadsheet" / "tax-3" / "1_tax-3_input.xlsx")
        wb["Summary"]["D1"] = f"=SUM(Data!D2:D5)+{i}"  # distinct content: no cache hit
        path = root / f"bench_{i}.xlsx"
        wb.save(path)
        books.append(str(path))
    hits = recalc.stats["cache_hits"]
    t0 = time.perf_counter()
    recalc.recalculate(books[:1])
    first = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    recalc.recalculate(books[1:])
    warm = (time.perf_counter() - t0) * 1e3 / count
    # a cache hit would be timed as a recalculation in a few milliseconds
    assert recalc.stats["cache_hits"] == hits, "recalculation timings came from the cache"
    os.environ["ENVH_OFFICE_RECALC"] = "cold"
    cold = []
    try:
        for i in range(2):
            wb = openpyxl.load_workbook(books[0])
            wb["Summary"]["D2"] = f"=1+{i}"
            path = root / f"cold_{i}.xlsx"
            wb.save(path)
            t0 = time.perf_counter()
            recalc.recalculate([str(path)])
            cold.append((time.perf_counter() - t0) * 1e3)
    finally:
        del os.environ["ENVH_OFFICE_RECALC"]
    recalc._stop_warm()
    return {"first_ms": first, "warm_ms_per_workbook": warm, "cold_ms_per_workbook": statistics.median(cold)}


def grep_times(root: Path, repeats: int) -> dict[str, float]:
    from envh_office.corpus import Corpus

    months = [(1940 + i // 12, i % 12 + 1) for i in range(100)]
    write_corpus(root / "corpus", months)
    for year, month in months:  # bulletins run to hundreds of KB of tables: pad each to ~200 KB
        path = root / "corpus/treasury_bulletins_parsed/transformed" / f"treasury_bulletin_{year}_{month:02d}.txt"
        with open(path, "a") as f:
            for page in range(5, 45):
                f.write(f"--- PAGE {page} ---\n\n| Account | Fiscal year | Month | Amount |\n| --- | --- | --- | --- |\n")
                f.writelines(f"| Account {page}-{r} | {year} | {month:02d} | {(page * 7919 + r * 104729) % 99991:,} |\n"
                             for r in range(90))
    corpus = Corpus(root / "corpus" / "treasury_bulletins_parsed")
    size = sum(os.path.getsize(corpus.resolve(f)[0]) for f in corpus.glob("transformed/*.txt"))
    out = {"documents": 100.0, "corpus_kb": size / 1024}
    for name, pattern, ignore_case in (("literal", "Total budget receipts", False),
                                       ("regex", r"series [AB] bonds: (?:1\.1|12\.5|40\.25) percent", False),
                                       ("ignore_case", "public DEBT limit", True)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = corpus.grep(pattern, "transformed/*.txt", max_hits=200, ignore_case=ignore_case)
            times.append((time.perf_counter() - t0) * 1e3)
            assert res.hits > 0 and res.files == 100
        out[f"{name}_ms"] = statistics.median(times)
    # the worst case a policy can ask for: a pattern that matches nothing, built to make a
    # backtracking engine explode, over every file (RE2 must stay linear)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = corpus.grep(r"(?:(?:a|aa)*)*(?:.*){20}\x00", "**", max_hits=200)
        times.append((time.perf_counter() - t0) * 1e3)
        assert res.hits == 0
    out["hostile_ms"] = statistics.median(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--workbooks", type=int, default=6)
    parser.add_argument("--grep-repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envh-office-bench-") as tmp:
        root = Path(tmp)
        os.environ["ENVH_OFFICE_CACHE"] = str(root / "cache")  # a fresh cache: every recalculation is real
        write_sheet_dataset(root / "ssb")
        native, python = sheet_steps(root / "ssb", args.rounds, args.steps)
        rec = recalc_times(root / "ssb", args.workbooks)
        grep = grep_times(root, args.grep_repeats)
    n, p = statistics.median(native), statistics.median(python)
    print(f"write_range (native)     : {n:8.1f} ms/step  (openpyxl in this process, transactional save)")
    print(f"run_python (same edit)   : {p:8.1f} ms/step  (workbook to the container, python3 + openpyxl, back)")
    print(f"  per round native       : {', '.join(f'{x:.1f}' for x in native)}")
    print(f"  per round run_python   : {', '.join(f'{x:.1f}' for x in python)}")
    print(f"recalculation, warm      : {rec['warm_ms_per_workbook']:8.1f} ms/workbook  "
          f"(first call, office start included: {rec['first_ms']:.0f} ms)")
    print(f"recalculation, cold CLI  : {rec['cold_ms_per_workbook']:8.1f} ms/workbook  (soffice --convert-to)")
    print(f"grep, 100 documents      : literal {grep['literal_ms']:.1f} ms, regex {grep['regex_ms']:.1f} ms, "
          f"ignore-case {grep['ignore_case_ms']:.1f} ms, hostile (no hit) {grep['hostile_ms']:.1f} ms  "
          f"({grep['corpus_kb']:.0f} KB of text)")
    print(json.dumps({"bench": "office_steps", "native_ms_per_step": round(n, 2), "run_python_ms_per_step": round(p, 2),
                      "ratio": round(n / p, 3), "recalc_warm_ms_per_workbook": round(rec["warm_ms_per_workbook"], 1),
                      "recalc_first_ms": round(rec["first_ms"], 1),
                      "recalc_cold_ms_per_workbook": round(rec["cold_ms_per_workbook"], 1),
                      "grep_100_docs_ms": {k: round(v, 2) for k, v in grep.items() if k.endswith("_ms")},
                      "steps": args.rounds * args.steps}))


if __name__ == "__main__":
    main()
