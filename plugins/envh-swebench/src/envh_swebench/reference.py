"""SWE-bench's reference solution from the current state: the instance's gold patch,
applied through the bash tool on the working tree as it stands, then submit.

The gold patch is written against the base commit. One ``bash`` call writes it to a file
and applies it to whatever the episode (a stage, the policy) left in the repository:

* already applied (``git apply -R --check`` passes): nothing to do;
* applies cleanly (``git apply --check``): ``git apply``; the state's other changes stay;
* otherwise the files the gold patch touches go back to the base commit (files it creates
  are removed) and the patch is applied to them; changes to other files stay.

Then ``submit``; the sealed grader decides. So a stage is judged by whether the gold patch
still wins on the tree it leaves: one that edits a file the gold patch changes does not
break it (the file is restored), one that breaks a module the tests import, or the
repository itself, does. ``None`` once submitted, or without a gold patch.
"""

from __future__ import annotations

import codecs
import re
import shlex
from typing import Any

from envh import Action

GOLD_PATH = "/tmp/envh_gold.diff"
_OLD = re.compile(r'^--- (?:"?a/(?P<path>.+?)"?\t?|/dev/null)$')
_NEW = re.compile(r'^\+\+\+ (?:"?b/(?P<path>.+?)"?\t?|/dev/null)$')
_RENAME = re.compile(r'^(?P<what>rename|copy) (?P<end>from|to) (?P<path>.+)$')


def _unquote(path: str) -> str:
    """Git's C-quoting (``"a/sp\\303\\251.py"``) undone; a plain path as it is."""
    if "\\" not in path:
        return path
    try:
        return codecs.escape_decode(path.encode("utf-8"))[0].decode("utf-8")  # type: ignore[attr-defined]
    except (ValueError, UnicodeDecodeError):
        return path


def gold_paths(patch: str) -> tuple[list[str], list[str]]:
    """(paths the patch changes, deletes or renames away from, which exist at the base commit;
    paths it creates, a rename's or copy's target included). Quoted paths are unquoted."""
    old: list[str] = []
    new: list[str] = []
    before: str | None = None

    def add(bucket: list[str], path: str | None) -> None:
        if path is not None and path not in bucket:
            bucket.append(path)

    for line in patch.splitlines():
        if (m := _RENAME.match(line)) is not None:
            path = _unquote(m.group("path").strip('"'))
            if m.group("end") == "to":
                add(new, path)
            elif m.group("what") == "rename":  # a copy's source stays as it is
                add(old, path)
            continue
        if (m := _OLD.match(line)) is not None:
            before = _unquote(m.group("path")) if m.group("path") else None
            continue
        if (m := _NEW.match(line)) is not None:
            after = _unquote(m.group("path")) if m.group("path") else None
            add(old, before)
            if after is not None and after != before:
                add(new, after)
            before = None
    return old, new


def apply_command(patch: str, base_commit: str) -> str:
    """The bash command that writes the gold patch and applies it from any working tree."""
    marker = "ENVH_GOLD_PATCH_END"
    while marker in patch:
        marker += "_"
    patch = patch if patch.endswith("\n") else patch + "\n"
    old, new = gold_paths(patch)
    restore = []
    if new:
        restore.append("rm -rf -- " + " ".join(shlex.quote(p) for p in new))
    if old:
        restore.append(f"git checkout {shlex.quote(base_commit)} -- " + " ".join(shlex.quote(p) for p in old))
    restore.append(f"git apply {GOLD_PATH}")
    return (f"cat > {GOLD_PATH} <<'{marker}'\n{patch}{marker}\n"
            f"if git apply -R --check {GOLD_PATH} 2>/dev/null; then echo 'gold patch already applied'\n"
            f"elif git apply --check {GOLD_PATH} 2>/dev/null; then git apply {GOLD_PATH}\n"
            f"else {' && '.join(restore)}\nfi\n"
            f"status=$?; rm -f {GOLD_PATH}; exit $status")  # the patch file is not left for the policy to read


def gold_patch_actions(env: Any) -> list[Action] | None:
    """``bash`` (write + apply the gold patch from here) and ``submit``, or ``None``."""
    episode = getattr(env, "_episode", None)
    inst = getattr(env, "inst", None)
    state = getattr(env, "state", None)
    if episode is None or inst is None or not getattr(inst, "patch", "") or state is None or state.submitted:
        return None
    return [Action(tool="bash", args={"command": apply_command(inst.patch, inst.base_commit)}),
            Action(tool="submit")]
