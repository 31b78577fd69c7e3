"""The editor's server side without a browser: the spec schema against real specs (the
converter and ``jsonschema`` agree), completion and problem lines on hostile YAML, and the
headers and answers of the app's API under odd requests."""

from __future__ import annotations

import json
import re
import time

import attrs
import jsonschema
import pytest
import yaml
from envh import BridgeInfo, hookimpl
from envh.bridges.toy24 import Toy24Env
from envh.plugins.manager import get_registry, make_plugin_manager
from envh.plugins.records import resolve
from envh.spec import parse_spec
from envh.types import Action, EnvResponse
from envh_ui import editor
from envh_ui.app import COOKIE, CSP, create_app
from envh_ui.playground import DEFAULT_SPEC, Playground
from envh_ui.schema import spec_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

REGISTRY = make_plugin_manager(entry_points=False)
SCHEMA = spec_schema(REGISTRY)
TOKEN = "sch3ma"


def _at(text: str) -> tuple[str, int]:
    """``text`` with the cursor mark ``¦`` taken out, and the cursor's offset."""
    return text.replace("¦", "", 1), text.index("¦")


def labels(marked: str) -> list[str]:
    text, offset = _at(marked)
    return [i["label"] for i in editor.complete(text, offset, SCHEMA)["items"]]


def test_the_schema_accepts_what_the_converter_accepts_and_refuses_what_it_refuses() -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    good = [DEFAULT_SPEC, "bridge: toy24\nlayers:\n  - kind: chain\n    legs: [{bridge: toy24, layers: [{kind: budget}]}]\n",
            "bridge: toy24\nlayers: [{kind: stage, actions: [{tool: combine, args: {i: 0}}]}]\n"]
    bad = ["bridge: toy24\nlayers: [{kind: budget, max_step: 3}]\n", "bridge: toy24\nlayers: [{kind: chain, mode: x, legs: []}]\n",
           "bridge: nosuch\n", "bridge: toy24\nlayers: [{kind: stagee}]\n", "bridge: toy24\nextra: 1\n"]
    for text in good:
        parse_spec(text, REGISTRY)
        assert list(validator.iter_errors(yaml.safe_load(text))) == [], text
    for text in bad:
        assert list(validator.iter_errors(yaml.safe_load(text))), text
    assert {b["title"] for b in SCHEMA["$defs"]["Layer"]["oneOf"]} == set(REGISTRY.component_kinds())


def test_completion_offers_the_keys_valid_at_the_path() -> None:
    for name, kind in REGISTRY.component_kinds().items():
        fields = [f.name for f in attrs.fields(resolve(kind.spec_type)) if f.name != "kind"]  # type: ignore[arg-type]
        assert labels(f"bridge: toy24\nlayers:\n  - kind: {name}\n    ¦\n") == fields, name
        assert labels(f"bridge: toy24\nlayers:\n  - ¦\n    kind: {name}\n") == fields, name  # kind below the cursor
    assert labels("¦") == ["bridge", "config", "layers", "trust"]
    assert labels("bridge: toy24\n¦") == ["config", "layers", "trust"]  # present keys are not offered again
    assert labels("bridge: toy24\nlayers:\n  - kind: chain\n    legs:\n      - bridge: toy24\n        layers:\n"
                  "          - kind: budget\n            max_s¦\n") == ["max_steps"]  # a chain leg's layer
    assert labels("bridge: toy24\nlayers:\n  - kind: stage\n    actions:\n      - ¦\n") == ["tool", "args"]
    assert labels("bridge: toy24\nlayers:\n  - kind: chain\n    mode: ¦\n") == ["sequential", "alternate"]
    assert labels("bridge: toy24\nlayers:\n  - kind: chain\n    carry:¦\n") == ["true", "false"]
    assert labels("bridge: toy24\nlayers:\n  - kind: co¦\n") == ["contract"]
    assert labels("bridge: to¦") == ["toy24"]
    text, offset = _at("bridge: toy24\nlayers:\n  - kind: budget\n    max_s¦teps: 3\n")
    assert editor.complete(text, offset, SCHEMA)["items"] == []  # inside a key that has its value


def test_details_name_the_type_and_the_sentence_of_the_docstring_about_the_key() -> None:
    text = "bridge: toy24\nlayers:\n  - kind: chain\n    "
    details = {i["label"]: i["detail"] for i in editor.complete(text, len(text), SCHEMA)["items"]}
    assert details["mode"].startswith("sequential | alternate — mode: sequential (the next leg starts")
    assert details["carry"].startswith("boolean — carry prefixes the new leg's observation")
    assert details["id"] == "string | null"


def test_a_list_of_records_starts_its_first_item() -> None:
    inserts = {i["label"]: i["insert"] for i in editor.complete("bridge: toy24\n", 14, SCHEMA)["items"]}
    assert inserts == {"config": "config: ", "layers": "layers:\n  - ", "trust": "trust: "}
    text = "bridge: toy24\nlayers:\n  - kind: chain\n    le"
    inserts = {i["label"]: i["insert"] for i in editor.complete(text, len(text), SCHEMA)["items"]}
    assert inserts == {"legs": "legs:\n      - ", "leg_tasks": "leg_tasks: "}
    text += "gs:\n      - "  # accepted: the item's keys are offered next
    assert labels(text + "¦") == ["bridge", "config", "layers", "trust"]


def test_no_suggestions_inside_strings_code_or_flow_collections() -> None:
    code = "bridge: toy24\nlayers:\n  - kind: contract\n    code: |\n      def filter_action(a, s, m):\n        ret¦\n"
    assert labels(code) == []
    assert labels("bridge: toy24\nlayers: [{kind: budget, ma¦}]\n") == []
    assert labels("bridge: toy24\nconfig:\n  anything¦\n") == []  # free-form config has no known keys
    assert labels("# bridge¦\n") == []


HOSTILE = [
    "a: &a [*a, *a]\nb: ¦",  # a recursive alias
    "a: &x [" + "&y [*x, " * 50 + "]" * 51 + "\n¦",
    "[" * 5000 + "¦",  # nesting deeper than the composer's recursion
    "{" * 5000 + "\n¦",
    "x: !!python/object/apply:os.system [echo pwned]\n¦",
    "lol1: &l1 [a,a,a,a,a,a,a,a,a]\nlol2: &l2 [*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1]\n"
    "lol3: &l3 [*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2]\nlol4: &l4 [*l3,*l3,*l3,*l3,*l3,*l3,*l3,*l3,*l3]\n"
    "lol5: &l5 [*l4,*l4,*l4,*l4,*l4,*l4,*l4,*l4,*l4]\nlol6: &l6 [*l5,*l5,*l5,*l5,*l5,*l5,*l5,*l5,*l5]\n"
    "lol7: &l7 [*l6,*l6,*l6,*l6,*l6,*l6,*l6,*l6,*l6]\nlol8: &l8 [*l7,*l7,*l7,*l7,*l7,*l7,*l7,*l7,*l7]\n¦",
    f"{editor.MARK}: 1\n¦",  # the marker itself in the text
    f"bridge: toy24\nlayers:\n  - kind: budget\n    {editor.MARK}: x\n    ¦",
    "\ufeff\x00bridge: \u2028x\n¦", "\t¦", "- - - ¦", "? ¦", "---\n---\n¦", "%YAML 9.9\n---\n¦",
]


@pytest.mark.parametrize("marked", HOSTILE)
def test_hostile_yaml_gets_an_answer_quickly_never_an_exception(marked: str) -> None:
    text, offset = _at(marked)
    started = time.perf_counter()
    out = editor.complete(text, offset, SCHEMA)
    assert time.perf_counter() - started < 2.0
    assert out["from"] <= offset <= out["to"] and isinstance(out["items"], list)
    for path in ([], ["a", 0, 1], ["layers", 10**9], ["x", "y"]):
        line = editor.locate(text, path)
        assert line is None or 1 <= line <= text.count("\n") + 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(list("abk:- \n|>[]{}&*!#'\"\t0") + ["kind: ", "layers:\n", "  - ", "bridge: "]),
                     max_size=60), where=st.integers(0, 200), path=st.text(max_size=30))
def test_completion_and_problem_lines_never_raise_on_any_text(parts: list[str], where: int, path: str) -> None:
    text = "".join(parts)
    offset = min(where, len(text))
    out = editor.complete(text, offset, SCHEMA)
    assert out["from"] <= offset <= out["to"] <= len(text)
    assert all(isinstance(i["label"], str) and isinstance(i["insert"], str) for i in out["items"])
    line = editor.locate(text, editor.parse_path(path))
    assert line is None or line >= 1


def test_a_problem_path_names_its_line() -> None:
    text = "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 0\n  - kind: chain\n    legs:\n" \
           "      - bridge: toy24\n        layers: [{kind: budget, max_step: 1}]\n"
    from envh import errors

    with pytest.raises(errors.SpecError) as info:
        parse_spec(text, REGISTRY)
    marks = editor.markers(text, info.value)
    assert [(m["line"], m["path"]) for m in marks] == [
        (4, "$.layers[0].max_steps"),  # the validator names its field: the mark is on that key
        (8, "$.layers[1].legs[0].layers[0].max_step")]
    assert editor.parse_path("$.config['a b'].x[3]") == ["config", "a b", "x", 3]
    assert editor.markers(text, RuntimeError("boom")) == []


@pytest.fixture
def client(tmp_path) -> TestClient:
    c = TestClient(create_app([tmp_path], token=TOKEN, registry=REGISTRY), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    return c


def test_every_answer_carries_the_csp(client: TestClient, tmp_path) -> None:
    anonymous = TestClient(create_app([tmp_path], token=TOKEN), base_url="http://127.0.0.1:8765")
    answers = [client.get(p) for p in ("/", "/playground", "/static/envh.css", "/static/editor.js", "/static/nope.js",
                                       "/api/spec/schema", "/rig/0", "/nowhere")]
    answers += [client.post("/api/spec/complete", json={"spec": "", "offset": 0}), anonymous.get("/"),
                client.get("/", headers={"host": "evil.example"})]
    for r in answers:
        assert r.headers["content-security-policy"] == CSP, r.url
        assert "unsafe" not in r.headers["content-security-policy"]
    assert [r.status_code for r in answers[-2:]] == [403, 403]
    for path in ("/static/editor.js", "/api/spec/schema"):  # nothing, not even the scripts, without the token
        assert anonymous.get(path).status_code == 403
    assert anonymous.post("/api/spec/complete", json={"spec": "", "offset": 0}).status_code == 403
    assert answers[2].headers["content-type"].startswith("text/css")
    assert answers[3].headers["content-type"].startswith(("text/javascript", "application/javascript"))
    for page in ("/", "/playground"):  # no inline code left for the policy to refuse
        html = client.get(page).text
        assert "<style" not in html and "onclick" not in html and "style=" not in html
        assert re.findall(r"<script(?![^>]*\bsrc=)", html) == []


def test_static_files_cannot_reach_outside_their_folder(client: TestClient) -> None:
    for path in ("/static/../app.py", "/static/..%2fapp.py", "/static/%2e%2e/app.py", "/static/..%5capp.py",
                 "/static//etc/passwd", "/static/%2fetc%2fpasswd"):
        r = client.get(path)
        assert r.status_code == 404 and "def create_app" not in r.text and "root:" not in r.text, path


def test_completion_api_takes_only_an_integer_offset_and_never_fails(client: TestClient) -> None:
    for body in ({"spec": "bridge: ", "offset": "8"}, {"spec": "x", "offset": True}, {"spec": "x"},
                 {"spec": "x", "offset": 1.5}, {"spec": ["a"], "offset": 0}, {"spec": None, "offset": 0}):
        assert client.post("/api/spec/complete", json=body).status_code == 400
    for body in ({"spec": "bridge: ", "offset": 10**30}, {"spec": "bridge: ", "offset": -1},
                 {"spec": "x" * 300_000, "offset": 5}, {"spec": "{" * 5000 + "\n", "offset": 5001}):
        r = client.post("/api/spec/complete", json=body)
        assert r.status_code == 200 and r.json()["items"] == []
    r = client.post("/api/spec/complete", json={"spec": "bridge: ", "offset": 8})
    assert [i["label"] for i in r.json()["items"]] == sorted(REGISTRY.bridges())


def test_the_default_registry_schema_lists_installed_plugins() -> None:
    schema = spec_schema(get_registry())
    assert set(schema["$defs"]["Layer"]["properties"]["kind"]["enum"]) == set(get_registry().component_kinds())
    assert json.loads(json.dumps(schema)) == schema  # plain JSON all the way down


def test_lines_count_as_the_editor_counts_them() -> None:
    from envh import errors

    # YAML also breaks lines at U+2028 and NEL; the textarea only at '\n'
    text = 'bridge: toy24\nconfig: {note: "a\u2028b\x85c"}\nlayers: [{kind: budget, max_step: 1}]\n'
    with pytest.raises(errors.SpecError) as info:
        parse_spec(text, REGISTRY)
    assert [m["line"] for m in editor.markers(text, info.value)] == [3]
    text = 'config: {note: "a\u2028b\x85c"}\nbridge: toy24\nlayers: [\n'
    with pytest.raises(errors.SpecError) as info:
        parse_spec(text, REGISTRY)
    assert [m["line"] for m in editor.markers(text, info.value)] == [3]  # YAML says line 6; the open "[" is on 3
    text = "# \u2028\nbridge: toy24\nlayers:\n  - kind: contract\n    code: |\n      def filter_action(a, s, m):\n" \
           "          return (\n"
    marks = Playground(REGISTRY).check(text, build=False)["markers"]
    assert [(m["line"], m["path"]) for m in marks] == [(7, "$.layers[0].code")]


class OddToy(Toy24Env):
    """A bridge that answers with values JSON cannot carry and fails to close."""

    def _step(self, action: Action) -> EnvResponse:
        out = super()._step(action)
        return attrs.evolve(out, reward=float("nan"), info={**out.info, "odd": {1, 2}, "inf": float("inf")})

    def close(self) -> None:
        raise RuntimeError("close failed")


class OddPlugin:
    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="oddtoy", factory=OddToy)]


def test_odd_values_and_failing_close_are_answers_never_a_server_error(tmp_path, monkeypatch) -> None:
    import envh_ui.playground

    monkeypatch.setattr(envh_ui.playground, "MAX_SESSIONS", 1)  # every new session evicts the one before
    registry = make_plugin_manager(entry_points=False, plugins=[OddPlugin()])
    c = TestClient(create_app([tmp_path], token=TOKEN, registry=registry), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    sessions = [c.post("/api/play/new", json={"spec": "bridge: oddtoy\n", "task": "easy/2,3,4"}) for _ in range(3)]
    assert {r.status_code for r in sessions} == {200}  # the two oldest were evicted, their close failed
    assert all("session" in r.json() for r in sessions)
    r = c.post(f"/api/play/{sessions[-1].json()['session']}/step", json={"action": "combine i=0 j=1 op=add"})
    assert r.status_code == 200 and r.json().get("reward") == "nan", r.json()
    assert c.post("/api/spec/check", json={"spec": "bridge: oddtoy\n"}).json()["ok"] is True


class SlowToy(Toy24Env):
    """A bridge whose engine takes its time on ``stop``."""

    def _step(self, action: Action) -> EnvResponse:
        if action.tool == "stop":
            time.sleep(3)
        return super()._step(action)


class SlowPlugin:
    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="slowtoy", factory=SlowToy)]


def test_a_bridge_that_hangs_is_reported_and_the_pages_keep_answering(tmp_path) -> None:
    import threading

    registry = make_plugin_manager(entry_points=False, plugins=[SlowPlugin()])
    c = TestClient(create_app([tmp_path], token=TOKEN, registry=registry, play_timeout=0.5),
                   base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    sid = c.post("/api/play/new", json={"spec": "bridge: slowtoy\n"}).json()["session"]
    answers: list[dict] = []
    started = time.perf_counter()
    t = threading.Thread(target=lambda: answers.append(
        c.post(f"/api/play/{sid}/step", json={"action": "stop"}).json()))
    t.start()
    time.sleep(0.2)
    assert c.get("/").status_code == 200 and time.perf_counter() - started < 1.5  # not behind the step
    t.join(10)
    assert time.perf_counter() - started < 2.5
    assert answers[0]["error_type"] == "EnvError" and "did not answer within 0.5 s" in answers[0]["error"]


class ThreadBoundToy(Toy24Env):
    """A bridge with the constraints of a browser engine (Playwright's sync API): it refuses
    to run on a thread with a running event loop, and notes the thread it runs on."""

    threads: list[int] = []

    def _check(self) -> None:
        import asyncio
        import threading

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            ThreadBoundToy.threads.append(threading.get_ident())
            return
        raise RuntimeError("called from inside the asyncio loop")

    def _reset(self, task, seed, options):  # type: ignore[no-untyped-def]
        self._check()
        return super()._reset(task, seed, options)

    def _step(self, action: Action) -> EnvResponse:
        self._check()
        return super()._step(action)


class ThreadBoundPlugin:
    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="threadtoy", factory=ThreadBoundToy)]


def test_envs_run_off_the_event_loop_always_on_the_same_thread(tmp_path) -> None:
    registry = make_plugin_manager(entry_points=False, plugins=[ThreadBoundPlugin()])
    c = TestClient(create_app([tmp_path], token=TOKEN, registry=registry), base_url="http://127.0.0.1:8765")
    c.cookies.set(COOKIE, TOKEN)
    new = c.post("/api/play/new", json={"spec": "bridge: threadtoy\n", "task": "easy/2,3,4"}).json()
    assert "error" not in new, new
    for action in ("combine i=0 j=1 op=add", "combine i=0 j=1 op=mul"):
        out = c.post(f"/api/play/{new['session']}/step", json={"action": action}).json()
        assert "error" not in out, out
    assert len(ThreadBoundToy.threads) >= 3 and len(set(ThreadBoundToy.threads)) == 1


def test_a_step_shows_the_replaced_observation_as_data_not_text() -> None:
    """An effect keeps the observation it replaced as the record's read-only mapping; the
    playground answers it as JSON data, not as the mapping's repr."""
    spec = ("bridge: toy24\nlayers:\n  - kind: contract\n    code: |\n"
            "      def filter_observation(observation, state, memo):\n"
            "          return observation.text + ' (seen)'\n")
    play = Playground(REGISTRY)
    sid = play.new(spec, "medium/1,2,6,6")["session"]
    out = play.step(sid, '{"tool": "combine", "args": {"i": 0, "j": 1, "op": "add"}}')
    (effect,) = [e for e in out["effects"] if e["kind"] == "contract"]
    before = effect["observation_before"]
    assert isinstance(before["data"], dict) and before["data"], before
    assert out["observation"] == before["text"] + " (seen)"
