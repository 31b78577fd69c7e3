"""The OfficeQA corpus as a confined, bounded file system: glob, read and grep.

Every path a policy names is resolved against the corpus root and must stay inside it
after ``realpath`` (``..``, absolute paths and symlinks that lead out are refused;
symlinks inside the corpus are followed). The file index is built once per corpus
without following directory symlinks. Outputs are bounded and say what they cut.
User patterns run on RE2 (``google-re2``): linear time, a memory cap, no backtracking,
so no pattern can hang the environment.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import attrs
import re2

PAGE_MARK = re.compile(r"^--- PAGE (\d+) ---\s*$")
DOC_NAME = re.compile(r"(treasury_bulletin_\d{4}_\d{2})(?:_(\d+))?\.txt$")
LINE_CHARS = 1000          # a line longer than this is cut in read() output
GREP_LINE_CHARS = 300      # ... and in grep() output
MAX_READ_LINES = 400
MAX_HITS = 200
MAX_GLOB_LIST = 200
MAX_FILE_BYTES = 64 << 20  # grep skips larger files and says so
RE2_MAX_MEM = 32 << 20


class CorpusError(Exception):
    """A policy's request cannot be served (bad path, bad pattern); the message is shown."""


@attrs.frozen
class ReadResult:
    text: str
    doc: str
    pages: tuple[int, ...]
    lines: int


@attrs.frozen
class GrepResult:
    text: str
    hits: int
    files: int


def doc_of(rel: str) -> str:
    """The bulletin a corpus path belongs to (``treasury_bulletin_1941_01``), else its name."""
    m = DOC_NAME.search(rel)
    return m.group(1) if m else rel.rsplit("/", 1)[-1]


def page_of_file(rel: str) -> int | None:
    """The page of a one-page-per-file path (``..._1941_01_15.txt`` → 15)."""
    m = DOC_NAME.search(rel)
    return int(m.group(2)) if m and m.group(2) is not None else None


def glob_regex(pattern: str) -> re2._Regexp:
    """Translate a glob (``*``, ``?``, ``[...]``, ``**``, ``{a,b}``) over '/'-paths."""
    if len(pattern) > 1000:  # before translating: '[' and '{' each scan ahead (quadratic)
        raise CorpusError("The glob pattern is longer than 1000 characters.")
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        elif ch == "{":
            end = pattern.find("}", i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                alts = pattern[i + 1:end].split(",")
                out.append("(?:" + "|".join(glob_regex(a).pattern[4:-1] for a in alts) + ")")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False
    try:  # RE2: linear time whatever the pattern
        return re2.compile("(?s:" + "".join(out) + ")", options)
    except re2.error as exc:
        raise CorpusError(f"Invalid glob pattern {pattern[:200]!r}.") from exc


def _check_relative(what: str, value: str) -> str:
    value = value.strip()
    if "\x00" in value:
        raise CorpusError(f"The {what} contains a NUL byte.")
    if value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", value):
        raise CorpusError(f"The {what} {value[:200]!r} is absolute; name paths relative to the corpus root.")
    if ".." in value.replace("\\", "/").split("/"):
        raise CorpusError(f"The {what} {value[:200]!r} leaves the corpus ('..' is not allowed).")
    return value


class Corpus:
    """A confined view of one corpus directory (``root``)."""

    def __init__(self, root: str | os.PathLike[str], *, hidden: tuple[str, ...] = ()) -> None:
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"OfficeQA corpus directory not found: {root}")
        # files that must never be served even if they sit inside the corpus (the question
        # CSV with its gold answers, the split manifest)
        # (by inode too, so a hard link is caught), and anything that looks like a question
        # table: the benchmark ships officeqa.csv, officeqa_full.csv and officeqa_pro.csv side
        # by side, with the same answers in each.
        self.hidden = frozenset(os.path.realpath(h) for h in hidden)
        self._hidden_ids = frozenset(_file_id(h) for h in self.hidden if os.path.exists(h))
        self.files: list[str] = [f for f in _index(self.root)
                                 if not self._is_hidden(os.path.realpath(os.path.join(self.root, f)))]

    def _is_hidden(self, real: str) -> bool:
        if real in self.hidden or _file_id(real) in self._hidden_ids:
            return True
        return _looks_like_questions(real)

    # -- paths ------------------------------------------------------------------------
    def resolve(self, path: str) -> tuple[str, str]:
        """(real path, corpus-relative path) of a file inside the corpus, or CorpusError."""
        rel = _check_relative("path", path).strip("/") or "."
        real = os.path.realpath(os.path.join(self.root, rel))
        if real != self.root and not real.startswith(self.root + os.sep):
            raise CorpusError(f"The path {path[:200]!r} resolves outside the corpus; refused.")
        if not os.path.isfile(real) or self._is_hidden(real):
            near = [f for f in self.files if doc_of(f) == doc_of(rel)][:5]
            hint = f" Did you mean: {', '.join(near)}?" if near else " Use glob() to list files."
            raise CorpusError(f"No file {rel[:200]!r} in the corpus.{hint}")
        return real, rel

    def glob(self, pattern: str, allowed: list[str] | None = None) -> list[str]:
        pattern = _check_relative("pattern", pattern or "**") or "**"
        regex = glob_regex(pattern)
        return [f for f in (allowed if allowed is not None else self.files) if regex.fullmatch(f)]

    # -- tools ------------------------------------------------------------------------
    def list_text(self, pattern: str) -> str:
        found = self.glob(pattern)
        if not found:
            return f"No files match {pattern!r}."
        shown = found[:MAX_GLOB_LIST]
        tail = (f"\n[{len(found) - len(shown)} more matches not shown; narrow the pattern]"
                if len(found) > len(shown) else "")
        return f"{len(found)} file(s) match {pattern!r}:\n" + "\n".join(shown) + tail

    def read(self, path: str, start: int = 1, limit: int = 200) -> ReadResult:
        real, rel = self.resolve(path)
        start, limit = max(1, int(start)), max(1, min(int(limit), MAX_READ_LINES))
        page, pages, out, cut = page_of_file(rel), set(), [], 0
        lineno, more = 0, False
        with open(real, "rb") as f:
            for lineno, (raw, was_cut) in enumerate(_lines(f), start=1):
                text = raw.decode("utf-8", "replace")
                mark = PAGE_MARK.match(text)
                if mark:
                    page = int(mark.group(1))
                if lineno < start:
                    continue
                if lineno >= start + limit:
                    more = True
                    break
                if page is not None:
                    pages.add(page)
                if was_cut or len(text) > LINE_CHARS:
                    text, cut = text[:LINE_CHARS] + " [... line cut]", cut + 1
                out.append(f"{lineno:6d}\t{text}")
        if start > lineno and not out:
            raise CorpusError(f"{rel} has {lineno} line(s); start={start} is past its end.")
        last = start + len(out) - 1
        footer = (f"[lines {start}-{last} of {rel}; more follow: read(path={rel!r}, start={last + 1})]"
                  if more else f"[lines {start}-{last} of {rel}; end of file]")
        if cut:
            footer += f"\n[{cut} line(s) longer than {LINE_CHARS} characters were cut]"
        return ReadResult(text="\n".join(out) + "\n" + footer, doc=doc_of(rel),
                          pages=tuple(sorted(pages)), lines=len(out))

    def grep(self, pattern: str, path_glob: str = "**", max_hits: int = 50,
             ignore_case: bool = False, allowed: list[str] | None = None) -> GrepResult:
        regex = compile_user_pattern(pattern, ignore_case)
        files = self.glob(path_glob or "**", allowed)
        if not files:
            raise CorpusError(f"No files match path_glob {path_glob!r}.")
        max_hits = max(1, min(int(max_hits), MAX_HITS))
        lines_out, hits, skipped, truncated = [], 0, [], False
        for rel in files:
            try:
                real, _ = self.resolve(rel)
            except CorpusError:
                continue
            if os.path.getsize(real) > MAX_FILE_BYTES:
                skipped.append(rel)
                continue
            with open(real, "rb") as f:
                data = f.read()
            for lineno, line in _grep_bytes(regex, data):
                if hits == max_hits:
                    truncated = True
                    break
                hits += 1
                text = line.decode("utf-8", "replace")
                if len(text) > GREP_LINE_CHARS:
                    text = text[:GREP_LINE_CHARS] + " [... line cut]"
                lines_out.append(f"{rel}:{lineno}: {text}")
            if truncated:
                break
        head = f"{hits} matching line(s) for {pattern!r} in {len(files)} file(s)"
        if truncated:
            head += f" [stopped at max_hits={max_hits}; more matches exist: narrow the pattern or path_glob]"
        if skipped:
            head += f" [skipped {len(skipped)} file(s) over {MAX_FILE_BYTES >> 20} MB]"
        return GrepResult(text=head + (":\n" + "\n".join(lines_out) if lines_out else "."),
                          hits=hits, files=len(files))


def _file_id(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


QUESTION_TABLE_NAMES = re.compile(r"officeqa.*\.(csv|jsonl?|parquet)$|split.*\.json$", re.IGNORECASE)


def _looks_like_questions(real: str) -> bool:
    """A question table or split manifest, by name or by a CSV header naming answers."""
    name = os.path.basename(real)
    if QUESTION_TABLE_NAMES.search(name):
        return True
    if not name.lower().endswith((".csv", ".tsv", ".json", ".jsonl")):
        return False
    try:
        with open(real, "rb") as f:
            head = f.read(4096).lower()
    except OSError:
        return True
    return b"answer" in head and (b"uid" in head or b"question" in head)


def compile_user_pattern(pattern: str, ignore_case: bool = False) -> re2._Regexp:
    """Compile a policy's regex with RE2 (bytes, UTF-8, memory-capped)."""
    if not pattern:
        raise CorpusError("The grep pattern is empty.")
    if len(pattern) > 2000:
        raise CorpusError("The grep pattern is longer than 2000 characters.")
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        return re2.compile(pattern.encode("utf-8"), options)
    except re2.error as exc:
        raise CorpusError(f"Invalid or unsupported pattern {pattern[:200]!r} ({exc}); RE2 syntax: "
                          "no backreferences or lookaround.") from exc


def _grep_bytes(regex: re2._Regexp, data: bytes) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each line with a match; one search call per hit line."""
    newlines: list[int] | None = None
    pos, end = 0, len(data)
    while pos <= end:
        m = regex.search(data, pos)
        if m is None:
            return
        s = m.start()
        line_start = data.rfind(b"\n", 0, s) + 1
        line_end = data.find(b"\n", s)
        line_end = end if line_end < 0 else line_end
        if newlines is None:
            newlines = _newlines(data)
        lineno = bisect.bisect_left(newlines, line_start) + 1
        yield lineno, data[line_start:line_end].rstrip(b"\r")
        pos = line_end + 1


def _newlines(data: bytes) -> list[int]:
    out, i = [], data.find(b"\n")
    while i >= 0:
        out.append(i)
        i = data.find(b"\n", i + 1)
    return out


def _lines(f: object, cap: int = LINE_CHARS * 4) -> Iterator[tuple[bytes, bool]]:
    """Lines of a binary file without ever holding more than ``cap`` bytes of one."""
    readline = f.readline  # type: ignore[attr-defined]
    while True:
        chunk = readline(cap)
        if not chunk:
            return
        if chunk.endswith(b"\n") or len(chunk) < cap:
            yield chunk.rstrip(b"\r\n"), False
            continue
        while True:  # drop the rest of an over-long line
            rest = readline(1 << 16)
            if not rest or rest.endswith(b"\n"):
                break
        yield chunk, True


@lru_cache(maxsize=8)
def _index_cached(root: str, stamp: float) -> tuple[str, ...]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            full = os.path.join(dirpath, name)
            real = os.path.realpath(full)
            if real.startswith(root + os.sep) and os.path.isfile(real):
                out.append(Path(full).relative_to(root).as_posix())
    return tuple(out)


def _index(root: str) -> list[str]:
    return list(_index_cached(root, os.stat(root).st_mtime))
