"""WebArena task configs for the demo shop (``__SHOPPING__``) and forum (``__REDDIT__``),
one or more per evaluator kind, written exactly as WebArena's config files are."""

from __future__ import annotations

from typing import Any


def _task(task_id: int, sites: list[str], start_url: str, intent: str, ev: dict[str, Any],
          login: str | None = None) -> dict[str, Any]:
    return {"task_id": task_id, "sites": sites, "start_url": start_url, "intent": intent,
            "require_login": login is not None, "storage_state": login, "geolocation": None,
            "intent_template": intent, "instantiation_dict": {}, "require_reset": False,
            "eval": {"reference_answers": None, "reference_url": "", "program_html": [], "string_note": "",
                     "url_note": "GOLD in PRED", **ev}}


TASKS: list[dict[str, Any]] = [
    _task(1, ["shopping"], "__SHOPPING__/", "What is the price of the Blue Kettle? Answer with the number only.",
          {"eval_types": ["string_match"], "reference_answers": {"exact_match": "25.00"}}),
    _task(2, ["reddit"], "__REDDIT__/f/hiking", "Who wrote the post 'Best hiking trails near Pittsburgh'?",
          {"eval_types": ["string_match"], "reference_answers": {"must_include": ["alice_hikes"]}}),
    _task(3, ["reddit"], "__REDDIT__/f/books", "Which book does the 'Reading list 2024' post recommend first?",
          {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["Dune"]}}),
    _task(4, ["reddit"], "__REDDIT__/", "Open the books forum.",
          {"eval_types": ["url_match"], "reference_url": "__REDDIT__/f/books"}),
    _task(5, ["shopping"], "__SHOPPING__/", "Search the shop for kettle.",
          {"eval_types": ["url_match"], "reference_url": "__SHOPPING__/catalogsearch/result/?q=kettle"}),
    _task(6, ["reddit"], "__REDDIT__/submit",
          "Post in the books forum with the title 'Envh test' and the body 'hello from envh'.",
          {"eval_types": ["program_html"], "program_html": [
              {"url": "func:reddit_get_post_url('__last_url__')",
               "locator": "document.querySelector('.submission__body').outerText",
               "required_contents": {"must_include": ["hello from envh"]}},
              {"url": "__REDDIT__/f/books", "locator": "",
               "required_contents": {"must_include": ["Envh test |OR| envh-test"]}}]},
          login="./.auth/reddit_state.json"),
    _task(7, ["shopping"], "__SHOPPING__/product/red-mug.html", "Buy one Red Mug.",
          {"eval_types": ["program_html"], "program_html": [
              {"url": "__SHOPPING__/sales/order/history/",
               "locator": "document.querySelector('#my-orders-table').outerText",
               "required_contents": {"must_include": ["Red Mug"]}}]},
          login="./.auth/shopping_state.json"),
]
