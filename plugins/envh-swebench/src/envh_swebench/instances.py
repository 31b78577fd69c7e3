"""SWE-bench task instances: loading them and deciding how each one is graded.

Instances keep SWE-bench's own schema (instance_id, repo, base_commit, problem_statement,
patch, test_patch, FAIL_TO_PASS, PASS_TO_PASS, version, ...). The installed ``swebench``
(5.x) grades from fields every row of the current datasets carries: ``eval_script`` (the
whole script: environment activation, test patch, the test command between the output
markers), ``log_parser`` (a key of its ``PARSER_REGISTRY``), ``eval_type`` and ``image``
(``harness.utils.make_test_spec``); it has no per-repo spec tables to derive them from.
So a row is graded exactly as ``swebench`` would when it carries ``eval_script``; a row
that only has the older fields is refused at load, with the reason, unless it is a
custom instance that names its own ``test_cmd`` (then envh builds a pytest-style script).
"""

from __future__ import annotations

import ast
import gzip
import json
import platform
import re
import shlex
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
from envh import errors

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "test_patch",
            "FAIL_TO_PASS", "PASS_TO_PASS")
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"  # swebench.harness.constants
OFFICIAL_HINT = ("Load rows of the current SWE-bench datasets (SWE-bench/SWE-bench, _Lite, "
                 "_Verified, _Multilingual, ...), which carry eval_script, log_parser, eval_type "
                 "and image, or add those fields; a custom instance may set test_cmd instead.")
# Lines of an eval script that set up the repository's environment (conda activation,
# exported variables) before it touches the repository.
_ACTIVATION = re.compile(r"^\s*(source\s+\S*activate\b.*|\.\s+\S*activate\b.*|conda\s+activate\s+\S+\s*"
                         r"|export\s+[A-Za-z_][A-Za-z0-9_]*=.*)$")


def host_arch() -> str:
    """Architecture part of SWE-bench image names (amd64 images are tagged x86_64)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "aarch64": "arm64"}.get(machine, machine)


def default_image(instance_id: str, namespace: str | None = None, tag: str = "latest") -> str:
    """SWE-bench's evaluation image name (``image_builder.image_spec.ImageSpec.name``):
    ``[namespace/]sweb.eval.<arch>.<instance_id>:<tag>``, ``__`` as ``_1776_`` when remote."""
    name = f"sweb.eval.{host_arch()}.{instance_id}:{tag}"
    if namespace:
        name = f"{namespace}/{name}".replace("__", "_1776_")
    return name.lower()


_GIT_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _git_unquote(text: str) -> tuple[str, str]:
    """A path as git writes it in a diff header, and the rest of ``text`` after it: a C
    string in double quotes (``"a/x\\"y.py"``, octal bytes for non-ASCII) or up to the
    first blank."""
    if not text.startswith('"'):
        name, _, rest = text.partition(" ")
        return name, rest
    out, i = bytearray(), 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and i + 1 < len(text):
            if text[i + 1] in "01234567":
                out.append(int(text[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_GIT_ESCAPES.get(text[i + 1], ord(text[i + 1])))
            i += 2
            continue
        out += text[i].encode()
        i += 1
    return out.decode("utf-8", "surrogateescape"), text[i + 2:]


def _strip_prefix(path: str) -> str:
    return path.split("/", 1)[1] if "/" in path else path


def _header_target(rest: str) -> str:
    """The new path of ``diff --git <rest>``. Unquoted names may hold blanks: git writes
    `a/P b/P` then, so P is the half that matches."""
    if rest.startswith('"') or rest.endswith('"'):
        if rest.startswith('"'):
            _, after = _git_unquote(rest)
        else:
            after = rest[rest.index(' "') + 1:]
        return _strip_prefix(_git_unquote(after)[0])
    half = (len(rest) - 1) // 2
    if len(rest) % 2 and rest[half] == " " and _strip_prefix(rest[:half]) == _strip_prefix(rest[half + 1:]):
        return _strip_prefix(rest[half + 1:])
    return _strip_prefix(rest.rsplit(" ", 1)[-1])


def diff_paths(patch: str) -> list[tuple[str, bool]]:
    """Each file of a ``git diff``: its new path (``rename to``, ``+++ b/``, else the
    header's) and whether the diff creates it (``new file mode``). Quoted names are
    unquoted as git quotes them; names with blanks are read whole."""
    out = []
    for block in re.split(r"^(?=diff --git )", patch, flags=re.M):
        if not block.startswith("diff --git "):
            continue
        lines = block.split("\n")
        path, created = _header_target(lines[0][len("diff --git "):]), False
        for line in lines[1:]:
            if line.startswith("@@"):
                break
            if line.startswith("new file mode "):
                created = True
            elif line.startswith(("rename to ", "copy to ")):
                name = line.split(" to ", 1)[1]
                path = _git_unquote(name)[0] if name.startswith('"') else name
            elif line.startswith("+++ ") and not line.startswith("+++ /dev/null"):
                name = line[4:]
                path = _strip_prefix(_git_unquote(name)[0] if name.startswith('"') else name.rstrip("\t"))
                break
        out.append((path, created))
    return out


def patched_files(test_patch: str) -> list[str]:
    """Paths the test patch touches, in order, without duplicates."""
    return list(dict.fromkeys(path for path, _ in diff_paths(test_patch)))


def diff_file_count(patch: str) -> int:
    """Files a ``git diff`` changes: one ``diff --git`` header each (quoted names too)."""
    return len(re.findall(r"^diff --git ", patch, re.M))


def created_files(test_patch: str) -> list[str]:
    """Paths the test patch creates (``new file mode``): the eval script's ``git checkout``
    of the test files cannot reset those to the base commit, since they are not in it."""
    return list(dict.fromkeys(path for path, created in diff_paths(test_patch) if created))


def activation_lines(eval_script: str) -> list[str]:
    """The environment set-up an eval script does before its first other command
    (``source /opt/miniconda3/bin/activate``, ``conda activate testbed``, exports):
    episodes run the policy's commands in the same environment."""
    out = []
    for line in eval_script.splitlines():
        stripped = line.strip()
        if (not stripped or stripped.startswith("#") or stripped in ("set -uxo pipefail", "set -euxo pipefail")
                or re.fullmatch(r"cd\s+/\S*", stripped)):  # episodes already start in the repository
            continue
        if not _ACTIVATION.match(stripped):
            break
        out.append(stripped)
    return out


def _where(source: str, index: int, row: Mapping[str, Any] | None = None) -> str:
    iid = row.get("instance_id") if isinstance(row, Mapping) else None
    return f"{source} row {index}" + (f" ({iid!r})" if iid else "")


def _as_list(value: Any, where: str, field: str) -> list[str]:
    """A test list given as a list, JSON text, or Python-literal text."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = json.loads(text)
        except RecursionError:
            raise errors.SpecError(f"{where}: field {field} nests too deeply to be a list of test names") from None
        except ValueError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise errors.SpecError(
                    f"{where}: field {field} is neither a JSON nor a Python list of test names: "
                    f"{text[:120]!r}") from None
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise errors.SpecError(f"{where}: field {field} must be a list of test names (strings), "
                               f"got {type(value).__name__} {str(value)[:120]!r}")
    return list(value)


def _parser_names() -> dict[str, Any]:
    """swebench's parser registry (name -> parser)."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    return dict(PARSER_REGISTRY)


@attrs.frozen(kw_only=True)
class Instance:
    """One task instance; ``raw`` keeps every field of the source row. ``grading`` says
    where the eval script comes from: ``dataset`` (the row's own, graded exactly as
    swebench does) or ``test_cmd`` (a custom instance's pytest-style script)."""

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
    log_parser: str
    eval_type: str
    grading: str
    activation: tuple[str, ...] = ()
    raw: dict[str, Any] = attrs.field(repr=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, namespace: str | None = None,
                 workdir: str = "/testbed", where: str = "instance") -> Instance:
        if not isinstance(row, Mapping):
            raise errors.SpecError(f"{where} is a {type(row).__name__}, not an object of SWE-bench fields.")
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise errors.SpecError(
                f"{where} lacks field(s) {', '.join(missing)}; instances need {', '.join(REQUIRED)}.")
        for key in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch"):
            if not isinstance(row[key], str) or (key != "problem_statement" and not row[key].strip()):
                raise errors.SpecError(f"{where}: field {key} must be a non-empty string, got {row[key]!r:.80}")
        iid = row["instance_id"]
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", iid) or iid.startswith("."):
            raise errors.SpecError(f"{where}: instance_id {iid!r} may only hold letters, digits and _.+-")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./-]*", row["base_commit"]) or ".." in row["base_commit"]:
            # It reaches git command lines (the diff at submit, generated eval scripts).
            raise errors.SpecError(f"{where}: base_commit {row['base_commit']!r:.80} is not a commit id or ref name")
        for key in ("log_parser", "eval_type", "test_cmd", "env_setup", "patch", "version", "image"):
            value = row.get(key)
            if value is not None and not isinstance(value, str) and not (
                    key == "version" and isinstance(value, (int, float)) and not isinstance(value, bool)):
                raise errors.SpecError(f"{where}: field {key} must be a string, got "
                                       f"{type(value).__name__} {value!r:.80}")
        registry = _parser_names()
        constants = _constants()
        eval_script = row.get("eval_script")
        if eval_script is not None and not isinstance(eval_script, str):
            raise errors.SpecError(f"{where}: field eval_script must be a string")
        if eval_script and eval_script.strip():
            grading = "dataset"
            _dataset_row_checks(row, eval_script, where)
            parser = row["log_parser"]
        elif row.get("test_cmd"):
            grading, parser = "test_cmd", row.get("log_parser") or "parse_log_pytest"
        else:
            raise errors.SpecError(
                f"{where} cannot be graded faithfully: it has no eval_script. The installed swebench "
                f"{_version()} grades from each row's eval_script, log_parser, eval_type and image "
                f"(harness.utils.make_test_spec) and has no per-repo spec tables to rebuild them from; "
                f"grading it with a guessed script would be wrong without warning. {OFFICIAL_HINT}")
        if parser not in registry:
            raise errors.SpecError(f"{where}: log_parser {parser!r} is not in swebench's PARSER_REGISTRY "
                                   f"({_version()}); choose one of: {', '.join(sorted(registry))}")
        fail_only = row["repo"] in getattr(constants, "FAIL_ONLY_REPOS", set())
        eval_type = row.get("eval_type") or ("fail_only" if fail_only else "pass_and_fail")
        if eval_type not in {e.value for e in constants.EvalType}:
            raise errors.SpecError(f"{where}: eval_type {eval_type!r} is not one of "
                                   f"{sorted(e.value for e in constants.EvalType)}")
        if row.get("image_assets"):
            raise errors.SpecError(
                f"{where} declares image_assets: swebench fetches those binary test files from their "
                "URLs at evaluation time, and envh downloads nothing while it runs. Bake them into "
                "the image and drop image_assets, or grade this row with swebench's own harness.")
        image = row.get("image") or default_image(iid, namespace)
        if not isinstance(image, str):
            raise errors.SpecError(f"{where}: field image must be a string")
        script = str(eval_script or "")
        activation = activation_lines(script) if grading == "dataset" else (
            [str(row["env_setup"])] if row.get("env_setup") else [])
        return cls(
            instance_id=iid, repo=row["repo"], base_commit=row["base_commit"],
            problem_statement=row["problem_statement"], patch=str(row.get("patch") or ""),
            test_patch=row["test_patch"], fail_to_pass=_as_list(row["FAIL_TO_PASS"], where, "FAIL_TO_PASS"),
            pass_to_pass=_as_list(row["PASS_TO_PASS"], where, "PASS_TO_PASS"),
            version=str(row.get("version") or ""), image=image,
            test_cmd=str(row.get("test_cmd") or ""), workdir=workdir, log_parser=parser,
            eval_type=eval_type, grading=grading, activation=tuple(activation), raw=dict(row))

    def eval_script(self) -> str:
        """The row's ``eval_script``, verbatim; for a ``test_cmd`` instance one built like
        SWE-bench's: reset the test files, apply the test patch, run the tests between
        the markers, reset the test files."""
        if self.grading == "dataset":
            return str(self.raw["eval_script"])
        touched = patched_files(self.test_patch)
        files = " ".join(shlex.quote(f) for f in touched)
        # Only files the base commit has: one path git does not know fails the whole checkout.
        new = set(created_files(self.test_patch))
        existing = " ".join(shlex.quote(f) for f in touched if f not in new)
        delim = f"EOF_{uuid.uuid5(uuid.NAMESPACE_URL, self.test_patch).hex}"
        lines = ["#!/bin/bash", "set -uxo pipefail", *self.activation, f"cd {self.workdir}",
                 *([f"git checkout {self.base_commit} {existing}"] if existing else []),
                 f"git apply -v - <<'{delim}'\n{self.test_patch.rstrip(chr(10))}\n{delim}",
                 f": '{START}'", f"{self.test_cmd} {files}", f": '{END}'",
                 *([f"git checkout {self.base_commit} {existing}"] if existing else [])]
        return "\n".join(lines) + "\n"

    def command_prefix(self) -> str:
        """What runs before each policy command: the eval script's environment set-up."""
        if not self.activation:
            return ""
        return "; ".join(f"{line} >/dev/null 2>&1" if "activate" in line else line
                         for line in self.activation) + "; "


def _dataset_row_checks(row: Mapping[str, Any], eval_script: str, where: str) -> None:
    """A row graded by its own eval_script needs what swebench's ``make_test_spec`` reads
    (it raises KeyError without them) and the markers ``get_logs_eval`` slices the log at
    (without them every log grades unresolved): refused here, never filled with defaults."""
    for key in ("log_parser", "eval_type", "version"):
        if row.get(key) in (None, ""):
            raise errors.SpecError(
                f"{where} has an eval_script but no {key}: swebench's make_test_spec needs it to grade "
                f"the row (it raises KeyError). Take the row from a current SWE-bench dataset, or set {key}.")
    missing = [m for m in (START, END) if m not in eval_script]
    if missing:
        raise errors.SpecError(
            f"{where}: its eval_script does not print {' or '.join(repr(m) for m in missing)}; swebench "
            "grades only the test output between those markers, so every patch would grade unresolved.")


def _constants() -> Any:
    from swebench.harness import constants
    return constants


def _version() -> str:
    import swebench
    return f"swebench {getattr(swebench, '__version__', '?')}"


# -- files ------------------------------------------------------------------------------
class _DuplicateKey(Exception):
    """A JSON object names the same key twice (json keeps the last without a word)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _loads(text: str) -> Any:
    """``json.loads`` that refuses an object with a repeated key: a second row under the
    same instance id, or a field given twice, would otherwise replace the first unseen."""
    return json.loads(text, object_pairs_hook=_unique)


def _read_text(path: Path) -> str:
    try:  # utf-8-sig: files saved by some Windows tools start with a byte-order mark
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8-sig") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8-sig")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise errors.SpecError(f"Could not read SWE-bench instances file {path}: {exc}") from exc


def _jsonl(text: str, source: str) -> list[Any]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(_loads(line))
        except _DuplicateKey as exc:
            raise errors.SpecError(f"{source} line {number} names key {exc.args[0]!r} twice in one object.") from None
        except RecursionError:
            raise errors.SpecError(f"{source} line {number} nests its JSON too deeply.") from None
        except ValueError as exc:
            raise errors.SpecError(f"{source} line {number} is not JSON: {exc}") from None
    return rows


def _from_json(data: Any, source: str) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        if "instance_id" in data:
            return [data]
        if data and all(isinstance(v, dict) for v in data.values()):  # keyed by instance id
            rows = []
            for key, row in data.items():
                if row.get("instance_id", key) != key:
                    raise errors.SpecError(f"{source}: entry {key!r} holds instance_id "
                                           f"{row['instance_id']!r}; the key and the id must agree.")
                rows.append({**row, "instance_id": key})
            return rows
    raise errors.SpecError(f"{source} holds a {type(data).__name__} that is neither a list of instance "
                           "rows, one row, nor an object of rows keyed by instance_id.")


def _rows(source: str | Path) -> list[Any]:
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
    if not path.is_file():
        raise errors.SpecError(f"SWE-bench instances path {text!r} is not a file.")
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq
        try:
            return pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises its own error types
            raise errors.SpecError(f"Could not read Parquet file {path}: {exc}") from exc
    body = _read_text(path)
    if not body.strip():
        raise errors.SpecError(f"SWE-bench instances file {path} is empty.")
    if name.endswith(".jsonl"):
        return _jsonl(body, str(path))
    try:
        data = _loads(body)
    except _DuplicateKey as exc:
        raise errors.SpecError(f"{path} names key {exc.args[0]!r} twice in one object (a second row "
                               "under one instance id, or a field given twice).") from None
    except RecursionError:
        raise errors.SpecError(f"{path} nests its JSON too deeply to be instance rows.") from None
    except ValueError as exc:
        # JSON Lines saved as .json: one object per line.
        if body.lstrip().startswith("{") and "\n" in body.strip():
            return _jsonl(body, str(path))
        raise errors.SpecError(f"{path} is not JSON: {exc}") from None
    return _from_json(data, str(path))


def load_instances(source: str | Path | Iterable[Mapping[str, Any]], *, namespace: str | None = None,
                   workdir: str = "/testbed") -> dict[str, Instance]:
    """Instances by id from a .json / .jsonl / .parquet file (each optionally .gz),
    ``hf://NAME@SPLIT`` (HF datasets, where reachable) or an iterable of rows. Every row
    is checked here: a row that cannot be graded faithfully stops the load."""
    label = str(source) if isinstance(source, (str, Path)) else "rows"
    rows = _rows(source) if isinstance(source, (str, Path)) else list(source)
    if not rows:
        raise errors.SpecError(f"SWE-bench instances {label}: no rows.")
    out: dict[str, Instance] = {}
    for index, row in enumerate(rows):
        where = _where(label, index, row if isinstance(row, Mapping) else None)
        inst = Instance.from_row(row, namespace=namespace, workdir=workdir, where=where)
        if inst.instance_id in out:
            raise errors.SpecError(f"Duplicate SWE-bench instance id {inst.instance_id!r} in {label:.200}.")
        out[inst.instance_id] = inst
    return out
