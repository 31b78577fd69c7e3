"""WebArena task configs are checked when the bridge is made: a malformed eval block, a
wrongly typed field or an unreadable config file is a SpecError naming the task and the
field, so it never grades (an empty ``must_include`` passes any answer) and never reaches
Chromium (where a bad ``viewport_size`` looked like a dead browser). And the agent's page
URL put into a ``func:`` template stays one string, whatever it contains."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from envh import Action, TaskRef, errors
from envh_webarena.demo.tasks import TASKS
from envh_webarena.webarena import config, helpers

URLS = {site: f"http://127.0.0.1:{7000 + i}" for i, site in enumerate(config.SITE_VARS)}

# records in the shapes test.raw.json uses (each of its 812 tasks loads: checked against the
# file shipped in libwebarena 0.0.5): exact_match, must_include, fuzzy_match lists and "N/A",
# url_match with program_html, targets with prep_actions and func: urls and locators
WEBARENA_SHAPES: list[dict[str, Any]] = [
    {"sites": ["shopping_admin"], "task_id": 0, "require_login": True,
     "storage_state": "./.auth/shopping_admin_state.json", "start_url": "__SHOPPING_ADMIN__", "geolocation": None,
     "intent_template": "What is the top-{{n}} best-selling product in {{year}}", "instantiation_dict": {"n": 1},
     "intent": "What is the top-1 best-selling product in 2022", "require_reset": False,
     "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "Quest Lumaflex Band"},
              "reference_url": "", "program_html": [], "string_note": ""}, "intent_template_id": 279},
    {"sites": ["map"], "task_id": 8, "require_login": True, "storage_state": None, "start_url": "__MAP__",
     "geolocation": None, "intent": "Airports within 5 km of CMU",
     "eval": {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": "N/A"},
              "reference_url": "", "program_html": [], "string_note": "There is no airport within 5 km"}},
    {"sites": ["shopping"], "task_id": 3, "require_login": True, "storage_state": None, "start_url": "__SHOPPING__",
     "geolocation": None, "intent": "top-2 products",
     "eval": {"eval_types": ["string_match"], "reference_url": None, "program_html": [],
              "reference_answers": {"must_include": ["Quest", "Sprite"], "fuzzy_match": ["Quest and Sprite"]}}},
    {"sites": ["reddit"], "task_id": 400, "require_login": True, "storage_state": "./.auth/reddit_state.json",
     "start_url": "__REDDIT__", "geolocation": None, "intent": "Post in books",
     "eval": {"eval_types": ["url_match", "program_html"], "reference_answers": None,
              "reference_url": "__REDDIT__/f/books |OR| __REDDIT__/f/books/new", "url_note": "GOLD in PRED",
              "program_html": [
                  {"url": "func:reddit_get_post_url('__last_url__')",
                   "locator": "document.querySelector('.submission__inner').outerText",
                   "required_contents": {"must_include": ["hello |OR| hi"]}},
                  {"url": "last", "locator": "", "required_contents": {"exact_match": "done"},
                   "prep_actions": ["document.querySelector('button').click()"]},
                  {"url": "__GITLAB__/a11yproject/-/project_members",
                   "locator": "func:gitlab_get_project_memeber_role(__page__, 'yjlou')",
                   "required_contents": {"must_include": ["Developer"]}},
                  {"url": "__SHOPPING__/admin", "locator": "[...document.querySelectorAll('td')].length",
                   "required_contents": {"exact_match": "3"}}]}},
]


def _task(ev: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    task = {"task_id": 7, "sites": ["reddit"], "start_url": "__REDDIT__/", "intent": "probe",
            "require_login": False, "storage_state": None, "geolocation": None,
            "eval": ev if ev is not None else {"eval_types": ["url_match"], "reference_url": "__REDDIT__/f/books"}}
    return {**task, **extra}


def _refused(task: dict[str, Any], field: str) -> errors.SpecError:
    with pytest.raises(errors.SpecError) as info:
        config.load_tasks(tasks=[task], urls=URLS)
    message = str(info.value)
    assert field in message and "task_id 7" in message and "tasks[0]" in message, message
    return info.value


def test_webarena_and_demo_task_shapes_load() -> None:
    assert list(config.load_tasks(tasks=copy.deepcopy(TASKS), urls=URLS)) == [str(t["task_id"]) for t in TASKS]
    loaded = config.load_tasks(tasks=WEBARENA_SHAPES, urls=URLS)
    assert list(loaded) == ["0", "8", "3", "400"]
    assert loaded["400"]["eval"]["program_html"][2]["url"] == f"{URLS['gitlab']}/a11yproject/-/project_members"


@pytest.mark.parametrize(("ev", "field"), [
    ({"eval_types": ["string_match"], "reference_answers": None}, "eval.reference_answers"),
    ({"eval_types": ["string_match"], "reference_answers": {}}, "eval.reference_answers"),
    ({"eval_types": ["string_match"], "reference_answers": {"exact_match": 25}}, "reference_answers.exact_match"),
    ({"eval_types": ["string_match"], "reference_answers": {"exact_match": ["25"]}},
     "reference_answers.exact_match"),
    ({"eval_types": ["string_match"], "reference_answers": {"must_include": []}}, "reference_answers.must_include"),
    ({"eval_types": ["string_match"], "reference_answers": {"must_include": "apple"}},
     "reference_answers.must_include"),
    ({"eval_types": ["string_match"], "reference_answers": {"must_include": ["a", 1]}},
     "reference_answers.must_include"),
    ({"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ""}}, "reference_answers.fuzzy_match"),
    ({"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": "Dune"}},
     "reference_answers.fuzzy_match"),
    ({"eval_types": ["string_match"], "reference_answers": {"exact_match": "x", "must_inclde": ["x"]}},
     "reference_answers.must_inclde"),
    ({"eval_types": ["url_match"], "reference_url": ""}, "eval.reference_url"),
    ({"eval_types": ["url_match"], "reference_url": ["http://x/"]}, "eval.reference_url"),
    ({"eval_types": ["url_match"], "reference_url": "http://x/", "url_note": "EXACT"}, "eval.url_note"),
    ({"eval_types": ["program_html"], "program_html": []}, "eval.program_html"),
    ({"eval_types": ["program_html"], "program_html": None}, "eval.program_html"),
    ({"eval_types": ["program_html"], "program_html": ["last"]}, "eval.program_html[0]"),
    ({"eval_types": ["program_html"], "program_html": [
        {"locator": "", "required_contents": {"must_include": ["x"]}}]}, "eval.program_html[0].url"),
    ({"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": None, "required_contents": {"must_include": ["x"]}}]},
     "eval.program_html[0].locator"),
    ({"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "#main", "required_contents": {"must_include": ["x"]}}]},
     "eval.program_html[0].locator"),
    ({"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "", "required_contents": {"must_include": "home"}}]},
     "program_html[0].required_contents.must_include"),
    ({"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "", "required_contents": {"exact_match": None}}]},
     "program_html[0].required_contents.exact_match"),
    ({"eval_types": ["program_html"], "program_html": [{"url": "last", "locator": "", "required_contents": {}}]},
     "program_html[0].required_contents"),
    ({"eval_types": ["program_html"], "program_html": [  # which one would count is not clear
        {"url": "last", "locator": "", "required_contents": {"exact_match": "a", "must_include": ["b"]}}]},
     "program_html[0].required_contents"),
    ({"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "", "required_contents": {"must_include": ["x"]}, "prep_actions": "click()"}]},
     "program_html[0].prep_actions"),
    ({"eval_types": []}, "eval.eval_types"),
    ({"eval_types": "string_match"}, "eval.eval_types"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_malformed_eval_blocks_are_refused_naming_the_field(ev: dict[str, Any], field: str) -> None:
    _refused(_task(ev), field)


def test_every_problem_of_a_task_is_listed_at_once() -> None:
    err = _refused(_task({"eval_types": ["string_match", "url_match"], "reference_answers": {"must_include": []},
                          "reference_url": None}, viewport_size="big"), "viewport_size")
    assert [p.split(":")[0] for p in err.problems] == [
        "viewport_size", "eval.reference_answers.must_include", "eval.reference_url"]


@pytest.mark.parametrize(("extra", "field"), [
    ({"storage_state": {"cookies": []}}, "storage_state"),
    ({"viewport_size": "big"}, "viewport_size"),
    ({"viewport_size": {"width": 800}}, "viewport_size"),
    ({"viewport_size": {"width": 800, "height": "600"}}, "viewport_size"),
    ({"viewport_size": {"width": 0, "height": 600}}, "viewport_size"),
    ({"viewport_size": {"width": True, "height": 600}}, "viewport_size"),
    ({"geolocation": {"lat": 1}}, "geolocation"),
    ({"geolocation": {"latitude": 91, "longitude": 0}}, "geolocation"),
    ({"geolocation": {"latitude": "40.4", "longitude": -79.9}}, "geolocation"),
    ({"geolocation": {"latitude": 40.4, "longitude": -79.9, "accuracy": -1}}, "geolocation"),
    ({"geolocation": {"latitude": 40.4, "longitude": -79.9, "altitude": 3}}, "geolocation"),
    ({"geolocation": "Pittsburgh"}, "geolocation"),
    ({"sites": "reddit"}, "sites"),
    ({"sites": ["redit"]}, "sites"),
    ({"sites": [{"reddit": 1}]}, "sites"),
    ({"require_login": "yes"}, "require_login"),
    ({"start_url": ""}, "start_url"),
    ({"intent": None}, "intent"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_wrongly_typed_task_fields_are_refused(extra: dict[str, Any], field: str) -> None:
    _refused(_task(**extra), field)


def test_task_ids_must_be_well_formed_and_unique(tmp_path: Path) -> None:
    with pytest.raises(errors.SpecError, match="task_id"):
        config.load_tasks(tasks=[_task(task_id=None)], urls=URLS)
    with pytest.raises(errors.SpecError, match="task_id"):
        config.load_tasks(tasks=[_task(task_id=True)], urls=URLS)
    with pytest.raises(errors.SpecError, match=r"task_id '7' is given twice \(tasks\[0\] and tasks\[1\]\)"):
        config.load_tasks(tasks=[_task(), _task(task_id="7")], urls=URLS)
    (tmp_path / "a.json").write_text(json.dumps([_task()]))
    with pytest.raises(errors.SpecError, match="a.json"):
        config.load_tasks(tasks=[_task()], config_files=str(tmp_path / "*.json"), urls=URLS)


def test_unreadable_config_files_are_refused_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    for name in ("bad.json", "dir.json", "bin.json"):
        path = str(tmp_path / name)
        with pytest.raises(errors.SpecError, match="cannot be read as JSON") as info:
            config.load_tasks(config_files=path, urls=URLS)
        assert path in str(info.value)
    (tmp_path / "one.json").write_text(json.dumps("a string"))
    with pytest.raises(errors.SpecError, match="must be an object"):
        config.load_tasks(config_files=str(tmp_path / "one.json"), urls=URLS)
    with pytest.raises(errors.SpecError, match="config.tasks"):
        config.load_tasks(tasks={"task_id": 1}, urls=URLS)  # type: ignore[arg-type]


def test_site_overrides_are_a_mapping_of_urls() -> None:
    with pytest.raises(errors.SpecError, match="config.sites must be an object"):
        config.site_urls(["shopping"])  # type: ignore[arg-type]
    with pytest.raises(errors.SpecError, match="config.sites.shopping"):
        config.site_urls({"shopping": 7770})  # type: ignore[dict-item]
    with pytest.raises(errors.UnknownNameError, match="shoping"):
        config.site_urls({"shoping": "http://x"})
    assert config.site_urls({"shopping": "http://127.0.0.1:7770/"})["shopping"] == "http://127.0.0.1:7770"


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:1/f/books/__last_url__/",
    "http://127.0.0.1:1/f/books/'__last_url__'/",
    "http://127.0.0.1:1/f/books/\"__last_url__\"/",
    "http://127.0.0.1:1/f/books/1/'),__import__('os').getcwd(),('",
])
def test_func_placeholder_is_substituted_once_whatever_the_url_holds(url: str) -> None:
    expected = helpers.reddit_get_post_url(url)
    for template in ("reddit_get_post_url('__last_url__')", 'reddit_get_post_url("__last_url__")',
                     "reddit_get_post_url(__last_url__)"):
        assert helpers.call(template, last_url=url, page=None) == expected


def test_func_placeholder_inside_a_literal_and_page_argument() -> None:
    url = "http://127.0.0.1:1/f/x/__last_url__/"
    assert helpers.call("reddit_get_post_url('__last_url__' )", last_url=url, page=None) == url
    # inside a longer literal the placeholder is replaced in one pass, as WebArena's replace() does
    assert helpers.call("reddit_get_post_url('__last_url__1/')", last_url="http://h/f/y/",
                        page=None) == "http://h/f/y/1/"

    class Page:
        def evaluate(self, script: str, arg: str) -> str:
            return f"role of {arg}"

    assert helpers.call("gitlab_get_project_memeber_role(__page__, 'yjlou')", last_url=url,
                        page=Page()) == "role of yjlou"
    for bad in ("reddit_get_post_url({[1]: 2})", "reddit_get_post_url('\0')", "reddit_get_post_url(__other__)"):
        with pytest.raises(errors.SpecError):
            helpers.call(bad, last_url=url, page=None)


def test_valid_viewport_and_geolocation_reach_the_page(demo_sites) -> None:
    """The shapes the check lets through are the ones Chromium takes."""
    from envh_webarena.webarena.bridge import WebArenaEnv

    task = _task(viewport_size={"width": 800, "height": 600},
                 geolocation={"latitude": 40.44, "longitude": -79.94, "accuracy": 10})
    env = WebArenaEnv(tasks=[task], sites=demo_sites["urls"])
    try:
        env.reset(task=TaskRef(suite="webarena", split="test", instance_id="7"))
        assert env.session is not None
        assert env.session.page.evaluate("() => [window.innerWidth, window.innerHeight]") == [800, 600]
        env.step(Action(tool="goto", args={"url": f"{demo_sites['forum'].url}/f/books"}))
        assert env.evaluate().success
    finally:
        env.close()
