"""Trajectory pages at any size, in Chromium: steps a page at a time, prompts fetched when
opened as the messages new since the previous turn (whole on request, as recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envh.rollout.trajectory import request_messages
from envh_ui.app import create_app
from envh_ui.steps import STEPS
from playwright.sync_api import expect
from ui_long_episodes import SYSTEM, episode, write

TOKEN = "tr4j-t0k3n"
CHAT_TURNS, LONG_STEPS = 200, 5000


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    made = [episode(CHAT_TURNS, key="chat"), episode(LONG_STEPS, window=4, key="toy24-long")]
    return write(tmp_path_factory.mktemp("long"), made), made  # seq 1: chat, seq 2: the long one


@pytest.fixture(scope="module")
def server(episodes, serve):
    with serve(create_app([episodes[0]], token=TOKEN), named=True) as url:
        yield url


@pytest.fixture
def page(browser, server, watch):
    context = browser.new_context()
    context.set_default_timeout(30_000)
    p = context.new_page()
    problems = watch(p)
    p.goto(f"{server}/?token={TOKEN}")
    yield p
    context.close()
    assert problems == []


def test_a_5000_step_episode_opens_a_page_of_steps(page, server) -> None:
    page.goto(f"{server}/traj/0/2")
    steps = page.locator("#steps tr.step")
    expect(steps.first).to_be_visible()
    assert "Numbers after step 0:" in steps.first.locator("pre.seen").inner_text()
    assert steps.count() == STEPS <= 100  # the DOM holds one page, not 5,000 rows
    assert page.locator("pre.prompt").all_text_contents() == [""] * STEPS  # no prompt is on the page
    assert "steps 0–99 of 5000 · page 1 of 50" in page.locator(".steps-pager").first.inner_text()
    page.locator(".steps-next").first.click()
    expect(page.locator(".steps-pager").first).to_contain_text("steps 100–199 of 5000")
    assert steps.first.locator("td").first.inner_text() == "100"
    page.locator(".steps-pager input[name=step]").first.fill("4999")  # a jump to a step's page
    page.locator(".steps-pager button").first.click()
    expect(page.locator(".steps-pager").first).to_contain_text("steps 4900–4999 of 5000 · page 50 of 50")
    assert steps.count() == STEPS and steps.last.locator("td").first.inner_text() == "4999"
    assert page.locator(".steps-next").count() == 0


def test_a_200_turn_chat_page_is_small(page, server) -> None:
    response = page.goto(f"{server}/traj/0/1")
    assert response is not None and response.status == 200
    body = response.body()
    assert len(body) < 300_000, len(body)  # whole prompts on the page: 13 MB
    assert SYSTEM["content"][:40].encode() not in body
    assert page.locator("#steps tr.step").count() == min(CHAT_TURNS, STEPS)


def _open_prompt(page, step: int):
    row = page.locator("#steps tr.step").nth(step % STEPS)
    row.locator("details > summary").first.click()  # the model turn
    prompt = row.locator("details.prompt")
    prompt.locator("summary").click()
    expect(prompt).to_have_attribute("data-loaded", "new")
    return prompt


def test_prompts_load_on_demand_as_the_new_messages_and_whole_as_recorded(page, server, episodes) -> None:
    chat = episodes[1][0]
    recorded = request_messages(chat.steps)
    page.goto(f"{server}/traj/0/1?step=150")
    assert page.locator("#steps tr.step").first.locator("td").first.inner_text() == "100"
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/prompt/" in r.url else None)
    prompt = _open_prompt(page, 150)
    assert asked == [f"{server}/api/traj/0/1/prompt/150"]  # fetched when opened, not before
    messages = recorded[150]
    assert messages is not None and len(messages) == 1 + 2 * 150 + 1
    # turn 150 resends turn 149's prompt, adds that turn's reply and the new observation
    assert "302 messages, 2 new since step 149's prompt" in prompt.locator("summary").inner_text()
    assert prompt.locator(".shared").inner_text() == "messages 1–300 are step 149's prompt; then:"
    assert prompt.locator("pre.prompt").text_content() == json.dumps(messages[300:], indent=1)
    prompt.locator("button.whole").click()
    expect(prompt).to_have_attribute("data-loaded", "whole")
    assert prompt.locator("pre.prompt").text_content() == json.dumps(messages, indent=1)  # as the page showed it
    assert prompt.locator("button.whole").is_hidden()
    page.goto(f"{server}/traj/0/1")
    first = _open_prompt(page, 0)  # the first turn shares nothing: all of it, no "whole" button
    assert first.locator("pre.prompt").text_content() == json.dumps(recorded[0], indent=1)
    assert first.locator("button.whole").is_hidden()


def test_a_sliding_window_prompt_shares_only_its_system_message(page, server, episodes) -> None:
    recorded = request_messages(episodes[1][1].steps[:4001])
    page.goto(f"{server}/traj/0/2?step=4000")
    prompt = _open_prompt(page, 4000)
    assert prompt.locator(".shared").inner_text() == "messages 1–1 are step 3999's prompt; then:"
    assert prompt.locator("pre.prompt").text_content() == json.dumps(recorded[4000][1:], indent=1)


def test_prompt_requests_for_no_such_step_are_not_found(page, server) -> None:
    for path in ("/api/traj/0/1/prompt/200", "/api/traj/0/1/prompt/99999999999999999999999",
                 "/api/traj/0/9/prompt/0", "/api/traj/3/1/prompt/0"):
        status = page.evaluate("async u => (await fetch(u)).status", server + path)
        assert status == 404, path
