"""WebShop's data files, read in WebShop's own format, and its goals.

``config.data`` is a folder holding the original files (the 1k or the full release works
as is): ``items_shuffle*.json`` (the scraped products), ``items_ins_v2*.json`` (per-ASIN
attributes and synthetic instructions), ``items_human_ins.json`` (per-ASIN human
instructions with their attributes and options) and optionally ``reviews.json``.
Products are normalised as WebShop's loader does (Title, Description, BulletPoints,
pricing → Price, customization_options → lower-cased options, Attributes). Goals are the
human instructions (or the synthetic ones); each gets a price cap sampled from the four
price steps above the product's price, as WebShop does, but from a seeded generator so a
goal set is the same in every run; goals are then shuffled with WebShop's seed (233).
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs
from envh import errors

PRICE_STEPS = [10.0 * i for i in range(1, 100)]
GOAL_SHUFFLE_SEED = 233
# WebShop's goal index ranges (test / eval / train), clipped to the goals present.
DEFAULT_SPLITS: dict[str, tuple[int, int | None]] = {"test": (0, 500), "eval": (500, 1500), "train": (1500, None)}


@attrs.frozen(kw_only=True)
class Catalogue:
    """Products by ASIN (in file order), their sampled prices and the goals."""

    products: dict[str, dict[str, Any]]
    prices: dict[str, float]
    goals: list[dict[str, Any]]


def _one(folder: str, pattern: str, *, required: bool = True) -> str | None:
    hits = sorted(glob.glob(os.path.join(folder, pattern)))
    if not hits:
        if required:
            raise errors.EnvError(f"WebShop data: no {pattern} in {folder}. Point config.data at a folder "
                                  "with WebShop's items_shuffle*.json, items_ins_v2*.json and items_human_ins.json.")
        return None
    return hits[0]


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise errors.EnvError(f"WebShop data: cannot read {path}: {exc}") from exc


def parse_pricing(pricing: Any) -> tuple[list[float], str]:
    """WebShop's price parsing: '$12.99' → [12.99]; '$10.00 - $20.00' → [10.0, 20.0]."""
    if not pricing:
        return [100.0], "$100.0"
    values = []
    for part in str(pricing).split("$")[1:]:
        try:
            values.append(float(Decimal(re.sub(r"[^\d.]", "", part))))
        except InvalidOperation:
            continue
    if not values:
        return [100.0], "$100.0"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def normalise(raw: dict[str, Any], attributes: dict[str, Any], reviews: dict[str, Any]) -> dict[str, Any]:
    """One product in the shape WebShop's engine works with."""
    asin = raw["asin"]
    pricing, price_tag = parse_pricing(raw.get("pricing"))
    options: dict[str, list[str]] = {}
    for name, contents in (raw.get("customization_options") or {}).items():
        if contents:
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
    small = raw.get("small_description") or []
    review = reviews.get(asin, {})
    return {
        "asin": asin, "category": raw.get("category", ""), "query": str(raw.get("query", "")).lower().strip(),
        "name": raw.get("name", ""), "product_category": raw.get("product_category", ""),
        "Title": raw.get("name", ""), "Description": raw.get("full_description", "") or "",
        "BulletPoints": small if isinstance(small, list) else [small],
        "Reviews": [{"title": r.get("title", ""), "score": r.get("score", r.get("stars", "")),
                     "body": r.get("body", r.get("review", ""))} for r in review.get("reviews", [])],
        "Rating": review.get("average_rating", "N.A."),
        "pricing": pricing, "Price": price_tag, "options": options,
        "Attributes": (attributes.get(asin) or {}).get("attributes") or ["DUMMY_ATTR"],
    }


def load(folder: str, *, human_goals: bool = True, num_products: int | None = None) -> Catalogue:
    """Read a WebShop data folder into a catalogue with prices and goals."""
    if not os.path.isdir(folder):
        raise errors.EnvError(f"WebShop data folder {folder!r} does not exist.")
    items = _read(str(_one(folder, "items_shuffle*.json")))
    attributes = _read(str(_one(folder, "items_ins_v2*.json")))
    human = _read(str(_one(folder, "items_human_ins*.json"))) if human_goals else {}
    review_file = _one(folder, "reviews*.json", required=False)
    reviews = {r["asin"]: r for r in _read(review_file)} if review_file else {}
    if not isinstance(items, list) or not isinstance(attributes, dict):
        raise errors.EnvError(f"WebShop data in {folder}: items_shuffle must be a list, items_ins_v2 an object.")
    if num_products is not None:
        items = items[:num_products]
    rng = random.Random(GOAL_SHUFFLE_SEED)
    products: dict[str, dict[str, Any]] = {}
    for raw in items:
        asin = str(raw.get("asin", ""))
        if asin == "nan" or not asin or len(asin) > 10 or asin in products:
            continue
        products[asin] = normalise(raw, attributes, reviews)
    prices = {}
    for asin, p in products.items():
        lo_hi = p["pricing"]
        prices[asin] = lo_hi[0] if len(lo_hi) == 1 else round(rng.uniform(*lo_hi[:2]), 2)
    goals = _human_goals(products, prices, human, rng) if human_goals else _synthetic_goals(
        products, prices, attributes, rng)
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
    return Catalogue(products=products, prices=prices, goals=goals)


def _price_cap(price: float, rng: random.Random) -> tuple[float, str]:
    steps = [p for p in PRICE_STEPS if p > price][:4]
    if len(steps) >= 2:
        upper = sorted(rng.sample(steps, 2))[1]
        return upper, f", and price lower than {upper:.2f} dollars"
    return 1_000_000.0, ""


def _goal(p: dict[str, Any], text: str, attributes: list[str], options: Any, cap: tuple[float, str]) -> dict[str, Any]:
    return {"asin": p["asin"], "category": p["category"], "query": p["query"], "name": p["name"],
            "product_category": p["product_category"], "instruction_text": text.strip(".") + cap[1],
            "attributes": list(attributes), "price_upper": cap[0], "goal_options": options}


def _human_goals(products: dict[str, dict[str, Any]], prices: dict[str, float], human: dict[str, Any],
                 rng: random.Random) -> list[dict[str, Any]]:
    goals = []
    for asin, p in products.items():
        for ins in human.get(asin, []):
            if ins.get("instruction_attributes"):
                goals.append(_goal(p, ins["instruction"], ins["instruction_attributes"],
                                   list(ins.get("instruction_options") or []), _price_cap(prices[asin], rng)))
    return goals


def _synthetic_goals(products: dict[str, dict[str, Any]], prices: dict[str, float], attributes: dict[str, Any],
                     rng: random.Random) -> list[dict[str, Any]]:
    import itertools

    goals = []
    for asin, p in products.items():
        meta = attributes.get(asin) or {}
        if not meta.get("instruction") or not meta.get("instruction_attributes"):
            continue
        cap = _price_cap(prices[asin], rng)
        names = sorted(p["options"])
        for combo in itertools.product(*(p["options"][n] for n in names)):
            chosen = dict(zip(names, combo, strict=True))
            suffix = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            text = meta["instruction"] + (f" with {suffix}" if suffix else "")
            goal = _goal(p, text, meta["instruction_attributes"], chosen, (cap[0], ""))
            goal["instruction_text"] = text + cap[1]
            goal["name"] = p["Title"]
            goals.append(goal)
    return goals


def split_indices(n_goals: int, split: str, ranges: dict[str, Any] | None = None) -> range:
    """Goal indices of a split (WebShop's index ranges, or ``ranges`` from the config)."""
    table = {k: tuple(v) for k, v in (ranges or DEFAULT_SPLITS).items()}
    if split not in table:
        raise errors.UnknownNameError("webshop split", split, list(table))
    lo, hi = table[split]
    lo = min(int(lo), n_goals)
    return range(lo, n_goals if hi is None else min(int(hi), n_goals))
