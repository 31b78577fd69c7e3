"""``envh ui`` against run directories and specs built to escape it: directory names that
end a SQLite URI early, WAL stores that a read-only open would add files beside, symlinks
from a run directory to files outside it, HTML in store columns, playground specs naming
files on this machine. The real app through Starlette's ASGI client, real stores."""

from __future__ import annotations

import html
import json
import sqlite3
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from envh.rollout.store import FILENAME, SCHEMA, TrajectoryStore
from envh_ui.app import COOKIE, create_app  # the ui extra is installed by setup: missing fails, never skips
from starlette.testclient import TestClient

TOKEN = "t0ken-for-attacks"
SECRET = "SECRET-7f3a-outside-the-run-dirs"


def _client(*dirs: Path) -> TestClient:
    c = TestClient(create_app(list(dirs), token=TOKEN), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    return c


def _episode(db: sqlite3.Connection, run_id: str, key: str, *, steps: object = 3) -> None:
    db.execute("INSERT INTO trajectories (run_id, key, attempt, kind, spec_id, task, seed, success, steps, "
               "created, data) VALUES (?, ?, 0, 'episode', 'abc123', 'toy24/medium/1', 0, 1, ?, 0, '{}')",
               (run_id, key, steps))


def _store(path: Path, run_id: str, keys: tuple[str, ...] = ("ep-1",)) -> Path:
    """A store written by the real writer (WAL mode), closed: only the .sqlite file stays."""
    with TrajectoryStore(path) as store:
        store.create_run(run_id, {"config": {"policy": "scripted"}})
        for key in keys:
            _episode(store.db, run_id, key)
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_run_dirs_named_with_uri_characters_are_read_not_created_beside(tmp_path: Path) -> None:
    # SQLite reads 'file:/x/sweep #3/trajectories.sqlite?mode=ro' as the file '/x/sweep '
    # (read-write): the name must be quoted, or a write lands outside and the page fails
    names = ("sweep #3", "a?mode=rwc", "100%41")
    dirs = [_store(tmp_path / name, f"run-{i}", (f"key-{i}",)) for i, name in enumerate(names)]
    before = _files(tmp_path)
    c = _client(*dirs)
    home = c.get("/")
    assert home.status_code == 200
    for i, name in enumerate(names):
        assert f"run-{i}" in home.text and name.replace("&", "&amp;") in home.text
        page = c.get(f"/run/{i}", params={"id": f"run-{i}"})
        assert page.status_code == 200 and f"key-{i}" in page.text and "1 episodes" in page.text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)  # no 'sweep ', 'a', '100A' made
    assert _files(tmp_path) == before


def test_reading_a_wal_store_adds_no_file_and_changes_no_byte(tmp_path: Path) -> None:
    run = _store(tmp_path / "run", "r1", tuple(f"ep-{i}" for i in range(60)))
    before = _files(tmp_path)
    assert list(before) == ["run/" + FILENAME]
    c = _client(run)
    assert "r1" in c.get("/").text
    assert "60 episodes" in c.get("/run/0", params={"id": "r1", "page": "1"}).text
    assert c.get("/rig/0").status_code == 200
    assert _files(tmp_path) == before  # no -wal / -shm beside the store, not a byte changed
    # a writer still running: its -wal holds rows the main file does not; they are read
    with TrajectoryStore(run) as live:
        live.create_run("r2-live", {"config": {}})
        _episode(live.db, "r2-live", "live-ep")
        assert Path(f"{run / FILENAME}-wal").exists()
        assert "r2-live" in c.get("/").text
        assert "live-ep" in c.get("/run/0", params={"id": "r2-live"}).text


def test_symlinks_out_of_a_run_dir_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps({"bridge": "toy24", "task": SECRET, "rationale": SECRET}))
    _store(outside / "store", "OUTSIDE-RUN-" + SECRET)
    (outside / "specs").mkdir()
    (outside / "specs" / "cafebabecafebabe.json").write_text(json.dumps({"bridge": "toy24", "note": SECRET}))

    a = tmp_path / "a"
    (a / "pool" / "specs").mkdir(parents=True)
    (a / "pool" / "entries").mkdir()
    (a / FILENAME).symlink_to(outside / "store" / FILENAME)
    (a / "pool" / "specs" / "deadbeefdeadbeef.json").symlink_to(outside / "secret.json")
    (a / "pool" / "specs" / "0123456789abcdef.json").write_text(json.dumps({"bridge": "toy24"}))
    (a / "pool" / "entries" / "0123456789abcdef.json").symlink_to(outside / "secret.json")
    (a / "report.md").write_text("the report")
    b = tmp_path / "b"
    b.mkdir()
    (b / "pool").symlink_to(outside)  # the whole pool directory elsewhere
    (b / "report.md").write_text("the report")

    c = _client(a, b)
    home = c.get("/")
    assert home.status_code == 200 and SECRET not in home.text and "OUTSIDE-RUN" not in home.text
    assert c.get("/run/0", params={"id": "OUTSIDE-RUN-" + SECRET}).status_code == 404
    rig = c.get("/rig/0")
    assert rig.status_code == 200 and "the report" in rig.text and SECRET not in rig.text
    assert "0123456789ab" in rig.text  # the real pool entry is listed, without the linked entry's fields
    assert "deadbeefdead" not in rig.text
    for d, spec_id in ((0, "deadbeefdeadbeef"), (1, "cafebabecafebabe")):
        r = c.get("/playground", params={"d": str(d), "spec": spec_id})
        assert r.status_code == 404 and SECRET not in r.text
    assert "cafebabecafe" not in c.get("/rig/1").text
    assert c.get("/playground", params={"d": "0", "spec": "0123456789abcdef"}).status_code == 200  # the control


def test_html_in_a_store_column_is_shown_as_text(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with TrajectoryStore(run) as store:
        store.create_run("r", {"config": {}})
        _episode(store.db, "r", "k", steps="<b id='inj'>9</b>")  # SQLite keeps text in an INTEGER column
    page = _client(run).get("/run/0", params={"id": "r"})
    assert page.status_code == 200
    assert "<b id='inj'>" not in page.text and "&lt;b id=&#x27;inj&#x27;&gt;9&lt;/b&gt;" in page.text


CURRICULUM = """bridge: toy24
layers:
  - kind: curriculum
    training: true
    params: {{size: {{}}}}
{extra}"""


def test_a_playground_spec_cannot_name_a_file_to_open(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\ntorn last line")  # the audit log reader truncates a torn last line
    created = tmp_path / "created-by-a-leg.jsonl"
    library = tmp_path / "library"
    library.mkdir()
    (library / "library.json").write_text("{}")
    c = _client(tmp_path)
    post = {"headers": {"origin": "http://127.0.0.1:8765"}}

    ok = c.post("/api/spec/check", json={"spec": CURRICULUM.format(extra="")}, **post).json()
    assert ok["ok"] is True, ok  # the control: the same spec without a file builds

    spec = CURRICULUM.format(extra=f"    audit: {victim}\n")
    for route in ("/api/spec/check", "/api/play/new"):
        out = c.post(route, json={"spec": spec, "task": ""}, **post).json()
        assert out.get("ok") is not True and "session" not in out, out
        assert out["error_type"] == "SpecError" and "audit" in out["error"]
        assert [m["line"] for m in out["markers"]] == [6] and out["markers"][0]["path"] == "$.layers[0].audit"
    assert victim.read_text() == "keep\ntorn last line"

    leg = ("bridge: toy24\nlayers:\n  - kind: chain\n    legs:\n      - bridge: toy24\n        layers:\n"
           "          - kind: curriculum\n            training: true\n            params: {size: {}}\n"
           f"            audit: {created}\n")
    out = c.post("/api/spec/check", json={"spec": leg}, **post).json()
    assert out["ok"] is False and out["markers"][0]["path"] == "$.layers[0].legs[0].layers[0].audit"
    assert not created.exists()

    ws = f"bridge: toy24\nlayers:\n  - kind: workspace\n    library: {library}\n"
    out = c.post("/api/play/new", json={"spec": ws, "task": ""}, **post).json()
    assert "session" not in out and out["error_type"] == "SpecError" and "library" in out["error"]
    assert c.post("/api/play/new", json={"spec": "bridge: toy24\nlayers:\n  - kind: workspace\n", "task": ""},
                  **post).json().get("session")  # the control: a workspace without a library plays


@pytest.mark.parametrize("name", ["report.md", "metrics.jsonl", "plot.svg"])
def test_a_report_file_linked_from_outside_is_not_served(tmp_path: Path, name: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / name).write_text(SECRET)
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(tmp_path / "outside" / name)
    c = _client(run)
    assert c.get(f"/file/0/{name}").status_code == 404
    for route in ("/", "/rig/0", "/training/0"):
        r = c.get(route)
        assert r.status_code == 200 and SECRET not in r.text


@pytest.mark.parametrize("config", ["  data_path: /etc", "  instances: ~/tasks.jsonl", "  data: ../elsewhere",
                                    "  full_reset: file:///etc/passwd", "  docker_url: tcp://10.0.0.1:2375",
                                    "  sites:\n    shop: http://169.254.169.254/", "  data: tasks.json"])
def test_a_playground_bridge_config_naming_a_path_or_url_is_refused(tmp_path: Path, config: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.json").write_text("[]")  # a relative name is a file of the server's directory
    (tmp_path / "test").mkdir()
    c = _client(tmp_path)
    post = {"headers": {"origin": "http://127.0.0.1:8765"}}
    spec = f"bridge: toy24\nconfig:\n{config}\n"
    for route, body in (("/api/spec/check", {"spec": spec, "build": False}), ("/api/play/new", {"spec": spec})):
        out = c.post(route, json=body, **post).json()
        assert "session" not in out and out["error_type"] == "SpecError", out
        assert out["markers"][0]["path"].startswith("$.config.") and out["markers"][0]["line"] >= 3, out
    leg = ("bridge: toy24\nlayers:\n  - kind: chain\n    legs:\n      - bridge: toy24\n        config:\n"
           + textwrap.indent(config, " " * 8) + "\n")
    out = c.post("/api/spec/check", json={"spec": leg}, **post).json()
    assert out["ok"] is False and out["markers"][0]["path"].startswith("$.layers[0].legs[0].config."), out
    # the control: words that are no path pass, even one naming a directory beside the server
    ok = c.post("/api/spec/check", json={"spec": "bridge: toy24\nconfig:\n  split: test\n  memory: 2g\n"
                                                 "  image: envh-office/sandbox:bookworm\n", "build": False}, **post)
    assert ok.json()["ok"] is True, ok.json()


def test_numbers_past_a_float_and_damaged_rows_leave_the_pages_readable(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with TrajectoryStore(run) as store:
        store.create_run("r", {"config": {}})
        _episode(store.db, "r", "damaged")  # its data is '{}': no trajectory
        store.db.execute("CREATE TABLE rig_journal (seq INTEGER PRIMARY KEY, task TEXT, kind TEXT, data TEXT)")
        store.db.execute("INSERT INTO rig_journal (task, kind, data) VALUES ('t1', 'attempt', ?)", (json.dumps(
            {"attempt": {"round": 1, "spec_id": "ab", "reason": "huge-confidence", "result": {"confidence": {"p": 10**400}}}}),))
    (run / "report.md").write_text("the report")
    (run / "metrics.jsonl").write_text("\n".join([
        json.dumps({"step": 0, "loss": 1.5}), json.dumps({"step": 1, "loss": 10**400}),
        '{"step": 2, "loss": ' + "9" * 5000 + "}", json.dumps({"step": 3, "loss": 0.25})]) + "\n")
    c = _client(run)
    training = c.get("/training/0")
    assert training.status_code == 200 and "1.5" in training.text and "0.25" in training.text
    assert training.text.count("<tr class='metric'>") == 3 and "<svg class='chart'" in training.text
    rig = c.get("/rig/0")
    assert rig.status_code == 200 and "huge-confidence" in rig.text and "1" + "0" * 400 in rig.text
    traj = c.get("/traj/0/1")
    assert traj.status_code == 404 and "not a readable trajectory" in traj.text
    assert traj.headers["content-security-policy"].startswith("default-src 'self'")


def test_a_damaged_store_is_named_and_leaves_the_other_dirs_listed(tmp_path: Path) -> None:
    good = _store(tmp_path / "good", "good-run")
    empty, garbage = tmp_path / "empty", tmp_path / "garbage"
    empty.mkdir()
    garbage.mkdir()
    (empty / FILENAME).write_bytes(b"")  # a writer killed before its first page
    (garbage / FILENAME).write_text("<b>not a database</b>")
    c = _client(good, empty, garbage)
    home = c.get("/")
    assert home.status_code == 200 and "good-run" in home.text
    assert home.text.count("the trajectory store cannot be read") == 2 and "<b>not" not in home.text
    for path in ("/run/1?id=x", "/run/2?id=x", "/traj/2/1"):
        r = c.get(path)
        assert r.status_code == 500 and r.text.startswith("envh ui: the trajectory store cannot be read"), path
        assert r.headers["content-security-policy"].startswith("default-src 'self'")


def test_a_pool_spec_too_deep_or_too_long_is_refused_quickly(tmp_path: Path) -> None:
    specs = tmp_path / "pool" / "specs"
    specs.mkdir(parents=True)
    (specs / "abcdef0123456789.json").write_text("[" * 200_000 + "]" * 200_000)  # json.loads would recurse
    (specs / "abcdef0123456780.json").write_text(json.dumps({"bridge": "toy24", "x": "a" * 3_000_000}))
    (specs / "abcdef0123456781.json").write_text(json.dumps({"bridge": "toy24", "layers": []}))
    c = _client(tmp_path)
    for spec_id in ("abcdef0123456789", "abcdef0123456780"):
        start = time.monotonic()
        r = c.get("/playground", params={"d": "0", "spec": spec_id})
        assert r.status_code == 413 and "does not open it" in r.text and time.monotonic() - start < 2
    ok = c.get("/playground", params={"d": "0", "spec": "abcdef0123456781"})  # the control
    assert ok.status_code == 200 and "bridge: toy24\nlayers: []" in html.unescape(ok.text)


def test_an_untrusted_playground_spec_cannot_name_a_python_class(tmp_path: Path) -> None:
    c = _client(tmp_path)
    for spec in ("bridge: toy24\ntrust: trusted\nlayers:\n  - kind: contract\n    trust: trusted\n    cls: 'os:system'\n",
                 "bridge: toy24\nlayers:\n  - kind: chain\n    legs:\n      - bridge: toy24\n        trust: trusted\n"
                 "        layers:\n          - kind: contract\n            cls: 'logging.handlers:SocketHandler'\n"):
        for route in ("/api/spec/check", "/api/play/new"):
            out = c.post(route, json={"spec": spec}, headers={"origin": "http://127.0.0.1:8765"}).json()
            assert "session" not in out and "not a contract class of an installed plugin" in out["error"], out


def test_a_post_body_past_the_limit_is_refused_unread(tmp_path: Path) -> None:
    c = _client(tmp_path)
    post = {"origin": "http://127.0.0.1:8765", "content-type": "application/json"}

    def chunks(n: int):  # sent as it is made (chunked, no Content-Length), as a client could
        yield b'{"spec": "'
        for _ in range(n):
            yield b"a" * 1_000_000
        yield b'"}'

    r = c.post("/api/spec/check", content=chunks(3), headers=post)
    assert r.status_code == 413 and "over 2000000 bytes" in r.text
    ok = c.post("/api/spec/check", content=json.dumps({"spec": "bridge: toy24\n" + "#" * 99_000 + "\n", "build": False}),
                headers=post)
    assert ok.status_code == 200 and ok.json()["ok"] is True  # the control: the longest spec there is passes


def test_odd_success_flags_and_manifests_leave_the_runs_page_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with TrajectoryStore(run) as store:
        store.create_run("flag-5", {"config": {}})
        store.db.execute("INSERT INTO trajectories (run_id, key, attempt, kind, spec_id, success, steps, created, data) "
                         "VALUES ('flag-5', 'k', 0, 'episode', 'a', 5, 3, 0, '{}')")  # wilson(5, 1): math domain error
        store.create_run("config-text", {"config": "not a mapping"})
        store.create_run("policy-html", {"config": {"policy": "<b id='p'>x</b>"}})
        store.db.execute("INSERT INTO runs VALUES ('manifest-not-json', 1e300, '{')")
    home = _client(run).get("/")
    assert home.status_code == 200, home.text[:200]
    for run_id in ("flag-5", "config-text", "policy-html", "manifest-not-json"):
        assert f">{run_id}</a>" in home.text
    assert "100.0% <span class='muted'>[20.7%, 100.0%]" in home.text and "<b id='p'>" not in home.text


def _get(base: str, path: str) -> tuple[int, str]:
    req = urllib.request.Request(base + path, headers={"cookie": f"{COOKIE}={TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def test_a_store_a_writer_keeps_locked_stalls_only_its_own_page(tmp_path: Path, serve) -> None:
    run = tmp_path / "run"
    run.mkdir()
    db = sqlite3.connect(run / FILENAME, isolation_level=None)  # a rollback-journal store (not WAL)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO runs VALUES ('locked-run', 0, '{}')")
    db.execute("BEGIN EXCLUSIVE")
    db.execute("INSERT INTO runs VALUES ('written-meanwhile', 1, '{}')")
    assert Path(f"{run / FILENAME}-journal").exists()
    answers: dict[str, tuple[int, str]] = {}
    with serve(create_app([run], token=TOKEN)) as base:
        reader = threading.Thread(target=lambda: answers.update(home=_get(base, "/")))
        reader.start()
        time.sleep(0.5)  # the runs page now waits for the writer's lock
        start = time.monotonic()
        status, css = _get(base, "/static/envh.css")
        assert status == 200 and "nav" in css
        assert _get(base, "/playground")[0] == 200
        waited = time.monotonic() - start
        db.execute("COMMIT")
        reader.join(30)
    db.close()
    assert waited < 2.5, f"other pages waited {waited:.1f} s behind a locked store"
    status, home = answers["home"]
    assert status == 200 and "written-meanwhile" in home  # read once the writer committed, not a torn page


def test_a_huge_report_is_shown_cut_not_read_whole(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("# start of the report\n" + "<b>x</b>" * 1_000_000)  # 8 MB
    r = _client(tmp_path).get("/rig/0")
    assert r.status_code == 200 and "# start of the report" in r.text and "<b>x" not in r.text
    assert "(report.md goes on: 8,000,022 bytes" in r.text and len(r.text) < 6_000_000
