"""``envh ui`` against hostile requests: other Host names (DNS rebinding), cross-origin
POSTs, odd tokens, page numbers past SQLite's integers, HTML in training metrics. The real
app through Starlette's ASGI client (no browser needed for what the server must refuse)."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest
from envh_ui.app import COOKIE, create_app  # the ui extra is installed by setup: missing fails, never skips
from starlette.testclient import TestClient

TOKEN = "t0ken-for-tests"
SCRIPT = {"*": ["combine(0, 1, mul)", "stop()"]}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ui-hostile")
    (base / "script.json").write_text(json.dumps(SCRIPT))
    (base / "spec.yaml").write_text("bridge: toy24\nlayers: []\n")
    out = base / "run"
    subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "run", str(base / "spec.yaml"),
                    "--split", "medium", "--policy", f"scripted:{base / 'script.json'}", "--executor", "inline",
                    "--out", str(out)], cwd=base, check=True, capture_output=True, text=True, timeout=300)
    (out / "metrics.jsonl").write_text(
        json.dumps({"step": 0, "loss": 1.0}) + "\n" + json.dumps({"step": 1, "loss": "<img src=x onerror=alert(1)>"}) + "\n")
    return out


@pytest.fixture()
def client(run_dir: Path) -> TestClient:
    c = TestClient(create_app([run_dir], token=TOKEN), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    return c


def test_a_foreign_host_header_is_refused_even_with_the_token(client: TestClient) -> None:
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200
    for host in ("evil.example:8765", "evil.example", "127.0.0.1.evil.example", ""):
        r = client.get("/", headers={"host": host})
        assert r.status_code == 403, host
    assert client.post("/api/spec/check", json={"spec": "bridge: toy24\n"},
                       headers={"host": "rebind.example:8765"}).status_code == 403


def test_a_cross_origin_or_form_post_is_refused(client: TestClient) -> None:
    ok = client.post("/api/spec/check", json={"spec": "bridge: toy24\nlayers: []\n"},
                     headers={"origin": "http://127.0.0.1:8765"})
    assert ok.status_code == 200 and ok.json()["ok"] is True
    # another local site is "same-site" for the cookie (ports do not count), so its Origin is what tells
    other = client.post("/api/play/new", json={"spec": "bridge: toy24\n"}, headers={"origin": "http://127.0.0.1:9999"})
    assert other.status_code == 403
    assert client.post("/api/play/new", json={"spec": "bridge: toy24\n"},
                       headers={"origin": "null"}).status_code == 403
    # a simple (no preflight) cross-origin request: text/plain carrying JSON
    plain = client.post("/api/play/new", content=json.dumps({"spec": "bridge: toy24\n"}),
                        headers={"content-type": "text/plain"})
    assert plain.status_code == 415


def test_tokens_with_non_ascii_text_are_refused_not_a_crash(run_dir: Path) -> None:
    c = TestClient(create_app([run_dir], token=TOKEN), base_url="http://127.0.0.1:8765")
    assert c.get("/", params={"token": "é" * 5}).status_code == 403
    assert c.get("/", headers={"cookie": (COOKIE + "=\u00e9t\u00e9").encode()}).status_code == 403
    c.cookies.set(COOKIE, TOKEN[:-1])
    assert c.get("/").status_code == 403


def test_the_token_never_stays_in_a_url_or_a_referer(run_dir: Path) -> None:
    app = create_app([run_dir], token=TOKEN)
    c = TestClient(app, base_url="http://127.0.0.1:8765")
    r = c.get("/", params={"token": TOKEN}, follow_redirects=False)
    # on a loopback address no cookie is set (every port would get it): on to the server's own name
    assert r.status_code == 303 and "set-cookie" not in r.headers
    assert r.headers["location"] == f"http://{app.state.name}:8765/?token={TOKEN}"
    c = TestClient(app, base_url=f"http://{app.state.name}:8765")
    r = c.get("/", params={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303 and "token" not in r.headers["location"]
    assert "samesite=strict" in r.headers["set-cookie"].lower() and "httponly" in r.headers["set-cookie"].lower()
    page = c.get(r.headers["location"])
    assert page.status_code == 200 and TOKEN not in page.text
    assert page.headers["referrer-policy"] == "no-referrer" and page.headers["x-frame-options"] == "DENY"


def test_page_numbers_past_the_end_negative_or_huge_show_an_empty_page(client: TestClient) -> None:
    home = client.get("/").text
    run_id = html.unescape(home.split("href='/run/0?id=")[1].split("'")[0])
    for page in ("-5", "999999", str(2**80), "-" + str(2**80)):
        r = client.get("/run/0", params={"id": run_id, "page": page})
        assert r.status_code == 200, (page, r.text[:200])
    assert client.get("/run/0", params={"id": run_id, "page": "x"}).status_code == 404


def test_metric_values_are_escaped(client: TestClient) -> None:
    text = client.get("/training/0").text
    assert "<img src=x" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_a_json_body_that_is_not_an_object_is_an_answer_not_a_crash(client: TestClient) -> None:
    for path in ("/api/play/new", "/api/spec/check", "/api/play/abc/step"):
        r = client.post(path, json=["spec"])
        assert r.status_code in (200, 404) and r.status_code != 500
        r = client.post(path, content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code != 500


def test_episode_numbers_past_sqlite_integers_are_not_found(client: TestClient) -> None:
    big = 2**80
    for path in (f"/traj/0/{big}", f"/compare/0/1/{big}", f"/compare/0/{big}/1", f"/run/{big}?id=x", f"/rig/{big}",
                 "/traj/0/999999"):
        assert client.get(path).status_code == 404, path
    assert client.get("/playground", params={"d": str(big), "spec": "abcdef12"}).status_code == 404


def test_a_run_being_written_is_browsable_meanwhile(run_dir: Path, tmp_path: Path) -> None:
    """WAL store: the read-only app keeps answering while a writer appends episodes."""
    import shutil
    import threading

    import attrs
    from envh.rollout.store import TrajectoryStore

    run_dir = Path(shutil.copytree(run_dir, tmp_path / "live"))
    client = TestClient(create_app([run_dir], token=TOKEN), base_url="http://127.0.0.1:8765")
    client.cookies.set(COOKIE, TOKEN)
    stop = threading.Event()
    wrote: list[int] = []
    with TrajectoryStore(run_dir) as store:
        run_id = store.runs()[0]
        template = next(iter(store.query(run_id=run_id)))

    def writer() -> None:
        with TrajectoryStore(run_dir) as w:
            i = 0
            while not stop.is_set() and i < 400:
                w.append(attrs.evolve(template, key=f"{template.key}-live{i}"))
                wrote.append(i)
                i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        statuses = [client.get(path).status_code
                    for _ in range(15) for path in ("/", f"/run/0?id={run_id}", f"/run/0?id={run_id}&page=3")]
    finally:
        stop.set()
        t.join(60)
    assert wrote and set(statuses) == {200}


def test_sessions_evicted_while_others_step_answer_gone_never_a_server_error(client: TestClient) -> None:
    import threading

    first = client.post("/api/play/new", json={"spec": "bridge: toy24\nlayers: []\n", "task": "easy/2,3,4"}).json()
    statuses: list[int] = []

    def stepper() -> None:
        for _ in range(20):
            r = client.post(f"/api/play/{first['session']}/step", json={"action": "combine(0, 1, mul)"})
            statuses.append(r.status_code)

    t = threading.Thread(target=stepper)
    t.start()
    for _ in range(10):  # more than the 8 live sessions: the first is evicted while it is being stepped
        assert client.post("/api/play/new", json={"spec": "bridge: toy24\nlayers: []\n"}).status_code == 200
    t.join(60)
    assert set(statuses) == {200}
    gone = client.post(f"/api/play/{first['session']}/step", json={"action": "stop()"}).json()
    assert "gone" in gone["error"]
