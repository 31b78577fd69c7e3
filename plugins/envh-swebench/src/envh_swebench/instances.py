"""SWE-bench task instances: loading them and deriving their image and eval script.

Instances keep SWE-bench's own schema (instance_id, repo, base_commit, problem_statement,
patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS, version, environment_setup_commit, ...),
optionally with the newer per-instance fields ``image``, ``eval_script``, ``log_parser``
and ``eval_type``. Where those are missing they are derived the way SWE-bench does:
the evaluation image name, and a pytest-style eval script from ``test_cmd``.
"""

from __future__ import annotations

import json
import platform
import re
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
from envh import errors

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch",
            "FAIL_TO_PASS", "PASS_TO_PASS")
DEFAULT_TEST_CMD = "pytest -rA"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"  # swebench.harness.constants


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    return [str(v) for v in value or []]


def host_arch() -> str:
    """Architecture part of SWE-bench image names (amd64 images are tagged x86_64)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)


def default_image(instance_id: str, namespace: str | None = None, tag: str = "latest") -> str:
    """SWE-bench's evaluation image name: ``sweb.eval.<arch>.<instance_id>:<tag>``."""
    name = f"sweb.eval.{host_arch()}.{instance_id}:{tag}"
    if namespace:
        name = f"{namespace}/{name}".replace("__", "_1776_")
    return name.lower()


def patched_files(test_patch: str) -> list[str]:
    """Paths the test patch touches, in order, without duplicates."""
    seen: dict[str, None] = {}
    for match in re.finditer(r"^diff --git a/(\S+) b/(\S+)$", test_patch, re.M):
        seen[match.group(2)] = None
    return list(seen)


@attrs.frozen(kw_only=True)
class Instance:
    """One task instance; ``raw`` keeps every field of the source row."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    version: str
    image: str
    test_cmd: str
    workdir: str
    raw: dict[str, Any] = attrs.field(repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, namespace: str | None = None,
                 workdir: str = "/testbed") -> Instance:
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise errors.SpecError(
                f"SWE-bench instance {row.get('instance_id', '?')!r} lacks field(s) "
                f"{', '.join(missing)}; instances need {', '.join(REQUIRED)}.")
        iid = str(row["instance_id"])
        return cls(
            instance_id=iid, repo=str(row["repo"]), base_commit=str(row["base_commit"]),
            problem_statement=str(row["problem_statement"]), patch=str(row.get("patch") or ""),
            test_patch=str(row["test_patch"]), fail_to_pass=_as_list(row["FAIL_TO_PASS"]),
            pass_to_pass=_as_list(row["PASS_TO_PASS"]), version=str(row.get("version") or ""),
            image=str(row.get("image") or default_image(iid, namespace)),
            test_cmd=str(row.get("test_cmd") or DEFAULT_TEST_CMD), workdir=workdir, raw=dict(row))

    def eval_script(self) -> str:
        """The instance's ``eval_script``, or one built like SWE-bench's for pytest repos:
        reset the test files, apply the test patch, run the tests between the markers."""
        if self.raw.get("eval_script"):
            return str(self.raw["eval_script"])
        files = " ".join(patched_files(self.test_patch))
        delim = f"EOF_{uuid.uuid5(uuid.NAMESPACE_URL, self.test_patch).hex}"
        lines = ["#!/bin/bash", "set -uxo pipefail", f"cd {self.workdir}"]
        if self.raw.get("env_setup"):
            lines.append(str(self.raw["env_setup"]))
        lines += [f"git checkout {self.base_commit} {files}",
                  f"git apply -v - <<'{delim}'\n{self.test_patch.rstrip(chr(10))}\n{delim}",
                  f": '{START}'", f"{self.test_cmd} {files}", f": '{END}'",
                  f"git checkout {self.base_commit} {files}"]
        return "\n".join(lines) + "\n"


def _rows(source: str | Path) -> Iterable[Mapping[str, Any]]:
    text = str(source)
    if text.startswith("hf://"):
        name, _, split = text[5:].partition("@")
        try:
            import datasets
            return list(datasets.load_dataset(name, split=split or "test"))
        except Exception as exc:  # network, auth, unknown name: all infrastructure here
            raise errors.InfraError(f"Could not load SWE-bench instances from {text!r}: {exc!r}") from exc
    path = Path(text).expanduser()
    if not path.exists():
        raise errors.SpecError(f"SWE-bench instances file {text!r} does not exist.")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    data = json.loads(path.read_text())
    return [data] if isinstance(data, dict) else data


def load_instances(source: str | Path | Iterable[Mapping[str, Any]], *, namespace: str | None = None,
                   workdir: str = "/testbed") -> dict[str, Instance]:
    """Instances by id from a .json / .jsonl / .parquet file, ``hf://NAME@SPLIT`` (HF
    datasets, where reachable) or an iterable of rows."""
    rows = _rows(source) if isinstance(source, (str, Path)) else source
    out: dict[str, Instance] = {}
    for row in rows:
        inst = Instance.from_row(row, namespace=namespace, workdir=workdir)
        if inst.instance_id in out:
            raise errors.SpecError(f"Duplicate SWE-bench instance id {inst.instance_id!r} in {source!s:.200}.")
        out[inst.instance_id] = inst
    return out
