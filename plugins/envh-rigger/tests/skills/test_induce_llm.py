"""The LLM inducer and the OpenAI-compatible embedder against envh's local replay server
(real ``openai`` SDK, real HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from envh.testing_llm import error_reply, text_reply
from envh_rigger.skills import SkillError, cases_from, make_embedder, make_inducer, read_episodes
from envh_rigger.skills.llm import InvalidAnswer, parse_items

GOOD = {"items": [{"title": "Multiply before you add", "when_to_use": "When numbers must reach 24",
                   "content": "Products of the larger numbers get close to 24; sums rarely do."}]}


def _contrast(run: Path) -> Any:
    return next(c for c in cases_from(read_episodes(run)) if c.method == "contrast")


def test_valid_answer_becomes_items_with_provenance(toy_run: Path, replay: Any) -> None:
    replay.add(text_reply("```json\n" + json.dumps(GOOD) + "\n```"))
    inducer = make_inducer("llm:replay-model", base_url=replay.base_url)
    (item,) = inducer.induce(_contrast(toy_run))
    assert (item.title, item.when_to_use) == ("Multiply before you add", "When numbers must reach 24")
    prov = item.provenance[0]
    assert (prov.inducer, prov.method, len(prov.trajectories)) == ("llm:replay-model", "contrast", 2)
    (body,) = replay.chat_requests
    prompt = body["messages"][1]["content"]
    # the model saw both episodes, actions rendered as calls, and the rejections marked
    assert 'combine(i=0, j=1, op="mul")' in prompt and "## Failed episode (failure, 5 steps)" in prompt
    assert "[rejected: positions must be two different integers" in prompt
    assert body["response_format"] == {"type": "json_object"}
    assert inducer.stats["calls"] == 1 and inducer.stats["prompt_tokens"] > 0


def test_malformed_answer_is_fed_back_and_retried(toy_run: Path, replay: Any) -> None:
    replay.add(text_reply("Sure! Here are the skills: multiply first."),
                          text_reply(json.dumps({"items": [{"title": "x", "when_to_use": "y"}]})),
                          text_reply(json.dumps(GOOD)))
    inducer = make_inducer("llm:replay-model", base_url=replay.base_url, max_retries=2)
    assert len(inducer.induce(_contrast(toy_run))) == 1
    bodies = replay.chat_requests
    assert len(bodies) == 3 and inducer.stats["retries"] == 2
    assert "not valid JSON" in bodies[1]["messages"][-1]["content"]
    assert "items[0].content must be a non-empty string" in bodies[2]["messages"][-1]["content"]


def test_gives_up_after_bounded_retries(toy_run: Path, replay: Any) -> None:
    replay.add(*[text_reply("no json here")] * 2)
    inducer = make_inducer("llm:replay-model", base_url=replay.base_url, max_retries=1)
    assert inducer.induce(_contrast(toy_run)) == []
    assert inducer.stats["gave_up"] == 1 and len(replay.chat_requests) == 2


def test_endpoint_failure_is_a_clear_error(toy_run: Path, replay: Any) -> None:
    replay.add(*[error_reply(500)] * 3)
    inducer = make_inducer("llm:replay-model", base_url=replay.base_url)
    with pytest.raises(SkillError, match="Inducer model 'replay-model'"):
        inducer.induce(_contrast(toy_run))


@pytest.mark.parametrize(("answer", "problem"), [
    ("", "empty"), ("[1, 2]", '"items" list'), ('{"items": []}', "1 to 3 items"),
    ('{"items": [{"title": "a", "when_to_use": "b", "content": "c", "why": "d"}]}', "unknown key"),
    (json.dumps({"items": [{"title": "a" * 200, "when_to_use": "b", "content": "c"}]}), "keep it under 120"),
])
def test_validation_messages(answer: str, problem: str) -> None:
    with pytest.raises(InvalidAnswer, match=problem):
        parse_items(answer)


def test_openai_embedder_batches_and_normalises(replay: Any) -> None:
    emb = make_embedder("openai:replay-embed", base_url=replay.base_url, batch_size=2)
    vectors = emb.embed(["open the drawer", "open the drawer now", "divide twelve by three"])
    assert vectors.shape == (3, 32) and emb.name == "openai:replay-embed"
    assert abs(float(vectors[0] @ vectors[0]) - 1.0) < 1e-5
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    assert len(replay.requests) == 2  # 3 texts in batches of 2


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(SkillError, match="Choose one of: rule, llm:MODEL"):
        make_inducer("gpt")
    with pytest.raises(SkillError, match="Choose one of: minilm, openai:MODEL"):
        make_embedder("word2vec")
