"""WebArena on local sites in its task format, graded by its evaluators: every eval type,
login with storage state, site reset, WA_* variables, a stage replaying navigation, a
contract keeping goto on the task's host, and ``envh webarena check``."""

from __future__ import annotations

import json
import os

import pytest
from envh import Action, TaskRef, errors, make
from envh.testing_replies import text_reply
from envh_webarena.axtree import find_bid
from envh_webarena.demo.tasks import TASKS


def A(tool: str, **args: object) -> Action:  # noqa: N802
    return Action(tool=tool, args=args)


def T(task_id: int) -> TaskRef:  # noqa: N802
    return TaskRef(suite="webarena", split="test", instance_id=str(task_id))


@pytest.fixture(scope="module")
def auth_dir(tmp_path_factory):
    """Where the logins' state files go, granted to the specs the tests build (``--data``)."""
    from envh.hostpaths import granted

    path = str(tmp_path_factory.mktemp("wa-auth"))
    with granted(path):
        yield path


@pytest.fixture(scope="module")
def env(demo_sites, auth_dir):
    from envh_webarena.webarena.bridge import WebArenaEnv

    e = WebArenaEnv(tasks=TASKS, sites=demo_sites["urls"], auth_dir=auth_dir)
    yield e
    e.close()


def test_string_match_exact(env) -> None:
    obs = env.reset(task=T(1)).observation
    assert obs.data["goal"].startswith("What is the price of the Blue Kettle")
    obs = env.step(A("click", bid=find_bid(obs.text, "link", "Blue Kettle"))).observation
    assert "$25.00" in obs.text
    resp = env.step(A("stop", answer='"25.00"'))  # WebArena strips one pair of quotes
    assert resp.terminated and env.evaluate().success
    env.reset(task=T(1))
    env.step(A("stop", answer="$25.00"))
    verdict = env.evaluate()
    assert not verdict.success and verdict.metrics["details"]["string_match"] == {"exact_match": 0.0}


def test_string_match_grades_the_stop_answer_only(env) -> None:
    """As WebArena's run.py: the stop action's answer ("" when stopped with none), never a
    message sent before it; a truncated episode is graded on run.py's early-stop answer."""
    env.reset(task=T(2))
    env.step(A("send_msg_to_user", text="It was posted by alice_hikes."))
    env.step(A("stop", answer=""))
    verdict = env.evaluate()
    assert not verdict.success and verdict.metrics["answer"] == ""
    env.reset(task=T(2))
    env.step(A("stop", answer="It was posted by alice_hikes."))
    assert env.evaluate().success
    env.reset(task=T(2))
    env.step(A("stop", answer="bob"))
    assert not env.evaluate().success
    budget, env.max_steps = env.max_steps, 1
    try:
        env.reset(task=T(2))
        assert env.step(A("send_msg_to_user", text="alice_hikes")).truncated
        verdict = env.evaluate()
        assert not verdict.success and verdict.metrics["answer"] == "Early stop: Reach max steps 1"
    finally:
        env.max_steps = budget


def test_string_match_fuzzy_asks_the_judge(demo_sites, auth_dir, llm_replay_server) -> None:
    from envh_webarena.webarena.bridge import WebArenaEnv

    llm_replay_server.add(text_reply("The answer is correct."), text_reply("Incorrect."), text_reply("no idea"))
    env = WebArenaEnv(tasks=TASKS, sites=demo_sites["urls"], auth_dir=auth_dir,
                      judge={"base_url": llm_replay_server.base_url, "model": "judge"})
    try:
        env.reset(task=T(3))
        env.step(A("stop", answer="Dune, by Frank Herbert"))
        assert env.evaluate().success
        prompt = llm_replay_server.chat_requests[0]["messages"][-1]["content"]
        assert "reference answer: Dune" in prompt and "student answer: dune, by frank herbert" in prompt
        env.reset(task=T(3))
        env.step(A("stop", answer="Foundation"))
        assert not env.evaluate().success
        env.reset(task=T(3))
        env.step(A("stop", answer="Dune"))
        verdict = env.evaluate()  # a reply without a verdict: the answer earns nothing
        assert verdict.score == 0.0 and "no verdict" in verdict.metrics["details"]["string_match"]["fuzzy_match_error"]
    finally:
        env.close()


def test_fuzzy_match_without_a_judge_is_a_clear_error(env) -> None:
    env.reset(task=T(3))
    env.step(A("stop", answer="Dune"))
    with pytest.raises(errors.EnvError, match="judge"):
        env.evaluate()


def test_url_match(env, demo_sites) -> None:
    obs = env.reset(task=T(4)).observation
    assert not env.evaluate().success
    env.step(A("goto", url=f"{demo_sites['forum'].url}/f/bookshelf"))  # WebArena's substring test says yes
    assert not env.evaluate().success
    env.step(A("go_back"))
    env.step(A("click", bid=find_bid(obs.text, "link", "books")))
    assert env.evaluate().success
    obs = env.reset(task=T(5)).observation
    env.step(A("fill", bid=find_bid(obs.text, "textbox", "Search"), value="mug"))
    env.step(A("click", bid=find_bid(obs.text, "button", "Go")))
    assert env.get_env_state()["url"].endswith("?q=mug") and not env.evaluate().success
    env.step(A("goto", url=f"{demo_sites['shop'].url}/catalogsearch/result/?q=kettle"))
    assert env.evaluate().success


def test_program_html_with_login_and_storage_state(env, auth_dir) -> None:
    obs = env.reset(task=T(6)).observation
    state_file = os.path.join(auth_dir, ".auth", "reddit_state.json")
    assert os.path.isfile(state_file)  # logged in once, as WebArena's auto_login does
    with open(state_file, encoding="utf-8") as f:
        assert any(c["name"] == "sid" for c in json.load(f)["cookies"])
    assert "Signed in as MarvelsGrantMan136" in obs.text and "Create submission" in obs.text
    assert not env.evaluate().success
    env.step(A("select_option", bid=find_bid(obs.text, "combobox", "Forum"), options="books"))
    env.step(A("fill", bid=find_bid(obs.text, "textbox", "Title"), value="Envh test"))
    env.step(A("fill", bid=find_bid(obs.text, "textbox", "Body"), value="hello from envh"))
    resp = env.step(A("click", bid=find_bid(obs.text, "button", "Create submission")))
    assert "/f/books/" in resp.observation.data["url"]
    verdict = env.evaluate()
    assert verdict.success, verdict.metrics
    assert [t["score"] for t in verdict.metrics["details"]["program_html"]] == [1.0, 1.0]


def test_program_html_shop_order_and_site_reset(demo_sites, auth_dir) -> None:
    from envh_webarena.webarena.bridge import WebArenaEnv

    shop = demo_sites["shop"]
    env = WebArenaEnv(tasks=TASKS, sites=demo_sites["urls"], auth_dir=auth_dir, full_reset=f"{shop.url}/reset")
    try:
        before = shop.resets
        obs = env.reset(task=T(7)).observation
        assert shop.resets == before + 1
        obs = env.step(A("click", bid=find_bid(obs.text, "button", "Add to Cart"))).observation
        env.step(A("click", bid=find_bid(obs.text, "button", "Place Order")))
        assert env.evaluate().success
        env.reset(task=T(7))  # the site reset empties the order history
        assert shop.resets == before + 2 and not shop.orders
        assert not env.evaluate().success
    finally:
        env.close()


def test_wa_variables_and_config_files(demo_sites, tmp_path, monkeypatch) -> None:
    from envh_webarena.webarena.bridge import WebArenaEnv

    for task in TASKS[:2]:
        (tmp_path / f"{task['task_id']}.json").write_text(json.dumps(task))
    monkeypatch.setenv("WA_SHOPPING", demo_sites["shop"].url + "/")
    monkeypatch.delenv("WA_REDDIT", raising=False)
    with pytest.raises(errors.SpecError, match="WA_REDDIT"):
        WebArenaEnv(config_files=str(tmp_path / "*.json"))
    monkeypatch.setenv("WA_REDDIT", demo_sites["forum"].url)
    env = WebArenaEnv(config_files=str(tmp_path / "*.json"))
    try:
        assert [t.instance_id for t in env.list_tasks()] == ["1", "2"]
        assert env.reset(task=T(1)).observation.data["url"] == demo_sites["shop"].url + "/"
    finally:
        env.close()
    bad = dict(TASKS[0], eval={"eval_types": ["string_match", "vibes"], "reference_answers": {}})
    with pytest.raises(errors.SpecError, match="vibes"):
        WebArenaEnv(tasks=[bad], sites=demo_sites["urls"])


def test_stage_replays_navigation(demo_sites, auth_dir) -> None:
    forum = demo_sites["forum"].url
    spec = {"bridge": "webarena", "config": {"tasks": TASKS, "sites": demo_sites["urls"], "auth_dir": auth_dir},
            "layers": [{"kind": "stage", "actions": [{"tool": "goto", "args": {"url": f"{forum}/f/hiking"}},
                                                     {"tool": "goto", "args": {"url": f"{forum}/f/books"}}]}]}
    with make(spec) as env:
        obs = env.reset(task=T(4)).observation
        assert obs.data["url"] == f"{forum}/f/books" and "Reading list 2024" in obs.text
        assert env.evaluate().success  # the stage did the task: the verdict is still WebArena's
        assert env.get_env_state()["steps"] == 0  # replayed steps are not the policy's
        env.step(A("go_back"))
        assert env.get_env_state()["url"] == f"{forum}/f/hiking" and not env.evaluate().success


def test_contract_blocks_goto_to_other_hosts(demo_sites, auth_dir) -> None:
    from envh_webarena.design import same_host_contract

    shop, forum = demo_sites["shop"].url, demo_sites["forum"].url
    host = forum.split("//", 1)[1]
    spec = {"bridge": "webarena", "config": {"tasks": TASKS, "sites": demo_sites["urls"], "auth_dir": auth_dir},
            "layers": [same_host_contract([host])]}
    with make(spec) as env:
        env.reset(task=T(4))
        for url in (f"{shop}/", f"http://{host}@127.0.0.2:1/", "javascript:alert(1)", "file:///etc/passwd"):
            resp = env.step(A("goto", url=url))
            assert resp.info.get("error"), url
            assert env.get_env_state()["url"] == f"{forum}/"
        resp = env.step(A("goto", url=f"{forum}/f/books"))
        assert not resp.info.get("error") and env.evaluate().success


def test_other_hosts_are_unreachable_from_the_browser(env, demo_sites) -> None:
    env.reset(task=T(4))
    # Chromium resolves any *.localhost name to loopback by itself: without the runtime's
    # resolver rules and dead proxy this name reaches the shop on 127.0.0.1, so it is the
    # one URL here that fails only because of the block (the others fail anyway here)
    port = demo_sites["shop"].url.rsplit(":", 1)[1]
    for url in (f"http://elsewhere.localhost:{port}/", "http://192.0.2.1/", "http://example.invalid/",
                "file:///etc/passwd", "chrome://version"):
        resp = env.step(A("goto", url=url))
        assert resp.info["error"]["type"] == "action_failed", url
    assert env.get_env_state()["url"].endswith("/")


def test_check_command_reports_sites(demo_sites, monkeypatch) -> None:
    from click.testing import CliRunner
    from envh_webarena.cli import webarena
    from envh_webarena.httpserve import LocalServer
    from envh_webarena.webarena.config import SITE_VARS

    for var in SITE_VARS.values():
        monkeypatch.delenv(var, raising=False)
    closed = LocalServer(object)  # bind a port, then free it: nothing answers there
    closed.close()
    monkeypatch.setenv("WA_SHOPPING", demo_sites["shop"].url)
    monkeypatch.setenv("WA_REDDIT", closed.url)
    result = CliRunner().invoke(webarena, ["check", "--json", "--no-browser", "--timeout", "2"])
    report = json.loads(result.output)
    assert result.exit_code == 1
    assert report["sites"]["shopping"]["ok"] and report["sites"]["shopping"]["status"] == 200
    assert not report["sites"]["reddit"]["ok"] and report["sites"]["gitlab"]["error"] == "WA_GITLAB is not set"
    monkeypatch.delenv("WA_REDDIT")
    ok = CliRunner().invoke(webarena, ["check", "--json", "--no-browser"])
    assert ok.exit_code == 0, ok.output


def test_history_navigation_is_prompt_and_not_an_error(env, demo_sites) -> None:
    import time

    forum = demo_sites["forum"].url
    env.reset(task=T(4))
    env.step(A("goto", url=f"{forum}/f/hiking"))
    start = time.monotonic()
    back = env.step(A("go_back"))
    forward = env.step(A("go_forward"))
    assert time.monotonic() - start < 4  # a back-forward-cache restore used to wait out the timeout
    assert not back.info.get("error") and not forward.info.get("error")
    assert forward.observation.data["url"] == f"{forum}/f/hiking"


def test_templates_build_working_layers(env, demo_sites, auth_dir) -> None:
    from envh import get_registry
    from envh_webarena.design import SameHost, ShortTree

    templates = get_registry().templates()
    assert templates["web.same-host"].bridge == "webarena" and "web.short-tree" in templates
    env.reset(task=T(4))
    same, short = SameHost().instantiate(env, T(4), 1), ShortTree().instantiate(env, T(4), 3)
    spec = {"bridge": "webarena", "config": {"tasks": TASKS, "sites": demo_sites["urls"], "auth_dir": auth_dir},
            "layers": [*same, *short]}
    with make(spec) as stack:
        obs = stack.reset(task=T(4)).observation
        assert "more lines hidden" in obs.text
        assert stack.step(A("goto", url=f"{demo_sites['shop'].url}/")).info.get("error")
        assert not stack.step(A("goto", url=f"{demo_sites['forum'].url}/f/books")).info.get("error")
        assert stack.evaluate().success
