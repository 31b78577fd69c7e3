"""Fixtures: a small OfficeQA corpus and CSV, SpreadsheetBench workbooks built with
openpyxl in the benchmark's folder layout, and the real parts (Docker, LibreOffice).

Without Docker or LibreOffice the tests that need them skip on a developer machine and
fail under CI (``CI=true``); ``dev/setup.d/office.sh`` installs both parts.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from office_fixtures import MONTHS, QUESTIONS, write_corpus, write_sheet_dataset  # noqa: E402

HINT = "run `PY=.venv/bin/python; source dev/setup.d/office.sh` from the repository root"


@pytest.fixture(scope="session")
def officeqa_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The fixture questions and corpus, granted to the specs the tests build (``--data``)."""
    from envh.hostpaths import granted

    root = tmp_path_factory.mktemp("officeqa")
    corpus = root / "corpus"
    write_corpus(corpus, MONTHS)
    with open(root / "officeqa.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["uid", "question", "answer", "source_docs", "source_files", "difficulty"])
        w.writeheader()
        w.writerows(QUESTIONS)
    (root / "splits.json").write_text(json.dumps({"train": ["UID0001"], "test": ["UID0002", "UID0003"]}))
    outside = root / "secret.txt"
    outside.write_text("the outside world\n")
    (corpus / "treasury_bulletins_parsed" / "escape.txt").symlink_to(outside)
    (corpus / "treasury_bulletins_parsed" / "escape_dir").symlink_to(root, target_is_directory=True)
    with granted(root):
        yield {"data": str(root), "csv": str(root / "officeqa.csv"), "corpus": str(corpus),
               "split_manifest": str(root / "splits.json")}


@pytest.fixture
def qa_env(officeqa_dirs):
    from envh_office.qa_bridge import OfficeQAEnv

    env = OfficeQAEnv(officeqa_dirs["data"], officeqa_dirs["corpus"], officeqa_dirs["split_manifest"])
    yield env
    env.close()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"{reason} (required under CI)", pytrace=False)
    pytest.skip(f"{reason}; {HINT}")


@pytest.fixture(scope="session", autouse=True)
def _private_recalc_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every test session recalculates for real: no cache from earlier runs."""
    before = os.environ.get("ENVH_OFFICE_CACHE")
    os.environ["ENVH_OFFICE_CACHE"] = str(tmp_path_factory.mktemp("recalc-cache"))
    yield
    if before is None:
        os.environ.pop("ENVH_OFFICE_CACHE", None)
    else:
        os.environ["ENVH_OFFICE_CACHE"] = before


@pytest.fixture(scope="module", autouse=True)
def _office_per_module():
    """One warm LibreOffice per module at most: it does not outlive the module that used
    it (the rest of a whole-repository run needs the memory)."""
    yield
    from envh_office import recalc

    recalc._stop_warm()


@pytest.fixture(scope="session")
def soffice() -> str:
    path = shutil.which("soffice")
    if path is None:
        _unavailable("LibreOffice (soffice) is not installed")
    return str(path)


@pytest.fixture(scope="session")
def docker_ready() -> None:
    try:
        from envh_office import sandbox

        c = sandbox.client()
        c.images.get(sandbox.IMAGE)
    except Exception as exc:  # noqa: BLE001 - InfraError, ImageNotFound, docker missing
        _unavailable(f"Docker or the sandbox image is unavailable: {exc!r}")


@pytest.fixture(scope="session")
def sheet_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The fixture dataset, granted to the specs the tests build (``--data``)."""
    from envh.hostpaths import granted

    path = str(write_sheet_dataset(tmp_path_factory.mktemp("ssb")))
    with granted(path):
        yield path


@pytest.fixture
def make_sheet_env(sheet_data, soffice, docker_ready):
    from envh_office.sheet_bridge import SpreadsheetBenchEnv

    made = []

    def factory(**config):
        env = SpreadsheetBenchEnv(sheet_data, **config)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()
