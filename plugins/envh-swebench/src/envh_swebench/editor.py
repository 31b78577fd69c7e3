"""``str_replace_editor``: SWE-agent's file editor, over container archives.

Reads and writes go through Docker's archive API (no process in the container);
resolving a path, listing a directory and creating parent folders use the sandbox's
runner. Every path must resolve (symbolic links followed, in the container) inside the
repository, and the editor works on where it leads (a link to a file in the repository
is edited through). ``view`` shows at most ``view_limit`` characters and says how to see the
rest. Every edit keeps the previous contents so ``undo_edit`` can restore them. Mistakes
(a missing file, an ambiguous ``old_str``, a path outside the repository) raise
``EditorError``, which the bridge turns into an error observation.
"""

from __future__ import annotations

import posixpath
import shlex
from typing import Any

import attrs

from .containers import FileTooLargeError, NoSpaceError, NotRegularFileError, Sandbox

COMMANDS = ["view", "create", "str_replace", "insert", "undo_edit"]
SNIPPET_LINES = 4
VIEW_LIMIT = 16_000
MAX_FILE_BYTES = 4 * 2**20  # the editor shows and edits text files up to this size
TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": COMMANDS, "description": "the operation"},
        "path": {"type": "string", "description": "file or directory; relative paths start at the repository root"},
        "file_text": {"type": "string", "description": "create: the new file's contents"},
        "old_str": {"type": "string", "description": "str_replace: text that occurs exactly once in the file"},
        "new_str": {"type": "string", "description": "str_replace: replacement (default empty); insert: text to insert"},
        "insert_line": {"type": "integer", "description": "insert: new_str goes after this line (0 = top)"},
        "view_range": {"type": "array", "items": {"type": "integer"},
                       "description": "view: [first, last] line numbers, 1-based; last -1 means end of file"},
    },
    "required": ["command", "path"],
    "additionalProperties": False,
}


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else f"{text[:n]}[... {len(text) - n} more characters]"


class EditorError(Exception):
    """A policy mistake in an editor call; the message is shown to the policy."""


def numbered(text: str, start: int = 1) -> str:
    """``cat -n`` style: right-aligned line numbers and a tab."""
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(text.split("\n"), start))


@attrs.define
class Editor:
    """The editor of one episode; ``history`` maps path → earlier contents (None: absent)."""

    box: Sandbox
    history: dict[str, list[str | None]] = attrs.Factory(dict)
    view_limit: int = VIEW_LIMIT

    def resolve(self, path: str) -> str:
        """The absolute path, lexically (no container access)."""
        return posixpath.normpath(posixpath.join(self.box.workdir, str(path)))

    def _inside(self, path: str) -> bool:
        root = posixpath.normpath(self.box.workdir)
        return path == root or path.startswith(root.rstrip("/") + "/")

    def confine(self, raw: str) -> str:
        """``raw`` resolved in the container (links followed), the path the editor then
        reads and writes (Docker's archive API would take a link as itself, not its
        target); EditorError when it leads outside the repo."""
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            raise EditorError("Parameter `path` must be a non-empty path string.")
        if len(raw) > 4096 or any(len(part.encode()) > 255 for part in raw.split("/")):
            raise EditorError(f"The path {_short(raw, 100)} is too long (at most 4096 characters, "
                              "255 bytes per part).")
        path = self.resolve(raw)
        if not self._inside(path):
            raise EditorError(f"The path {path} is outside the repository {self.box.workdir}; "
                              "the editor only works on files inside it.")
        res = self.box.run(f"realpath -m -- {shlex.quote(path)}", timeout=30, limit=8000)
        real = res["output"].strip()
        if res["exit_code"] != 0 or not real:
            raise EditorError(f"The path {path} cannot be resolved: {res['output'].strip()[:200]}")
        root = self.box.run(f"realpath -m -- {shlex.quote(self.box.workdir)}", timeout=30, limit=8000)
        root_real = root["output"].strip()
        if not (real == root_real or real.startswith(root_real.rstrip("/") + "/")):
            raise EditorError(f"The path {path} leads outside the repository {self.box.workdir} "
                              f"(to {real}); the editor only works on files inside it.")
        # The same place under the repository path as given (its root may be a link too).
        return posixpath.normpath(posixpath.join(self.box.workdir, posixpath.relpath(real, root_real)))

    def __call__(self, args: Any) -> tuple[str, str | None]:
        """Run one call; returns (text for the policy, path written or None)."""
        path = self.confine(args["path"])
        command = args["command"]
        if command == "view":
            return self.view(path, args.get("view_range")), None
        if command == "create":
            if "file_text" not in args:
                raise EditorError("Parameter `file_text` is required for command: create.")
            return self.create(path, str(args["file_text"])), path
        if command == "str_replace":
            if "old_str" not in args:
                raise EditorError("Parameter `old_str` is required for command: str_replace.")
            return self.str_replace(path, str(args["old_str"]), str(args.get("new_str") or "")), path
        if command == "insert":
            if "insert_line" not in args or "new_str" not in args:
                raise EditorError("Parameters `insert_line` and `new_str` are required for command: insert.")
            if not isinstance(args["insert_line"], int) or isinstance(args["insert_line"], bool):
                raise EditorError("Parameter `insert_line` must be an integer.")
            return self.insert(path, args["insert_line"], str(args["new_str"])), path
        return self.undo(path), path

    def _read_bytes(self, path: str, too_large: str = "use bash (head, sed -n, grep) on it") -> tuple[bytes, int]:
        """Contents and mode of a regular file of at most MAX_FILE_BYTES: the size is
        checked before anything is read, so a large (or sparse) file costs no memory."""
        try:
            return self.box.read_file(path, max_bytes=MAX_FILE_BYTES)
        except FileTooLargeError as exc:
            raise EditorError(f"The file {path} holds {exc.size} bytes, more than the editor handles "
                              f"({MAX_FILE_BYTES}); {too_large}.") from None
        except FileNotFoundError:
            raise EditorError(f"The path {path} does not exist. Please provide a valid path.") from None
        except IsADirectoryError:
            raise EditorError(f"The path {path} is a directory; this command needs a file.") from None
        except NotRegularFileError:
            raise EditorError(f"The path {path} is not a regular file (a FIFO, device or link).") from None

    def _read(self, path: str) -> tuple[str, int]:
        data, mode = self._read_bytes(path)
        try:
            return data.decode("utf-8"), mode
        except UnicodeDecodeError:
            raise EditorError(f"The file {path} is not UTF-8 text; the editor cannot show or edit it.") from None

    def _write(self, path: str, text: str, mode: int, before: str | None) -> None:
        try:
            self.box.write_file(path, text.encode("utf-8"), mode)
        except NoSpaceError:  # a cut-off file is left: put back what was there (it fitted)
            try:
                if before is None:
                    self.box.run(f"rm -f -- {shlex.quote(path)}", timeout=30, limit=200)
                else:
                    self.box.write_file(path, before.encode("utf-8"), mode)
            except NoSpaceError:
                pass
            raise EditorError(f"No space left on device: the repository's disk limit is reached, so {path} "
                              "was left as it was; delete what you do not need and try again.") from None
        self.history.setdefault(path, []).append(before)

    def view(self, path: str, view_range: list[int] | None) -> str:
        try:
            text, _ = self._read(path)
        except EditorError as exc:
            if "is a directory" not in str(exc):
                raise
            if view_range:
                raise EditorError("The `view_range` parameter is not allowed when `path` points to a directory.") from None
            res = self.box.run(f"find {shlex.quote(path)} -maxdepth 2 -not -path '*/.*' | sort",
                               timeout=30, limit=self.view_limit)
            return (f"Here's the files and directories up to 2 levels deep in {path}, excluding "
                    f"hidden items:\n{res['output']}")
        lines = text.split("\n")
        if view_range is None:
            return self._capped(path, lines, 1)
        if (not isinstance(view_range, (list, tuple)) or len(view_range) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)):
            raise EditorError("Invalid `view_range`: it should be a list of two integers.")
        first, last = view_range
        if not 1 <= first <= len(lines):
            raise EditorError(f"Invalid `view_range` {view_range}: the first element should be within [1, {len(lines)}].")
        if last != -1 and not first <= last <= len(lines):
            raise EditorError(f"Invalid `view_range` {view_range}: the second element should be -1 or within [{first}, {len(lines)}].")
        shown = lines[first - 1:] if last == -1 else lines[first - 1:last]
        return self._capped(path, shown, first, total=len(lines))

    def _capped(self, path: str, lines: list[str], first: int, total: int | None = None) -> str:
        """``cat -n`` of ``lines`` (numbered from ``first``) within ``view_limit``
        characters; when cut, the text says which lines it shows and how to see more."""
        total = len(lines) + first - 1 if total is None else total
        head = f"Here's the result of running `cat -n` on {path}:\n"
        out, used = [], len(head)
        for i, line in enumerate(lines, first):
            row = f"{i:6}\t{line}"
            if used + len(row) + 1 > self.view_limit:
                break
            out.append(row)
            used += len(row) + 1
        if len(out) == len(lines):
            return head + "\n".join(out) + "\n"
        last = first + len(out) - 1
        if not out:  # one line longer than the whole budget
            cut = lines[0][: max(0, self.view_limit - len(head) - 200)]
            out, last = [f"{first:6}\t{cut}"], first
            note = f"[line {first} is {len(lines[0])} characters long; showing its start]"
        else:
            note = ""
        return (head + "\n".join(out) + "\n" + (note + "\n" if note else "")
                + f"[output cut at {self.view_limit} characters: showing lines {first}-{last} of {total}; "
                f"use `view_range` [{last + 1}, ...] to see the rest, or grep/sed in bash]\n")

    def create(self, path: str, file_text: str) -> str:
        try:
            self.box.read_file(path, max_bytes=0)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            raise EditorError(f"The path {path} is a directory; cannot create a file there.") from None
        except (NotRegularFileError, FileTooLargeError):
            raise EditorError(f"File already exists at: {path}. Cannot overwrite files using command `create`.") from None
        else:
            raise EditorError(f"File already exists at: {path}. Cannot overwrite files using command `create`.")
        parent = posixpath.dirname(path)
        made = self.box.run(f"mkdir -p -- {shlex.quote(parent)}", timeout=30, limit=2000)
        if made["exit_code"] != 0:
            raise EditorError(f"Cannot create {path}: {made['output'].strip()[:300]}")
        try:
            self._write(path, file_text, 0o644, None)
        except FileNotFoundError:
            raise EditorError(f"Cannot create {path}: its folder {parent} cannot be made.") from None
        return f"File created successfully at: {path}"

    def str_replace(self, path: str, old: str, new: str) -> str:
        if old == new:
            raise EditorError("No replacement was performed: `old_str` and `new_str` are the same.")
        if not old:
            raise EditorError("Parameter `old_str` must not be empty.")
        text, mode = self._read(path)
        count = text.count(old)
        if count == 0:
            raise EditorError(f"No replacement was performed, old_str `{_short(old)}` did not appear verbatim in {path}.")
        if count > 1:
            at = [i + 1 for i, line in enumerate(text.split("\n")) if old.split("\n")[0] in line]
            raise EditorError(f"No replacement was performed. Multiple occurrences of old_str `{_short(old)}` "
                              f"in lines {at}. Please ensure it is unique.")
        result = text.replace(old, new)
        self._write(path, result, mode, text)
        line = text.split(old)[0].count("\n")
        return self._snippet(path, result, line, new.count("\n"))

    def insert(self, path: str, insert_line: int, new: str) -> str:
        text, mode = self._read(path)
        lines = text.split("\n")
        if not 0 <= insert_line <= len(lines):
            raise EditorError(f"Invalid `insert_line` parameter: {insert_line}. It should be within "
                              f"the range of lines of the file: [0, {len(lines)}].")
        result = "\n".join(lines[:insert_line] + new.split("\n") + lines[insert_line:])
        self._write(path, result, mode, text)
        return self._snippet(path, result, insert_line, new.count("\n"))

    def undo(self, path: str) -> str:
        stack = self.history.get(path)
        if not stack:
            raise EditorError(f"No edit history found for {path}.")
        before = stack[-1]
        if before is None:  # bash may since have put a directory there: say so, keep the edit
            gone = self.box.run(f"rm -f -- {shlex.quote(path)}", timeout=30, limit=2000)
            if gone["exit_code"] != 0:
                raise EditorError(f"The last edit to {path} (its creation) was not undone: "
                                  f"{gone['output'].strip()[:300]}")
            stack.pop()
            return f"Last edit to {path} undone: the file created by it was removed."
        # What is there now (kept to put back if the write fails), read as any file the
        # editor reads: bash may since have removed it, put a directory there or grown it.
        # A failed undo leaves the history as it was.
        current, mode = self._read_bytes(path, too_large=(
            f"the edit was not undone; restore the file with bash (e.g. `git checkout -- {path}`) "
            "or make it smaller first"))
        stack.pop()
        try:
            self.box.write_file(path, before.encode("utf-8"), mode)
        except NoSpaceError:  # as in _write: the file stays as it was, the edit stays undoable
            stack.append(before)
            try:
                self.box.write_file(path, current, mode)
            except NoSpaceError:
                pass
            raise EditorError(f"No space left on device: the repository's disk limit is reached, so the last "
                              f"edit to {path} was not undone; delete what you do not need and try again.") from None
        return f"Last edit to {path} undone successfully. {self.view(path, None)}"

    def _snippet(self, path: str, text: str, line: int, added: int) -> str:
        lines = text.split("\n")
        first = max(0, line - SNIPPET_LINES)
        shown = numbered("\n".join(lines[first:line + added + SNIPPET_LINES + 1]), first + 1)
        if len(shown) > self.view_limit:
            shown = shown[:self.view_limit] + "\n[snippet cut; view the file with `view_range` to see more]"
        return (f"The file {path} has been edited. Here's the result of running `cat -n` on a "
                f"snippet of {path}:\n{shown}\n"
                "Review the changes and make sure they are as expected. Edit the file again if necessary.")
