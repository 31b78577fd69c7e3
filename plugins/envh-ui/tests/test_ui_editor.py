"""The playground's spec editor and error display in a real browser: completion from the
layer kinds' schemas, problems marked on their line, bridges that raise, and hostile text
(HTML in kind descriptions, enum values and error messages) shown as text.

The app runs over a registry of its own: the built-ins plus a test plugin with a bridge
that raises ``RuntimeError``/``KeyError`` and a component kind full of HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import attrs
import pytest
from envh import BridgeInfo, ComponentKind, errors, hookimpl
from envh.bridges.toy24 import Toy24Env
from envh.components.budget import BudgetSpec
from envh.components.contract import ContractSpec
from envh.plugins.manager import make_plugin_manager
from envh.spec import LayerSpec
from envh.types import Action, EnvResponse
from envh_ui.app import create_app
from playwright.sync_api import expect

TOKEN = "ed1t0r"
HTML = "<img src=x onerror=\"document.title='pwned'\">"


class BrokenToy(Toy24Env):
    """Toy24 whose engine breaks on some actions the way third-party bridges do."""

    def _step(self, action: Action) -> EnvResponse:
        if action.tool == "stop":
            raise RuntimeError("the engine lost its state")
        if action.args.get("op") == "div":
            raise KeyError("slot-7")
        return super()._step(action)


def dead_toy(**config: object) -> Toy24Env:
    raise RuntimeError("cannot start the engine")


@attrs.frozen(kw_only=True)
class HostileSpec(LayerSpec):
    """Says <b>bold</b> things <img src=x onerror="document.title='pwned-doc'">."""

    kind: Literal["hostile"] = "hostile"
    mode: Literal["<script>document.title='pwned-enum'</script>", "calm"] = "calm"


def build_hostile(spec: HostileSpec, inner: object, ctx: object) -> object:
    raise errors.SpecError(f"hostile layer refuses: {HTML}")


class TestPlugin:
    @hookimpl
    def envh_bridges(self) -> list[BridgeInfo]:
        return [BridgeInfo(name="brokentoy", factory=BrokenToy), BridgeInfo(name="deadtoy", factory=dead_toy)]

    @hookimpl
    def envh_component_kinds(self) -> list[ComponentKind]:
        return [ComponentKind(name="hostile", spec_type=HostileSpec, factory=build_hostile, description=HTML)]


REGISTRY = make_plugin_manager(entry_points=False, plugins=[TestPlugin()])


@pytest.fixture(scope="module")
def server(serve, tmp_path_factory: pytest.TempPathFactory):
    with serve(create_app([tmp_path_factory.mktemp("empty")], token=TOKEN, registry=REGISTRY), named=True) as url:
        yield url


@pytest.fixture
def page(browser, server, watch):
    context = browser.new_context()
    p = context.new_page()
    problems = watch(p)
    p.goto(f"{server}/?token={TOKEN}")
    p.goto(f"{server}/playground")
    p.wait_for_selector("#gutter div")
    yield p
    title = p.title()
    context.close()
    assert problems == []
    assert title == "Playground · envh"  # nothing hostile ran


def _type_at_end(page, text: str, typed: str) -> None:
    page.fill("#spec", text)
    page.locator("#spec").focus()
    page.keyboard.press("Control+End")
    page.keyboard.type(typed)


def _offers(page, labels: list[str]) -> None:
    """The completion list shows exactly ``labels``, in order (waits for the answer)."""
    expect(page.locator("#completions li .label")).to_have_text(labels)


def test_typing_suggests_the_keys_of_the_layers_kind_and_accepting_inserts_one(page) -> None:
    spec = "bridge: toy24\nlayers:\n  - kind: contract\n    code: x\n    "
    _type_at_end(page, spec, "t")
    expected = [f.name for f in attrs.fields(ContractSpec) if f.name.startswith("t")]
    assert expected == ["time_limit_ms", "trust"]
    _offers(page, expected)
    page.keyboard.press("ArrowDown")
    assert page.locator("#completions li.active .label").inner_text() == "trust"
    page.keyboard.press("Enter")
    assert page.input_value("#spec") == spec + "trust: "
    _offers(page, ["trusted", "untrusted"])  # accepting a key with an enum offers its values
    page.keyboard.press("Enter")
    assert page.input_value("#spec") == spec + "trust: trusted"
    page.wait_for_selector("#completions", state="hidden")  # the value is there: nothing more to offer


def test_kind_values_are_the_registered_kinds_and_each_kind_its_own_keys(page) -> None:
    _type_at_end(page, "bridge: toy24\nlayers:\n  - kind: contract\n    code: x\n  - kind: ", "")
    page.keyboard.press("Control+Space")
    _offers(page, sorted(REGISTRY.component_kinds()))
    page.locator("#completions li", has_text="budget").first.dispatch_event("mousedown")
    assert page.input_value("#spec").endswith("  - kind: budget")
    page.keyboard.press("Enter")
    page.keyboard.type("    ")
    _offers(page, [f.name for f in attrs.fields(BudgetSpec) if f.name != "kind"])
    page.keyboard.type("max_r")
    _offers(page, ["max_repeats"])
    page.keyboard.press("Tab")
    assert page.input_value("#spec").endswith("  - kind: budget\n    max_repeats: ")
    page.keyboard.press("Escape")
    page.wait_for_selector("#completions", state="hidden")
    _type_at_end(page, "bridge: t", "o")
    _offers(page, ["toy24"])
    _type_at_end(page, "bridge: toy24\n", "la")
    _offers(page, ["layers"])
    page.keyboard.press("Enter")
    assert page.input_value("#spec") == "bridge: toy24\nlayers:\n  - "  # the first layer started
    _offers(page, ["kind"])
    page.keyboard.press("Enter")
    _offers(page, sorted(REGISTRY.component_kinds()))


def test_characters_outside_the_bmp_before_the_cursor_do_not_shift_the_insertion(page) -> None:
    spec = "# \U0001f6ab\U0001f6ab no division \U0001f600\nbridge: toy24\nlayers:\n  - kind: budget\n    "
    _type_at_end(page, spec, "max_r")
    _offers(page, ["max_repeats"])
    page.keyboard.press("Enter")
    assert page.input_value("#spec") == spec + "max_repeats: "


def test_a_problem_is_marked_on_its_line_with_its_message(page) -> None:
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 3\n    max_step: 4\n"
                       "  - kind: chain\n    mode: sideways\n    legs: [{bridge: toy24}]\n")
    page.wait_for_selector("#gutter div.marked")
    assert page.locator("#gutter div.marked").all_inner_texts() == ["5", "7"]
    line5 = page.locator("#backdrop .line.marked[data-line='5']")
    assert line5.locator(".text").inner_text() == "    max_step: 4"
    assert "unknown key 'max_step'" in line5.locator(".msg").inner_text()
    assert "sideways" in page.locator("#backdrop .line.marked[data-line='7'] .msg").inner_text()
    # the mark sits beside its line: same height on the page as the textarea's 5th line
    top = page.locator("#spec").bounding_box()["y"]
    mark = page.locator("#gutter div").nth(4).bounding_box()["y"]
    assert abs(mark - (top + 4 + 4 * 20)) <= 2
    page.locator("#spec").focus()
    page.keyboard.press("Control+Home")
    page.keyboard.press("Enter")  # editing clears the stale marks; the recheck puts them one line lower
    page.wait_for_selector("#gutter div.marked[data-line='8']")
    assert page.locator("#gutter div.marked").all_inner_texts() == ["6", "8"]


def test_contract_code_errors_are_marked_on_the_spec_line_of_the_code(page) -> None:
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 5\n  - kind: contract\n"
                       "    code: |\n      def filter_action(action, state, memo):\n          return (\n")
    page.locator("#check").click()
    page.wait_for_selector("#gutter div.marked")
    assert page.locator("#gutter div.marked").all_inner_texts() == ["8"]  # line 2 of the code
    assert "Contract code error" in page.locator("#backdrop .line.marked .msg").inner_text()
    assert "$.layers[1].code" in page.locator("#problems").inner_text()
    page.fill("#spec", "bridge: toy24\nlayers: [\n")
    page.locator("#check").click()
    page.wait_for_selector("#gutter div.marked")
    assert "not valid YAML" in page.locator("#error").inner_text()
    page.fill("#spec", "bridge: nosuchbridge\n")
    page.locator("#check").click()
    page.wait_for_selector("#gutter div.marked[data-line='1']")
    assert "Unknown bridge 'nosuchbridge'" in page.locator("#backdrop .msg").inner_text()


@pytest.mark.parametrize(("action", "cause"), [("stop", "RuntimeError: the engine lost its state"),
                                               ("combine i=0 j=1 op=div", "KeyError: 'slot-7'")])
def test_a_bridge_that_raises_is_a_typed_error_on_the_page(page, action: str, cause: str) -> None:
    page.fill("#spec", "bridge: brokentoy\n")
    page.locator("#start").click()
    expect(page.locator("#seen")).not_to_be_empty()
    page.fill("#action", action)
    page.locator("#step").click()
    expect(page.locator("#error")).not_to_be_empty()
    assert page.locator("#error").inner_text() == f"EnvError: The environment failed while stepping " \
                                                  f"{action.split()[0]!r}: {cause}"
    assert page.locator("#error").get_attribute("data-type") == "EnvError"
    page.fill("#action", "combine i=0 j=1 op=add")  # the session is still there
    page.locator("#step").click()
    page.wait_for_selector("li.logline")


def test_a_bridge_that_cannot_start_is_a_typed_error(page) -> None:
    page.fill("#spec", "bridge: deadtoy\n")
    page.locator("#start").click()
    expect(page.locator("#error")).not_to_be_empty()
    assert page.locator("#error").inner_text() == (
        "EnvError: The environment failed while building the spec: RuntimeError: cannot start the engine")


def test_html_in_descriptions_enums_and_errors_is_shown_as_text(page) -> None:
    _type_at_end(page, "bridge: toy24\nlayers:\n  - kind: ", "h")
    _offers(page, ["hostile"])
    assert page.locator("#completions li .detail").inner_text() == HTML  # the kind's description, as text
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    page.keyboard.type("    mode: ")
    _offers(page, ['"<script>document.title=\'pwned-enum\'</script>"', "calm"])
    page.keyboard.press("Enter")
    assert page.input_value("#spec").endswith("mode: \"<script>document.title='pwned-enum'</script>\"")
    page.keyboard.press("Enter")
    page.keyboard.type(f"    {json.dumps(HTML)}: 1")
    page.wait_for_selector("#gutter div.marked")
    assert "unknown key '<img src=x onerror=" in page.locator("#backdrop .msg").inner_text()
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: hostile\n")
    page.locator("#check").click()
    expect(page.locator("#error")).to_contain_text("refuses")
    assert HTML in page.locator("#error").inner_text()
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    page.wait_for_timeout(200)


def test_a_one_line_spec_naming_a_file_is_never_read(page, tmp_path: Path) -> None:
    secret = tmp_path / "outside.yaml"
    secret.write_text("bridge: toy24\nlayers: [{kind: budget, max_steps: 1}]\nsecret: hunter2 {\n")
    page.fill("#spec", str(secret))
    page.locator("#check").click()
    expect(page.locator("#error")).not_to_be_empty()
    assert "hunter2" not in page.locator("#error").inner_text()
    assert "mapping" in page.locator("#error").inner_text()  # read as YAML text: a plain string


def _state(page, state: str, text: str) -> None:
    expect(page.locator("#state")).to_have_attribute("data-state", state)
    expect(page.locator("#state")).to_contain_text(text)


def test_with_no_game_step_is_off_and_the_page_says_so(page) -> None:
    _state(page, "none", "No game yet: press Reset")
    assert page.locator("#step").is_disabled() and page.locator("#action").is_disabled()


def test_a_failed_reset_leaves_no_old_game_behind(page) -> None:
    page.fill("#spec", "bridge: brokentoy\n")
    page.locator("#start").click()
    _state(page, "playing", "Playing: no step yet")
    page.fill("#action", "combine i=0 j=1 op=add")
    page.locator("#step").click()
    _state(page, "playing", "Playing: step 1.")
    assert page.locator("button.tool").count() == 3 and page.locator("li.logline").count() == 1
    page.fill("#spec", "bridge: deadtoy\n")
    page.locator("#start").click()
    _state(page, "error", "Reset failed: no game is running")
    expect(page.locator("#error")).to_contain_text("cannot start the engine")
    # the old game's observation, log, tools and Step are gone: nothing suggests it still plays
    for gone in ("#seen", "#base", "#log", "#tools", "#verdict"):
        expect(page.locator(gone)).to_be_empty()
    assert page.locator("#step").is_disabled() and page.locator("#action").is_disabled()
    assert page.locator("#pending").is_hidden()


def test_game_over_is_stated_and_step_is_off(page) -> None:
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 2\n")
    page.locator("#start").click()
    _state(page, "playing", "Playing")
    for _ in range(2):
        page.fill("#action", "combine i=0 j=1 op=add")
        page.locator("#step").click()
    _state(page, "over", "Game over after 2 steps: not solved")
    assert page.locator("#step").is_disabled() and page.locator("button.tool").first.is_disabled()
    page.locator("#start").click()  # Reset plays again
    _state(page, "playing", "Playing: no step yet")
    assert page.locator("#step").is_enabled() and page.locator("li.logline").count() == 0


def test_a_step_error_keeps_the_game_and_says_so(page) -> None:
    page.fill("#spec", "bridge: brokentoy\n")
    page.locator("#start").click()
    page.fill("#action", "stop")
    page.locator("#step").click()
    _state(page, "playing", "The last action failed")
    assert page.locator("#step").is_enabled()


def test_spec_and_task_edits_say_they_apply_after_reset(page) -> None:
    page.fill("#spec", "bridge: toy24\n")
    page.locator("#start").click()
    _state(page, "playing", "edits apply when you press Reset")
    assert page.locator("#pending").is_hidden()
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps: 2\n")
    expect(page.locator("#pending")).to_be_visible()
    expect(page.locator("#pending")).to_contain_text("the edits apply when you press Reset")
    page.fill("#spec", "bridge: toy24\n")  # back as it was: nothing waits
    expect(page.locator("#pending")).to_be_hidden()
    page.fill("#task", "medium/1,2,6,6")
    expect(page.locator("#pending")).to_be_visible()
    page.locator("#start").click()
    _state(page, "playing", "Playing: no step yet")
    expect(page.locator("#pending")).to_be_hidden()


def test_a_tool_button_fills_a_form_from_its_schema_and_steps_a_well_formed_action(page) -> None:
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: contract\n    code: |\n      def filter_action(action, state, memo):\n"
                       "          if action.args.get('op') == 'div':\n              return Block(reason='no division')\n"
                       "  - kind: budget\n    max_steps: 2\n")
    page.fill("#task", "medium/1,2,6,6")
    page.locator("#start").click()
    page.locator("button.tool", has_text="combine").click()
    form = page.locator("#toolform form[data-tool='combine']")
    expect(form.locator(".pname")).to_have_text(["i *", "j *", "op *"])  # one input each, required marked
    i = form.locator("input[name=i]")
    assert (i.get_attribute("type"), i.get_attribute("min"), i.get_attribute("max")) == ("number", "0", "3")
    assert i.get_attribute("required") is not None
    assert form.locator("select[name=op] option").all_inner_texts() == ["add", "sub", "mul", "div"]
    form.locator("button[type=submit]").click()  # required fields empty: the browser does not send it
    page.wait_for_timeout(100)
    assert page.locator("li.logline").count() == 0
    i.fill("0")
    form.locator("input[name=j]").fill("1")
    form.locator("select[name=op]").select_option(label="div")
    form.locator("button[type=submit]").click()
    first = page.locator("li.logline").first
    expect(first.locator("code.act")).to_have_text('combine {"i": 0, "j": 1, "op": "div"}')
    expect(first.locator(".badge.blocked")).to_have_text("contract: blocked “no division”")
    assert '"layer"' not in first.inner_text()  # the effect in words, not JSON
    form.locator("select[name=op]").select_option(label="add")
    form.locator("button[type=submit]").click()
    last = page.locator("li.logline").nth(1)
    expect(last.locator(".tag.ended")).to_have_text(["truncated"])
    expect(page.locator("#verdict p")).to_have_text("failure · score 0")
    expect(page.locator("#verdict table.verdict-metrics th")).to_have_text(["steps", "numbers"])
    assert page.locator("#verdict").inner_text().count("{") == 0
    assert form.locator("button[type=submit]").is_disabled()  # game over: the form sends nothing


def test_a_tool_without_parameters_is_one_button(page) -> None:
    page.fill("#spec", "bridge: toy24\n")
    page.locator("#start").click()
    page.locator("button.tool", has_text="stop").click()
    form = page.locator("#toolform form[data-tool='stop']")
    assert form.locator("input, select").count() == 0
    form.locator("button[type=submit]").click()
    expect(page.locator("li.logline code.act")).to_have_text("stop {}")
    expect(page.locator("#state")).to_have_attribute("data-state", "over")


def test_yaml_and_bridge_problems_are_marked_on_their_line_while_typing(page) -> None:
    page.fill("#spec", "bridge: toy24\nlayers:\n  - kind: budget\n    max_steps 3\n  - kind: budget\n")
    expect(page.locator("#gutter div.marked")).to_have_text(["4"])  # the key without ':', not the next line
    page.fill("#spec", "bridge: nosuchbridge\nlayers: []\n")  # no Check pressed
    expect(page.locator("#gutter div.marked")).to_have_text(["1"])
    assert "Unknown bridge 'nosuchbridge'" in page.locator("#backdrop .msg").inner_text()
