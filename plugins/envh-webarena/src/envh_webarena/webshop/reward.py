"""WebShop's reward: how well a purchase matches a goal, in [0, 1]; success is a score of 1.

The rules are those of the released WebShop (``princeton-nlp/WebShop``, branch ``master``,
``web_agent_site/engine/goal.py`` at commit ``d149d0d7a5219c1ea4e60c80f2364a15eb324d7b``,
with ``normalize.py``'s colour list and the ``thefuzz==0.19.0`` its requirements pin):

* **type** r_type: 1 when the product's query or category (two shared ``›`` levels) or
  title (> 20 % of the goal's title nouns) matches; 0.5 when none does; 0.1 when under
  10 % of the title nouns match; 0 when none do;
* **attributes**: a goal attribute counts when a product attribute fuzzy-matches it
  (token-set ratio > 85) or it appears in the title, features or description;
* **options**: a goal option counts when some chosen option fuzzy-matches it (token-set
  ratio > 85, colours normalised first) — the product's text plays no part, and sizes
  match fuzzily too ("large" matches "x-large"), as in ``master``'s ``get_option_reward``;
* **price**: 1 when the price is within the goal's cap;

score = r_type × (attributes + options + price) / (#goal attributes + #goal options + 1).

Title nouns come from spaCy's ``en_core_web_sm`` (the model WebShop's ``setup.sh`` installs)
when it is installed; without it, the content words of the title stand in for them (alphabetic,
not stop words, colour and size words or common adjectives: words spaCy would not tag as
nouns), and :func:`type_score_source` says so (the score then is not WebShop's own wherever
the two noun lists differ). Fuzzy matching is thefuzz 0.19.0's
``token_set_ratio`` as WebShop runs it: its own preprocessing and the standard library's
``difflib.SequenceMatcher`` (WebShop's requirements do not install python-Levenshtein).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

# web_agent_site/engine/normalize.py's COLOR_SET, in its order (the first hit wins)
COLORS = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)
UPSTREAM = "princeton-nlp/WebShop master@d149d0d7a5219c1ea4e60c80f2364a15eb324d7b"
SPACY_MODEL = "en_core_web_sm"
_STOP = frozenset("""a an and are as at be by for from has have in is it its of on or that the to with
without your you our this these those pack set pcs piece pieces inch inches oz ounce x""".split())
# colours of COLORS that also name things (a coffee maker, a steel bottle, a gold necklace):
# spaCy tags them NOUN, so the fallback keeps them; the other colours are adjectives there
_COLOUR_NOUNS = frozenset("""ash asphalt banana bronze camel camo caramel champagne charcoal cheetah chestnut
chocolate christmas coffee cognac copper coral cranberry cream crystal denim eggplant elephant espresso gold
granite grape graphite grass heather ivy lemon leopard lime merlot midnight mint mocha mushroom mustard peach
pewter plum rainbow rose rust sand sapphire seashell silver skull slate steel stone sunflower tiger walnut
wheat wine""".split())
# words of product titles that are not nouns (sizes, common adjectives, number words): without
# spaCy's tagger they would count as shared nouns, so a wrong product type ("black large
# umbrella" for a "black leather large wallet") would get full type credit
_NOT_NOUNS = (frozenset(COLORS) - _COLOUR_NOUNS) | frozenset("""small medium large xl xxl xxxl xs xxs big little
tiny huge extra regular petite tall short long wide narrow mini new best premium high low soft hard heavy
durable portable professional organic adjustable comfortable cute classic vintage modern casual lightweight
breathable slim thin thick ultra super real pure fresh hot cold warm cool dry wet clean smart digital electric
electronic automatic universal compatible original genuine full half double single multi non anti one two
three four five six seven eight nine ten twelve""".split())
_ADJECTIVE_ENDINGS = ("less", "ous", "proof")  # wireless, stainless, luxurious, waterproof
# thefuzz 0.19.0's utils.asciidammit drops the characters 128-255 (only those)
_LATIN1 = {c: None for c in range(128, 256)}
_NON_WORD = re.compile(r"(?ui)\W")

OptionValue = str | tuple[str, str]  # a chosen or goal option: a value, or (name, value) for a synthetic goal


def normalize_color(value: OptionValue) -> OptionValue:
    """The first colour of WebShop's list found in ``value`` (a substring of a string, an
    item of a tuple), else ``value`` unchanged (``normalize.py:normalize_color``)."""
    for color in COLORS:
        if color in value:
            return color
    return value


def _full_process(value: object) -> str:
    """thefuzz 0.19.0's ``utils.full_process(s, force_ascii=True)`` (non-strings through ``str``)."""
    text = value.translate(_LATIN1) if isinstance(value, str) else str(value).translate(_LATIN1)
    return _NON_WORD.sub(" ", text).lower().strip()


def _ratio(a: str, b: str) -> int:
    """thefuzz 0.19.0's ``fuzz.ratio`` on processed strings (equal → 100, empty → 0)."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def token_set_ratio(a: object, b: object) -> int:
    """thefuzz 0.19.0's ``fuzz.token_set_ratio(a, b)`` (what WebShop's goal.py calls)."""
    if a is None or b is None:  # utils.check_for_none
        return 0
    p1, p2 = _full_process(a), _full_process(b)
    if not p1 or not p2:
        return 0
    t1, t2 = set(p1.split()), set(p2.split())
    sect = " ".join(sorted(t1 & t2))
    one = (sect + " " + " ".join(sorted(t1 - t2))).strip()
    two = (sect + " " + " ".join(sorted(t2 - t1))).strip()
    return max(_ratio(sect, one), _ratio(sect, two), _ratio(one, two))


def fuzzy(a: object, b: object) -> float:
    return float(token_set_ratio(a, b))


@functools.cache
def _spacy_nlp() -> Callable[[str], Any] | None:
    try:
        import spacy

        return spacy.load(SPACY_MODEL)  # type: ignore[no-any-return]
    except (ImportError, OSError):
        return None


def type_score_source() -> str:
    """Where the type score's title nouns come from: ``spacy:en_core_web_sm`` (as WebShop),
    or a sentence saying a fallback stands in and the type score is not WebShop's own."""
    if _spacy_nlp() is not None:
        return f"spacy:{SPACY_MODEL}"
    return (f"fallback: spaCy's {SPACY_MODEL} is not installed, so the title's content words stand in for "
            "its nouns; the type score (r_type) is not WebShop's own where the two differ")


@functools.cache
def noun_extractor() -> Callable[[str], list[str]]:
    nlp = _spacy_nlp()
    if nlp is not None:
        return lambda text: [t.text.lower() for t in nlp(text) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]
    return _fallback_nouns


def _fallback_nouns(text: str) -> list[str]:
    """The title's words that may be nouns: alphabetic, two letters or more, not stop words,
    not in :data:`_NOT_NOUNS`, not past participles or adjectives by their endings."""
    return [w for w in re.findall(r"[a-z]+", text.lower())
            if len(w) > 1 and w not in _STOP and w not in _NOT_NOUNS and not _adjective_like(w)]


def _adjective_like(word: str) -> bool:
    if len(word) > 5 and word.endswith(_ADJECTIVE_ENDINGS):
        return True
    # listed, insulated, padded (not bed, seabed, seed, shed)
    return len(word) > 5 and word.endswith("ed") and not word.endswith(("eed", "bed", "shed"))


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
    """Goal attributes matched (``get_attribute_reward``): fuzzily by a product attribute, or
    found in the title, features or description."""
    count = 0
    for wanted in goal["attributes"]:
        if any(token_set_ratio(have, wanted) > 85 for have in product["Attributes"]) or _in_text(wanted, product):
            count += 1
    return count


def goal_option_values(goal: dict[str, Any]) -> list[OptionValue]:
    """The goal's options as ``get_reward`` passes them: a human goal's list as is, a
    synthetic goal's ``{name: value}`` as ``(name, value)`` pairs (the name then takes part
    in the fuzzy match, as it does in WebShop)."""
    options = goal["goal_options"]
    if isinstance(options, dict):
        return [(str(k), str(v)) for k, v in options.items()]
    return list(options)


def option_matches(goal_options: Sequence[OptionValue], chosen: dict[str, str]) -> int:
    """Goal options matched by a chosen option (``get_option_reward``): each goal option
    counts once when some chosen value fuzzy-matches it (> 85) after colour normalisation."""
    bought = [normalize_color(v) for v in chosen.values()]
    count = 0
    for wanted in (normalize_color(o) for o in goal_options):
        if any(token_set_ratio(have, wanted) > 85 for have in bought):
            count += 1
    return count


def score(product: dict[str, Any], goal: dict[str, Any], price: float, chosen: dict[str, str]) -> dict[str, Any]:
    """The reward of buying ``product`` at ``price`` with options ``chosen`` for ``goal``,
    with its parts (``r_type``, ``r_att``, ``r_option``, ``r_price``) and ``type_score``
    (:func:`type_score_source`)."""
    goal_options = goal_option_values(goal)
    kind = type_reward(product, goal)
    # WebShop: None when the cap is not positive (never so in its goals, whose caps are a
    # price step or 1e6); None would fail its sum, here it counts as a miss
    r_price = price <= goal["price_upper"] if goal["price_upper"] > 0 else False
    n_att = attribute_matches(product, goal)
    n_opt = option_matches(goal_options, chosen)
    denominator = len(goal["attributes"]) + len(goal_options) + 1
    total = (n_att + n_opt + float(r_price)) / denominator * kind["r_type"]
    return {"reward": total, "r_type": kind["r_type"], "r_att": n_att / max(1, len(goal["attributes"])),
            "r_option": (n_opt / len(goal_options)) if goal_options else None, "r_price": bool(r_price),
            "query_match": kind["query_match"], "category_match": kind["category_match"],
            "title_score": kind["title_score"], "type_score": type_score_source()}
