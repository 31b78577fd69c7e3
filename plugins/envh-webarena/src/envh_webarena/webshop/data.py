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
import itertools
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


def _fail(path: str, where: str, field: str, expected: str, value: Any) -> errors.EnvError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return errors.EnvError(f"WebShop data {path}: {where}: {field} must be {expected}, got "
                           f"{type(value).__name__} {shown}. Fix the record or use WebShop's own files.")


class _Bad(Exception):
    """A field of the wrong type; ``load`` adds the file (by ``source``) and the record."""

    def __init__(self, field: str, expected: str, value: Any, *, source: str = "items", where: str = "") -> None:
        super().__init__(field)
        self.field, self.expected, self.value, self.source, self.where = field, expected, value, source, where

    def error(self, files: dict[str, str], where: str) -> errors.EnvError:
        return _fail(files[self.source], self.where or where, repr(self.field), self.expected, self.value)


def _text(record: dict[str, Any], field: str) -> str:
    """A text field; missing or null reads as empty."""
    value = record.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Bad(field, "a string", value)
    return value


def _strings(value: Any, field: str, **at: str) -> list[str]:
    """A list of strings; null reads as empty. ``at``: where, if not the current item."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(map(isinstance, value, itertools.repeat(str))):
        raise _Bad(field, "a list of strings", value, **at)
    return value


def _options(raw: dict[str, Any]) -> dict[str, list[str]]:
    """customization_options → {lower-cased name: [lower-cased values]}, as WebShop reads them."""
    named = raw.get("customization_options") or {}
    if not isinstance(named, dict):
        raise _Bad("customization_options", "an object mapping option names to lists", named)
    options: dict[str, list[str]] = {}
    for name, contents in named.items():
        if not contents:
            continue
        try:  # anything but a list of {"value": str} fails here, at no cost to good records
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        except (TypeError, KeyError, AttributeError):
            raise _Bad(f"customization_options.{name}", 'a list of objects with a string "value"', contents) from None
    return options


def _meta(attributes: dict[str, Any], asin: str) -> dict[str, Any]:
    """The product's items_ins_v2 entry, type-checked where the loader reads it."""
    meta = attributes.get(asin)
    if meta is None:
        return {}
    at = {"source": "attributes", "where": f"asin {asin}"}
    if not isinstance(meta, dict):
        raise _Bad("entry", 'an object such as {"attributes": [...]}', meta, **at)
    _strings(meta.get("attributes"), "attributes", **at)
    return meta


def normalise(raw: dict[str, Any], attributes: dict[str, Any], reviews: dict[str, Any]) -> dict[str, Any]:
    """One product in the shape WebShop's engine works with (``_Bad`` for a mistyped field)."""
    asin = raw["asin"]
    pricing = raw.get("pricing")
    if pricing is not None and not isinstance(pricing, str):
        raise _Bad("pricing", 'a string such as "$12.99" or "$10.00 - $20.00"', pricing)
    pricing, price_tag = parse_pricing(pricing)
    small = raw.get("small_description") or []
    name = _text(raw, "name")
    review = reviews.get(asin, {})
    return {
        "asin": asin, "category": _text(raw, "category"), "query": _text(raw, "query").lower().strip(),
        "name": name, "product_category": _text(raw, "product_category"),
        "Title": name, "Description": _text(raw, "full_description"),
        "BulletPoints": [small] if isinstance(small, str) else _strings(small, "small_description"),
        "Reviews": [{"title": r.get("title", ""), "score": r.get("score", r.get("stars", "")),
                     "body": r.get("body", r.get("review", ""))} for r in review.get("reviews") or []],
        "Rating": review.get("average_rating", "N.A."),
        "pricing": pricing, "Price": price_tag, "options": _options(raw),
        "Attributes": _meta(attributes, asin).get("attributes") or ["DUMMY_ATTR"],
    }


def _asin(raw: Any) -> str | None:
    """The record's ASIN, or None for rows WebShop skips ("nan" or NaN, longer than 10)."""
    if not isinstance(raw, dict):
        raise _Bad("record", "a product object", raw)
    asin = raw.get("asin")
    if isinstance(asin, float) and asin != asin:  # NaN, pandas' missing value in the scrape
        return None
    if not isinstance(asin, str):
        raise _Bad("asin", "a string", asin)
    return None if asin in ("", "nan") or len(asin) > 10 else asin


def _reviews(path: str) -> dict[str, Any]:
    records = _read(path)
    if not isinstance(records, list):
        raise _fail(path, "top level", "the file", "a list of review objects", records)
    by_asin = {}
    for i, r in enumerate(records):
        if not isinstance(r, dict) or not isinstance(r.get("asin"), str):
            raise _fail(path, f"record #{i}", "the record", 'an object with a string "asin"', r)
        entries = r.get("reviews")
        if entries is not None and not (isinstance(entries, list) and all(isinstance(e, dict) for e in entries)):
            raise _fail(path, f"record #{i} (asin {r['asin']})", "'reviews'", "a list of objects", entries)
        by_asin[r["asin"]] = r
    return by_asin


def load(folder: str, *, human_goals: bool = True, num_products: int | None = None) -> Catalogue:
    """Read a WebShop data folder into a catalogue with prices and goals.

    Records are type-checked as they are read (no extra pass): a malformed file raises
    ``EnvError`` naming the file, the record and the field.
    """
    if not os.path.isdir(folder):
        raise errors.EnvError(f"WebShop data folder {folder!r} does not exist.")
    files = {"items": str(_one(folder, "items_shuffle*.json")), "attributes": str(_one(folder, "items_ins_v2*.json")),
             "human": str(_one(folder, "items_human_ins*.json")) if human_goals else ""}
    items, attributes = _read(files["items"]), _read(files["attributes"])
    human = _read(files["human"]) if human_goals else {}
    for key, value, expected in (("items", items, "a list of product objects"),
                                 ("attributes", attributes, "an object mapping ASINs to attribute objects"),
                                 ("human", human, "an object mapping ASINs to lists of instructions")):
        if not isinstance(value, list if key == "items" else dict):
            raise _fail(files[key], "top level", "the file", expected, value)
    review_file = _one(folder, "reviews*.json", required=False)
    reviews = _reviews(review_file) if review_file else {}
    if num_products is not None:
        items = items[:num_products]
    rng = random.Random(GOAL_SHUFFLE_SEED)
    products: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(items):
        try:
            asin = _asin(raw)
            if asin is not None and asin not in products:
                products[asin] = normalise(raw, attributes, reviews)
        except _Bad as bad:
            asin = raw.get("asin") if isinstance(raw, dict) else None
            raise bad.error(files, f"record #{i}" + (f" (asin {asin})" if isinstance(asin, str) else "")) from None
    if not products:
        among = "" if num_products is None else f" among the first {num_products} records"
        raise errors.EnvError(f"WebShop data {files['items']}: no product with a usable asin{among}. Point "
                              "config.data at a folder with WebShop's items_shuffle*.json.")
    prices = {}
    for asin, p in products.items():
        lo_hi = p["pricing"]
        prices[asin] = lo_hi[0] if len(lo_hi) == 1 else round(rng.uniform(*lo_hi[:2]), 2)
    try:
        goals = _human_goals(products, prices, human, rng) if human_goals else _synthetic_goals(
            products, prices, attributes, rng)
    except _Bad as bad:
        raise bad.error(files, bad.where) from None
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
        entries = human.get(asin) or []
        if not isinstance(entries, list):
            raise _Bad("entry", "a list of instruction objects", entries, source="human", where=f"asin {asin}")
        for j, ins in enumerate(entries):
            at = {"source": "human", "where": f"asin {asin}, instruction #{j}"}
            if not isinstance(ins, dict):
                raise _Bad("instruction", "an object", ins, **at)
            wanted = _strings(ins.get("instruction_attributes"), "instruction_attributes", **at)
            if not wanted:  # WebShop drops instructions without attributes
                continue
            text = ins.get("instruction")
            if not isinstance(text, str):
                raise _Bad("instruction", "a string", text, **at)
            # a list, never a string: "large" would become the options l, a, r, g, e
            options = list(_strings(ins.get("instruction_options"), "instruction_options", **at))
            goals.append(_goal(p, text, wanted, options, _price_cap(prices[asin], rng)))
    return goals


def _synthetic_goals(products: dict[str, dict[str, Any]], prices: dict[str, float], attributes: dict[str, Any],
                     rng: random.Random) -> list[dict[str, Any]]:
    goals = []
    for asin, p in products.items():
        meta = attributes.get(asin) or {}  # an object: checked when the product was read
        if not meta.get("instruction") or not meta.get("instruction_attributes"):
            continue
        at = {"source": "attributes", "where": f"asin {asin}"}
        instruction = meta["instruction"]
        if not isinstance(instruction, str):
            raise _Bad("instruction", "a string", instruction, **at)
        wanted = _strings(meta["instruction_attributes"], "instruction_attributes", **at)
        cap = _price_cap(prices[asin], rng)
        names = sorted(p["options"])
        for combo in itertools.product(*(p["options"][n] for n in names)):
            chosen = dict(zip(names, combo, strict=True))
            suffix = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            text = instruction + (f" with {suffix}" if suffix else "")
            goal = _goal(p, text, wanted, chosen, (cap[0], ""))
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
