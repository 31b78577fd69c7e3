"""OfficeQA data in the benchmark's own formats, and where to find it.

* questions: ``officeqa.csv`` with ``uid, question, answer, source_docs, source_files,
  difficulty`` (``source_*`` hold one or more entries separated by newlines, commas or
  semicolons);
* a split manifest (JSON ``{"train": [uid, ...], "val": [...], "test": [...]}``);
* the corpus: a folder of parsed bulletins ``treasury_bulletin_YYYY_MM.txt``, or the
  Hugging Face layout (``treasury_bulletins_parsed/transformed/`` and
  ``transformed_page_level/``, pages marked ``--- PAGE N ---`` or one file per page).

Config keys ``data``, ``corpus``, ``split_manifest``; environment fallbacks
``OFFICEQA_DATA``, ``OFFICEQA_CORPUS``, ``OFFICEQA_SPLITS``. Nothing is downloaded.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Any

import attrs
from envh import errors

COLUMNS = ("uid", "question", "answer", "source_docs", "source_files", "difficulty")
CSV_NAMES = ("officeqa.csv", "officeqa_full.csv", "officeqa_pro.csv")
OBTAIN = ("The OfficeQA questions are gated upstream: request access to the Hugging Face dataset "
          "databricks/officeqa (or clone github.com/databricks/officeqa, which ships officeqa.csv), "
          "download officeqa.csv and the parsed corpus (treasury_bulletins_parsed/transformed*/) "
          "yourself, then point config data/corpus (or OFFICEQA_DATA/OFFICEQA_CORPUS) at them. "
          "envh never downloads them.")
_SPLIT_ITEMS = re.compile(r"[\n;,]+|\s+(?=https?://)")
_PAGE_IN_URL = re.compile(r"[?&#]page=(\d+)")


@attrs.frozen(kw_only=True)
class Question:
    """One benchmark row. ``answer`` is the gold answer: it stays inside the verifier."""

    uid: str
    question: str
    answer: str = attrs.field(repr=False)
    source_docs: tuple[str, ...] = ()
    source_files: tuple[str, ...] = ()
    difficulty: str = ""

    @property
    def source_bulletins(self) -> tuple[str, ...]:
        """``treasury_bulletin_YYYY_MM`` names of the source files."""
        out = []
        for f in self.source_files:
            name = Path(f.strip()).name
            name = re.sub(r"\.(txt|pdf|json)$", "", name)
            if name and name not in out:
                out.append(name)
        return tuple(out)

    @property
    def source_pages(self) -> tuple[int, ...]:
        """Page numbers named in the source URLs (``?page=N``), if any."""
        return tuple(sorted({int(m) for d in self.source_docs for m in _PAGE_IN_URL.findall(d)}))


def _items(cell: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in _SPLIT_ITEMS.split(cell or "") if x.strip())


def find_csv(data: str | os.PathLike[str] | None) -> Path | None:
    """The question CSV named by ``data`` (a file, or a folder holding one), else None."""
    if data is None:
        return None
    p = Path(data).expanduser()
    if p.is_file():
        return p
    if p.is_dir():
        for name in CSV_NAMES:
            if (p / name).is_file():
                return p / name
    return None


def load_questions(path: str | os.PathLike[str]) -> dict[str, Question]:
    """Rows of the question CSV by uid; a missing column is an error naming it."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in reader.fieldnames or []]
        missing = [c for c in ("uid", "question", "answer") if c not in header]
        if missing:
            # the header found is not quoted: a spec may name any file, and its first line is its content
            raise errors.SpecError(f"OfficeQA CSV {path} lacks column(s) {missing}; "
                                   f"expected {', '.join(COLUMNS)} (its first line has {len(header)} field(s)).")
        out: dict[str, Question] = {}
        for row in reader:
            row = {(k or "").strip(): (v or "") for k, v in row.items()}
            uid = row["uid"].strip()
            if not uid or not row["answer"].strip():
                continue
            out[uid] = Question(uid=uid, question=row["question"].strip(), answer=row["answer"].strip(),
                                source_docs=_items(row.get("source_docs")),
                                source_files=_items(row.get("source_files")),
                                difficulty=row.get("difficulty", "").strip())
    if not out:
        raise errors.SpecError(f"OfficeQA CSV {path} holds no questions with an answer.")
    return out


def load_splits(path: str | os.PathLike[str] | None, uids: list[str]) -> dict[str, list[str]]:
    """Split name → uids. Without a manifest every question is in split ``all``."""
    if path is None:
        return {"all": sorted(uids)}
    raw: Any = json.loads(Path(path).read_text())
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise errors.SpecError(f"Split manifest {path} must be a JSON object of uid lists "
                               '({"train": [...], "test": [...]}).')
    known = set(uids)
    unknown = sorted({str(u) for v in raw.values() for u in v} - known)
    if unknown:
        raise errors.SpecError(f"Split manifest {path} names uids absent from the CSV: {unknown[:10]}")
    return {str(k): [str(u) for u in v] for k, v in raw.items()}


def corpus_root(corpus: str | os.PathLike[str]) -> Path:
    """The folder the tools see: the HF download's ``treasury_bulletins_parsed`` when given
    its root, else ``corpus`` itself."""
    p = Path(corpus).expanduser()
    return p / "treasury_bulletins_parsed" if (p / "treasury_bulletins_parsed").is_dir() else p


def resolve_config(data: str | None, corpus: str | None, split_manifest: str | None) -> dict[str, str | None]:
    """Config values with the environment's fallbacks."""
    return {"data": data or os.environ.get("OFFICEQA_DATA"),
            "corpus": corpus or os.environ.get("OFFICEQA_CORPUS"),
            "split_manifest": split_manifest or os.environ.get("OFFICEQA_SPLITS")}


def check(data: str | None = None, corpus: str | None = None, split_manifest: str | None = None) -> dict[str, Any]:
    """What is found and what is missing, for ``envh office check``."""
    cfg = resolve_config(data, corpus, split_manifest)
    report: dict[str, Any] = {"config": cfg, "found": {}, "missing": []}
    csv_path = find_csv(cfg["data"])
    questions: dict[str, Question] = {}
    if csv_path is None:
        report["missing"].append(f"question CSV ({', '.join(COLUMNS)}): {OBTAIN}")
    else:
        try:
            questions = load_questions(csv_path)
            report["found"]["questions"] = {"path": str(csv_path), "count": len(questions)}
        except (errors.SpecError, OSError, csv.Error) as exc:
            report["missing"].append(f"a readable question CSV: {exc}")
    if cfg["split_manifest"]:
        try:
            splits = load_splits(cfg["split_manifest"], list(questions))
            report["found"]["splits"] = {k: len(v) for k, v in splits.items()}
        except (errors.SpecError, OSError, ValueError) as exc:
            report["missing"].append(f"a valid split manifest: {exc}")
    elif questions:
        report["found"]["splits"] = {"all": len(questions)}
    if not cfg["corpus"] or not Path(cfg["corpus"]).expanduser().is_dir():
        report["missing"].append("corpus folder of treasury_bulletin_YYYY_MM.txt files: " + OBTAIN)
    else:
        root = corpus_root(cfg["corpus"])
        txt = [p for p in root.rglob("treasury_bulletin_*.txt")]
        paged = sum(1 for p in txt if "page_level" in p.parent.name or re.search(r"_\d{4}_\d{2}_\d+\.txt$", p.name))
        report["found"]["corpus"] = {"root": str(root), "documents": len(txt) - paged, "page_level_files": paged}
        wanted = {b for q in questions.values() for b in q.source_bulletins}
        have = {re.sub(r"(_\d{4}_\d{2})_\d+$", r"\1", p.stem) for p in txt}
        if wanted - have:
            report["missing"].append(f"{len(wanted - have)} source bulletin(s) named by the CSV are not "
                                     f"in the corpus, e.g. {sorted(wanted - have)[:5]}")
    return report
