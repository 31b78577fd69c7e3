"""``undo_edit`` after bash changed the file: an error observation, within bounded memory.

The editor runs here on a box whose files are a host directory (``HostBox`` keeps
``Sandbox``'s contract for the calls the editor makes: the same exceptions, and a whole
read unless ``max_bytes`` bounds it), so these run without Docker; the same steps through
a real container are in ``test_undo_after_bash_removed_the_file_in_a_container``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tracemalloc
from pathlib import Path

import pytest
from envh import Action
from envh_swebench.containers import FileTooLargeError, NotRegularFileError
from envh_swebench.editor import MAX_FILE_BYTES, Editor, EditorError


class HostBox:
    """Sandbox's file and command calls, on a host directory."""

    def __init__(self, root: Path) -> None:
        self.workdir = str(root)

    def run(self, command: str, *, timeout: float, limit: int, **_: object) -> dict:
        res = subprocess.run(["bash", "-c", command], cwd=self.workdir, capture_output=True, text=True,
                             timeout=timeout)
        return {"exit_code": res.returncode, "output": (res.stdout + res.stderr)[:limit]}

    def read_file(self, path: str, *, max_bytes: int | None = None) -> tuple[bytes, int]:
        st = os.lstat(path)  # FileNotFoundError as Sandbox; a link is itself, as in an archive
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(path)
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLargeError(path, st.st_size, max_bytes)
        return Path(path).read_bytes(), st.st_mode & 0o7777

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        Path(path).write_bytes(data)
        os.chmod(path, mode)


@pytest.fixture
def editor(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    ed = Editor(box=HostBox(tmp_path))
    ed({"command": "str_replace", "path": "m.py", "old_str": "x = 1", "new_str": "x = 2"})
    return ed


@pytest.mark.parametrize(("change", "message"), [
    ("rm m.py", "does not exist"),
    ("rm m.py && mkdir m.py", "is a directory"),
])
def test_undo_after_bash_removed_the_file_is_an_editor_error(editor, tmp_path, change, message):
    """FileNotFoundError / IsADirectoryError came out of the editor (and out of step());
    now they are the editor's error, which the bridge shows the policy, and the edit stays
    undoable once the file is back."""
    subprocess.run(["bash", "-c", change], cwd=tmp_path, check=True)
    with pytest.raises(EditorError, match=message):
        editor({"command": "undo_edit", "path": "m.py"})
    subprocess.run(["bash", "-c", "rm -rf m.py && echo 'x = 2' > m.py"], cwd=tmp_path, check=True)
    assert "undone successfully" in editor({"command": "undo_edit", "path": "m.py"})[0]
    assert (tmp_path / "m.py").read_text() == "x = 1\n"


def test_undo_of_a_file_bash_made_huge_reads_none_of_it(editor, tmp_path):
    """The whole file was read into memory to keep it (a 1.5 GB sparse file cost 3 GB of
    host memory). Above the editor's size limit undo now refuses, before reading."""
    size = 16 * MAX_FILE_BYTES
    os.truncate(tmp_path / "m.py", size)  # sparse: no disk, the size of a large file
    tracemalloc.start()
    try:
        with pytest.raises(EditorError, match=rf"holds {size} bytes.*not undone.*git checkout"):
            editor({"command": "undo_edit", "path": "m.py"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_FILE_BYTES, peak
    assert editor.history[str(tmp_path / "m.py")] == ["x = 1\n"], "the edit is still undoable"


def test_undo_after_bash_removed_the_file_in_a_container(make_env):
    env = make_env()
    env.reset()
    edit = {"command": "str_replace", "path": "mathx/stats.py", "old_str": "def mean", "new_str": "def mean_"}
    assert "has been edited" in env.step(Action(tool="str_replace_editor", args=edit)).observation.text
    env.step(Action(tool="bash", args={"command": "rm mathx/stats.py"}))
    out = env.step(Action(tool="str_replace_editor", args={"command": "undo_edit", "path": "mathx/stats.py"}))
    assert "does not exist" in out.observation.text and out.info["error"]


def test_undo_of_a_create_where_bash_put_a_directory_says_so(tmp_path):
    """`rm -f` of a directory fails, yet undo said the created file was removed and
    dropped the edit. Now it is an editor error, and the edit stays undoable."""
    ed = Editor(box=HostBox(tmp_path))
    ed({"command": "create", "path": "new.py", "file_text": "x = 1\n"})
    subprocess.run(["bash", "-c", "rm new.py && mkdir new.py && touch new.py/keep"], cwd=tmp_path, check=True)
    with pytest.raises(EditorError, match=r"not undone.*[Ii]s a directory"):
        ed({"command": "undo_edit", "path": "new.py"})
    assert (tmp_path / "new.py" / "keep").exists()
    subprocess.run(["bash", "-c", "rm -r new.py && touch new.py"], cwd=tmp_path, check=True)
    assert "was removed" in ed({"command": "undo_edit", "path": "new.py"})[0]
    assert not (tmp_path / "new.py").exists()


def test_links_inside_the_repository_are_followed(tmp_path):
    """Docker's archive API takes a link as itself, so view and str_replace on a link to
    a file in the repository said "not a regular file"; the editor now works on where
    the link leads. A link that leaves the repository is still refused."""
    (tmp_path / "real.py").write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to("real.py")
    (tmp_path / "out.py").symlink_to("/etc/hostname")
    ed = Editor(box=HostBox(tmp_path))
    assert "x = 1" in ed({"command": "view", "path": "link.py"})[0]
    ed({"command": "str_replace", "path": "link.py", "old_str": "x = 1", "new_str": "x = 2"})
    assert (tmp_path / "real.py").read_text() == "x = 2\n" and (tmp_path / "link.py").is_symlink()
    ed({"command": "undo_edit", "path": "link.py"})
    assert (tmp_path / "real.py").read_text() == "x = 1\n"
    with pytest.raises(EditorError, match="leads outside the repository"):
        ed({"command": "view", "path": "out.py"})
