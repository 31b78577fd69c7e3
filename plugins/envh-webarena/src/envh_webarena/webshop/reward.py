"""WebShop's reward: how well a purchase matches a goal, in [0, 1]; success is a score of 1.

The rules are the benchmark's (``web_agent_site/engine/goal.py``):

* **type** r_type: 1 when the product's query or category (two shared ``›`` levels) or
  title (> 20 % of the goal's title nouns) matches; 0.5 when none does; 0.1 when under
  10 % of the title nouns match; 0 when none do;
* **attributes**: a goal attribute counts when a product attribute fuzzy-matches it
  (token-set ratio > 85) or it appears in the title, features or description;
* **options**: each chosen option counts when it matches a goal option (exactly for
  ``size``, fuzzily otherwise, colours normalised) or appears in the product's text;
* **price**: 1 when the price is within the goal's cap;

score = r_type × (attributes + options + price) / (#goal attributes + #goal options + 1).

Title nouns come from spaCy when ``en_core_web_lg`` or ``en_core_web_sm`` is installed (as
in WebShop); without a spaCy model, the content words of the title (alphabetic, not stop
words) stand in for them. Fuzzy matching is rapidfuzz's ``token_set_ratio`` with
thefuzz's preprocessing (lower-case, non-alphanumerics to spaces), which is what WebShop's
thefuzz calls.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

EXACT_MATCH_OPTIONS = ("size",)
COLORS = (
    "alabaster", "apricot", "aqua", "ash", "azure", "beige", "black", "blue", "blush", "bronze", "brown",
    "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "chocolate", "coffee", "copper", "coral",
    "cream", "denim", "espresso", "fuchsia", "gold", "gray", "green", "grey", "indigo", "ivory", "khaki",
    "lavender", "lemon", "lilac", "lime", "magenta", "maroon", "mauve", "mint", "mocha", "multicolor",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pink", "plum", "purple", "red", "rose",
    "rust", "sand", "silver", "slate", "tan", "taupe", "teal", "turquoise", "violet", "white", "wine", "yellow",
)
_STOP = frozenset("""a an and are as at be by for from has have in is it its of on or that the to with
without your you our this these those pack set pcs piece pieces inch inches oz ounce x""".split())


def normalize_color(text: str) -> str:
    """The first known colour word inside ``text``, else ``text`` (WebShop's normalisation)."""
    for color in COLORS:
        if color in text:
            return color
    return text


def fuzzy(a: str, b: str) -> float:
    from rapidfuzz import fuzz, utils

    return float(fuzz.token_set_ratio(a, b, processor=utils.default_process))


@functools.cache
def noun_extractor() -> Callable[[str], list[str]]:
    try:
        import spacy

        for model in ("en_core_web_lg", "en_core_web_sm"):
            try:
                nlp = spacy.load(model)
            except OSError:
                continue
            return lambda text: [t.text.lower() for t in nlp(text) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]
    except ImportError:
        pass
    return lambda text: [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 1 and w not in _STOP]


def type_reward(product: dict[str, Any], goal: dict[str, Any]) -> dict[str, Any]:
    query_match = product["query"] == goal["query"]
    have = {x.strip() for x in str(product["product_category"]).split("›")}
    want = {x.strip() for x in str(goal["product_category"]).split("›")}
    category_match = len(have & want) >= 2
    nouns = noun_extractor()
    bought, desired = set(nouns(product["name"])), nouns(goal["name"])
    title_score = 0.2 if not desired else len(bought & set(desired)) / len(desired)
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {"r_type": r_type, "query_match": query_match, "category_match": category_match,
            "title_score": title_score}


def _in_text(value: str, product: dict[str, Any]) -> bool:
    return (value in product["Title"].lower() or value in " ".join(product["BulletPoints"]).lower()
            or value in product["Description"].lower())


def attribute_matches(product: dict[str, Any], goal: dict[str, Any]) -> int:
    count = 0
    for wanted in goal["attributes"]:
        if any(fuzzy(have, wanted) > 85 for have in product["Attributes"]) or _in_text(wanted, product):
            count += 1
    return count


def option_matches(product: dict[str, Any], goal_options: list[str], chosen: dict[str, str]) -> int:
    wanted = [normalize_color(o) for o in goal_options]
    count = 0
    for name, value in chosen.items():
        value = normalize_color(value)
        if name.lower() in EXACT_MATCH_OPTIONS:
            matched = value in wanted
        else:
            matched = any(fuzzy(w, value) > 85 for w in wanted)
        if matched or _in_text(value, product):
            count += 1
    return count


def score(product: dict[str, Any], goal: dict[str, Any], price: float, chosen: dict[str, str]) -> dict[str, Any]:
    """The reward of buying ``product`` at ``price`` with options ``chosen`` for ``goal``,
    with its parts (``r_type``, ``r_att``, ``r_option``, ``r_price``)."""
    goal_options = list(goal["goal_options"].values()) if isinstance(goal["goal_options"], dict) \
        else list(goal["goal_options"])
    kind = type_reward(product, goal)
    r_price = price <= goal["price_upper"] if goal["price_upper"] > 0 else False
    n_att = attribute_matches(product, goal)
    n_opt = option_matches(product, goal_options, chosen)
    denominator = len(goal["attributes"]) + len(goal_options) + 1
    # WebShop counts chosen options matched through the product's text too, so the raw
    # ratio can pass 1 when more options are chosen than the goal names: capped at 1.
    total = min(1.0, (n_att + n_opt + float(r_price)) / denominator * kind["r_type"])
    return {"reward": total, "r_type": kind["r_type"], "r_att": n_att / max(1, len(goal["attributes"])),
            "r_option": (n_opt / len(goal_options)) if goal_options else None, "r_price": bool(r_price),
            "query_match": kind["query_match"], "category_match": kind["category_match"],
            "title_score": kind["title_score"]}
