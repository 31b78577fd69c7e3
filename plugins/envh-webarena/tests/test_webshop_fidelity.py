"""WebShop's reward against the released WebShop's own grading, case by case.

Expected values come from ``princeton-nlp/WebShop`` branch ``master``,
``web_agent_site/engine/goal.py`` at commit d149d0d7a5219c1ea4e60c80f2364a15eb324d7b
(``get_reward``, ``get_attribute_reward``, ``get_option_reward``), with
``web_agent_site/engine/normalize.py``'s ``normalize_color`` and ``thefuzz==0.19.0`` (the
version WebShop's requirements.txt pins; pure-python ``difflib`` matcher, as
python-Levenshtein is not among its requirements). The ``OFFICIAL_TESTS`` pairs are the
assertions of WebShop's own ``tests/web-agent-site/engine/test_goal.py`` (commit
2d4be84777d35e1beb631c7697aaea3ce0c1305e). The other pairs were produced by running that
``goal.py`` code on the inputs below; each title here is the goal's own name and query, so
the type score is 1 whatever tags the nouns.
"""

from __future__ import annotations

import pytest
from envh_webarena.webshop import reward

SHIRT = {"query": "men's t-shirt", "product_category": "Clothing › Men › Shirts", "name": "Men's Cotton T-Shirt",
         "Title": "Men's Navy Blue Cotton T-Shirt, Large", "BulletPoints": ["Machine wash cold", "Short sleeve"],
         "Description": "A soft cotton tee.", "Attributes": ["machine wash", "cotton", "short sleeve"]}
PLAIN = {**SHIRT, "Title": "Men's Cotton T-Shirt"}  # no colour or size in its text


def goal(attributes: list[str], options: object, cap: float = 40.0) -> dict:
    return {"query": "men's t-shirt", "product_category": "Clothing › Men › Shirts", "name": "Men's Cotton T-Shirt",
            "attributes": attributes, "goal_options": options, "price_upper": cap}


# (product, goal, price, chosen options) -> goal.py:get_reward
CASES = {
    # a chosen colour the goal does not ask for counts nothing, named in the title or not: (3 + 0 + 1) / 5
    "black-goal-navy-blue-in-title": (SHIRT, goal(["machine wash", "cotton", "short sleeve"], ["black"]), 15.99,
                                      {"color": "navy blue"}, 0.8),
    # an extra chosen option named in the title does not make up for a missed attribute: (1 + 1 + 1) / 4
    "extra-option-in-title-no-credit": (SHIRT, goal(["machine wash", "slim fit"], ["navy blue"]), 15.99,
                                        {"color": "navy blue", "size": "large"}, 0.75),
    # master matches sizes fuzzily (token-set ratio of "large" and "x-large" is 100)
    "x-large-goal-large-bought": (PLAIN, goal(["cotton"], ["x-large"]), 15.99, {"size": "large"}, 1.0),
    "large-goal-x-large-bought": (PLAIN, goal(["cotton"], ["large"]), 15.99, {"size": "x-large"}, 1.0),
    # the product's text plays no part in the option score ("large" is in SHIRT's title)
    "small-goal-large-bought": (SHIRT, goal(["cotton"], ["small"]), 15.99, {"size": "large"}, 2 / 3),
    "no-options-chosen": (SHIRT, goal(["cotton"], ["navy blue", "large"]), 15.99, {}, 0.5),
    "goal-option-repeated": (SHIRT, goal(["cotton"], ["navy blue", "navy blue"]), 15.99, {"color": "navy blue"}, 1.0),
    # the first colour of normalize.py's list wins on each side: "dark" against "charcoal"
    "colour-normalised-both-sides": (SHIRT, goal(["cotton"], ["dark grey heather"]), 15.99,
                                     {"color": "charcoal dark"}, 2 / 3),
    "colour-case-sensitive": (SHIRT, goal(["cotton"], ["Black"]), 15.99, {"color": "jet black"}, 1.0),
    "over-budget": (SHIRT, goal(["cotton"], ["navy blue"], cap=10.0), 15.99, {"color": "navy blue"}, 2 / 3),
    "attribute-only-in-description": (SHIRT, goal(["soft cotton tee", "polyester"], []), 15.99, {}, 2 / 3),
    # a synthetic goal's {name: value} reaches get_option_reward as (name, value) pairs
    "synthetic-goal-dict": (SHIRT, goal(["cotton"], {"color": "navy blue", "size": "x-large"}), 15.99,
                            {"color": "navy blue", "size": "large"}, 1.0),
    "synthetic-goal-dict-colour-value": (SHIRT, goal(["cotton"], {"color": "black", "size": "small"}), 15.99,
                                         {"color": "navy blue", "size": "size small"}, 0.75),
    # thefuzz 0.19.0 drops the characters 128-255 before matching
    "latin1-dropped": (SHIRT, goal(["cotton"], ["café au lait"]), 15.99, {"color": "cafe au lait"}, 1.0),
}

# thefuzz 0.19.0 fuzz.token_set_ratio(a, b)
FUZZ = [("large", "x-large", 100), ("XL", "x-large", 22), ("essential oil", "essential oils", 96),
        ("machine wash", "machine washable", 86), ("sleeve sleeves", "sleevesleeves", 52),
        ("café au lait", "cafe au lait", 96), ("", "cotton", 0), ("--", "--", 0), ("pack of 6", "6 pack", 100),
        ("4 x-large", ("size", "x-large"), 88), (None, "cotton", 0), ("none", None, 0), (None, None, 0)]


@pytest.mark.parametrize("case", list(CASES))
def test_reward_equals_webshop_master(case: str) -> None:
    product, g, price, chosen, expected = CASES[case]
    assert reward.score(product, g, price, chosen)["reward"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("a", "b", "expected"), FUZZ)
def test_token_set_ratio_equals_thefuzz_0_19(a: object, b: object, expected: int) -> None:
    assert reward.token_set_ratio(a, b) == expected


def test_official_test_goal_options_and_attributes() -> None:
    # test_goal.py:test_get_option_reward (purchased, goal) -> matches
    for purchased, wanted, matches in [
        (["pack of 12", "grey", "XL"], ["grey", "XL", "pack of 12"], 3),
        (["pack of 12", "blue", "XL"], ["grey", "XL", "pack of 12"], 2),
        (["pack of 12", "powder snow", "XL"], ["cool powder snow", "XL", "pack of 12"], 3),
        (["goal 1", "goal 2"], [], 0),
        ([], ["goal 1", "goal 2"], 0),
    ]:
        assert reward.option_matches(wanted, {str(i): v for i, v in enumerate(purchased)}) == matches
    # test_goal.py:test_get_attribute_reward
    wanted = {"attributes": ["tea tree", "essential oils", "natural ingredients"]}
    empty = {"Title": "", "BulletPoints": [], "Description": ""}
    assert reward.attribute_matches({**empty, "Attributes": ["tea tree", "essential oil", "natural ingredients"]},
                                    wanted) == 3
    assert reward.attribute_matches({**empty, "Attributes": ["essential oil", "natural ingredients"]}, wanted) == 2
    assert reward.attribute_matches({"Attributes": [], "Title": "", "BulletPoints": [
        "This shampoo has essential oils and smells like lemons"],
        "Description": "Best shampoo on the market, made with natural ingredients"}, wanted) == 2
    assert reward.attribute_matches({"Attributes": ["tea bag", "earl gray", "lipton"],
                                     "Title": "English tea for breakfast",
                                     "BulletPoints": ["Soothing aroma", "Calming, great feeling"],
                                     "Description": "Best tea made by Lipton, great to pair with breakfast"},
                                    wanted) == 0


def test_official_test_goal_rewards() -> None:
    # test_goal.py:test_get_reward, its first three assertions (the fourth depends on spaCy's tags)
    name = "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White"
    g = {"query": "Query 1", "product_category": "a › b › c", "name": name,
         "attributes": ["tea tree", "essential oils", "natural ingredients"],
         "goal_options": {"color": "grey", "size": "XL"}, "price_upper": 40.00}
    bought = {"query": "Query 1", "product_category": "a › b › c", "name": name,
              "Attributes": ["tea tree", "essential oil", "natural ingredients"], "Title": "", "BulletPoints": [],
              "Description": ""}
    chosen = {"color": "grey", "size": "XL"}
    assert reward.score(bought, g, 35, chosen)["reward"] == 1
    # BulletPoints a string there: goal.py joins its characters, so only the description matches
    bought = {**bought, "Attributes": [], "BulletPoints": "This shampoo has essential oils and smells like lemons",
              "Description": "Best shampoo on the market, made with natural ingredients"}
    assert reward.score(bought, g, 35, chosen)["reward"] == pytest.approx(2 / 3, abs=1e-2)
    g = {**g, "goal_options": {"color": "grey", "size": "XL", "amount": "pack of 12"}}
    assert reward.score(bought, g, 35, chosen)["reward"] == pytest.approx(0.5714, abs=1e-2)


def test_official_test_goal_reward_with_type_variation() -> None:
    # test_goal.py:test_get_reward's fourth assertion: the titles' nouns share 2 of 12 with
    # spaCy (title score 0.17) and 2 of 11 with the fallback (0.18): r_type 0.5 either way
    g = {"query": "Query 1", "product_category": "a › b › c", "name": TYPE_PAIRS[2][0],
         "attributes": ["tea tree", "essential oils", "natural ingredients"],
         "goal_options": {"color": "grey", "size": "XL", "amount": "pack of 12"}, "price_upper": 40.00}
    bought = {"query": "Query 2", "product_category": "a › d › e", "name": TYPE_PAIRS[2][1], "Attributes": [],
              "Title": "", "BulletPoints": "This shampoo has essential oils and smells like lemons",
              "Description": "Best shampoo on the market, made with natural ingredients"}
    assert reward.score(bought, g, 35, {"color": "grey", "size": "XL"})["reward"] == pytest.approx(0.2857, abs=1e-2)


_CORD = "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home Theater System"
TYPE_PAIRS = [  # test_goal.py:test_get_type_reward: (goal name, purchased name, title_score, tolerance)
    ("adidas Unisex-Adult D.o.n. Issue 2 Basketball Shoe", "adidas Unisex-Adult D.o.n. Issue 2 Indoor Court Shoe",
     0.85, 1e-2),
    ("Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar Home Theater System "
     "Subwoofer", _CORD, 0.31, 1e-2),
    ("Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar", _CORD, 0.17, 1e-2),
    ("Rusticware 921ORB Kitchen and Bath Cabinet Knob", "Minkissy 2pcs Stainless Steel Eyebrow Tweezers Blackhead "
     "Acne Remover Portable Makeup Tweezers (Silver)", 0.0, 0.05),  # there: title_score < 0.05
]
# the r_type each pair gets in test_goal.py (its query and category do not match there)
TYPE_PAIR_R_TYPES = [1.0, 1.0, 0.5, 0.0]


@pytest.mark.xfail(reward.type_score_source().startswith("fallback"), strict=False, reason=(
    "spaCy's en_core_web_sm is not on the package index (only unofficial re-uploads), so the type score uses the "
    "declared fallback (test_fallback_type_score_is_declared) and may differ from WebShop's; with the model "
    "installed this runs as a plain equality check"))
@pytest.mark.parametrize(("desired", "bought", "expected", "tol"), TYPE_PAIRS)
def test_type_score_with_spacy_equals_webshop(desired: str, bought: str, expected: float, tol: float) -> None:
    product = {"query": "q2", "product_category": "a › d › e", "name": bought}
    g = {"query": "q1", "product_category": "a › b › c", "name": desired}
    assert reward.type_reward(product, g)["title_score"] == pytest.approx(expected, abs=tol)


@pytest.fixture
def fallback_nouns(monkeypatch: pytest.MonkeyPatch):
    """The type score as without spaCy's model (whether or not it is installed here)."""
    monkeypatch.setattr(reward, "_spacy_nlp", lambda: None)
    reward.noun_extractor.cache_clear()
    yield reward.noun_extractor()
    reward.noun_extractor.cache_clear()


def test_fallback_type_score_gives_webshop_s_r_type_on_its_pairs(fallback_nouns) -> None:
    """Without spaCy the fallback's title scores differ from spaCy's (0.83, 0.33, 0.18, 0.0
    where test_goal.py has 0.85, 0.31, 0.17, < 0.05), but each pair gets WebShop's r_type."""
    for (desired, bought, _, _), r_type in zip(TYPE_PAIRS, TYPE_PAIR_R_TYPES, strict=True):
        product = {"query": "q2", "product_category": "a › a › d", "name": bought}
        assert reward.type_reward(product, {"query": "q1", "product_category": "a › b › c", "name": desired})[
            "r_type"] == r_type, desired


def test_fallback_nouns_leave_out_colours_sizes_and_adjectives(fallback_nouns) -> None:
    """Shared colour, size and adjective words are no shared product type: an umbrella is
    no wallet. Colours that also name things (steel, coffee, gold) stay nouns."""
    wallet = {"query": "wallets", "product_category": "a › b › c", "name": "Black Leather Large Wallet"}
    umbrella = {"query": "umbrellas", "product_category": "a › d › e", "name": "Black Large Umbrella"}
    assert reward.type_reward(umbrella, wallet)["r_type"] == 0.0
    assert fallback_nouns("Black Leather Large Wallet") == ["leather", "wallet"]
    assert fallback_nouns("New Navy Blue Small Waterproof Wireless Padded Jacket") == ["jacket"]
    assert fallback_nouns("Stainless Steel Coffee Mug, Gold Bed Seed Shed") == [
        "steel", "coffee", "mug", "gold", "bed", "seed", "shed"]
    # the same product type in other colours and sizes still gets full credit
    other = {"query": "q", "product_category": "x › y › z", "name": "Brown Leather Small Wallet"}
    assert reward.type_reward(other, wallet)["r_type"] == 1.0


def test_fallback_type_score_is_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without spaCy's model the type score says it is a fallback, in the score's parts and
    in every episode's reset info; with it, it names the model."""
    from envh_webarena.webshop.bridge import grading_info

    for nlp, expected in [(None, "fallback"), (lambda text: [], "spacy:en_core_web_sm")]:
        monkeypatch.setattr(reward, "_spacy_nlp", lambda nlp=nlp: nlp)
        assert reward.type_score_source().startswith(expected)
        assert reward.score(PLAIN, goal(["cotton"], []), 1.0, {})["type_score"].startswith(expected)
        info = grading_info()
        assert info["type_score"].startswith(expected) and "d149d0d7a5219c1ea4e60c80f2364a15eb324d7b" in info["release"]
    monkeypatch.setattr(reward, "_spacy_nlp", lambda: None)
    assert "not WebShop's own" in reward.type_score_source()


def test_episode_info_says_how_it_is_graded(webshop_data) -> None:
    from envh import TaskRef
    from envh_webarena.webshop.bridge import make_webshop

    env = make_webshop(mode="text", data=webshop_data)
    try:
        info = env.reset(task=TaskRef(suite="webshop", split="test", instance_id="0")).info
    finally:
        env.close()
    assert info["grading"]["type_score"] == reward.type_score_source()
    assert "master" in info["grading"]["release"]


# -- the options a done URL names are graded in the product's own spelling ---------------
TEE = {"asin": "B1", "query": "men's t-shirt", "product_category": "Clothing › Men › Shirts",
       "name": "Men's Cotton T-Shirt", "Title": "Men's Cotton T-Shirt", "BulletPoints": [], "Description": "",
       "Attributes": ["cotton"], "Price": "$10.0", "Rating": "N.A.", "Reviews": [],
       "options": {"color": ["navy | black", "white", "red"], "size": ["small", "medium", "large"]}}
TEE_GOAL = {"asin": "B1", "query": "men's t-shirt", "product_category": "Clothing › Men › Shirts",
            "name": "Men's Cotton T-Shirt", "attributes": ["cotton"], "goal_options": ["navy", "medium"],
            "price_upper": 40.0, "instruction_text": "a navy cotton tee, medium"}


@pytest.fixture(scope="module")
def tee_site():
    from envh_webarena.webshop.data import Catalogue
    from envh_webarena.webshop.site import WebshopSite

    return WebshopSite(Catalogue(products={"B1": TEE}, prices={"B1": 10.0}, goals=[TEE_GOAL]))


def test_done_options_are_graded_in_the_product_s_spelling(tee_site) -> None:
    """goal.py:get_reward of the best purchase the pages allow ({color: "navy | black", size:
    medium}) is 0.75: normalize_color is case-sensitive, so "navy | black" becomes "black"
    and misses "navy". A typed URL's other spellings of the offered options grade the same
    (the product's spelling), and naming one option twice is no purchase."""
    from envh_webarena.webshop.site import Route

    def buy(options: dict[str, str]) -> dict:
        return tee_site.score(Route(kind="done", session="fixed_0", asin="B1", options=tuple(options.items())))

    assert buy({"color": "navy | black", "size": "medium"})["reward"] == pytest.approx(0.75)
    assert buy({"color": "NAVY | BLACK", "size": "medium"})["reward"] == pytest.approx(0.75)
    assert buy({"Color": "Navy | Black", "SIZE": "Medium"})["reward"] == pytest.approx(0.75)
    hedge = buy({"color": "NAVY | BLACK", "size": "small", "SIZE": "medium", "Size": "large"})
    assert hedge["reward"] == 0.0 and "name one option" in hedge["error"]
    from envh_webarena.webshop.site import MalformedOptions, canonical_options

    assert canonical_options(TEE, {"COLOR": "White", "size": "xxl", "fit": "large"}) == (("color", "white"),)
    with pytest.raises(MalformedOptions):
        canonical_options(TEE, {"size": "small", "Size": "small"})


def test_done_url_naming_an_option_twice_is_no_purchase(tee_site) -> None:
    """Over HTTP: the malformed done URL gets a 400 page, records nothing and shows no score;
    a well-formed one in other letter cases is recorded in the product's spelling."""
    import json
    import urllib.error
    import urllib.request
    from urllib.parse import quote

    from envh_webarena.httpserve import LocalServer
    from envh_webarena.webshop.site import handler_for

    def get(options: dict[str, str]) -> tuple[int, str]:
        url = f"{server.url}/done/fixed_0/B1/{quote(json.dumps(options), safe='')}"
        request = urllib.request.Request(url, headers={"Cookie": "envh_episode=tee-episode"})
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    server = LocalServer(handler_for(tee_site))
    tee_site.open_episode("tee-episode", "fixed_0")
    try:
        status, page = get({"color": "NAVY | BLACK", "size": "small", "SIZE": "medium", "Size": "large"})
        assert status == 400 and "Your score" not in page and not tee_site.purchases
        status, page = get({"COLOR": "NAVY | BLACK", "Size": "Medium"})
        assert status == 200 and '<span id="score">0.7500</span>' in page
        bought = tee_site.purchases[("fixed_0", "tee-episode")]
        assert bought.chosen == {"color": "navy | black", "size": "medium"}
    finally:
        tee_site.close_episode("tee-episode")
        tee_site.purchases.clear()
        server.close()
