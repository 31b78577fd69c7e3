"""url_match: WebArena's "GOLD in PRED" rule with the path matched by segments, not as a
substring. The upstream rule is copied below (web-arena-x/webarena,
evaluation_harness/evaluators.py, URLEvaluator, at 1a628d69fc8a9c3b78c66fb3ba1c04fef00ec0a4)
and the two must agree on every case but the substring holes, where ours is 0."""

from __future__ import annotations

import collections
import urllib.parse

import pytest
from envh_webarena.webarena.evaluators import url_match


def upstream(reference_url: str, page_url: str) -> float:
    """WebArena's URLEvaluator (evaluation_harness/evaluators.py), verbatim in substance."""
    def parse_url(url: str) -> tuple[str, dict[str, list[str]]]:
        parsed = urllib.parse.urlparse(url)
        return (parsed.netloc + parsed.path).rstrip("/"), urllib.parse.parse_qs(parsed.query)

    pred = page_url.rstrip("/")
    refs = [u.rstrip("/") for u in reference_url.split(" |OR| ")]
    ref_bases, ref_queries = [], collections.defaultdict(set)
    for u in refs:
        base, query = parse_url(u)
        ref_bases.append(base)
        for k, v in query.items():
            ref_queries[k].update(v)
    pred_base, pred_query = parse_url(pred)
    score = float(any(b in pred_base for b in ref_bases))
    for k, values in ref_queries.items():
        score *= float(any(v in pred_query.get(k, []) for v in values))
    return score


def ours(reference_url: str, page_url: str) -> float:
    return url_match({"task_id": 0, "eval": {"reference_url": reference_url, "url_note": "GOLD in PRED"}}, page_url)


ADMIN = "http://127.0.0.1:7780/admin/sales/order/view/order_id"
AGREE = [  # (reference, page, score): upstream-conformant cases, both rules agree
    (f"{ADMIN}/5", f"{ADMIN}/5", 1.0),
    (f"{ADMIN}/5", f"{ADMIN}/5/", 1.0),
    (f"{ADMIN}/5", f"{ADMIN}/5/key/0a1b2c3d/", 1.0),  # Magento's admin secret key after the path
    (f"{ADMIN}/5", f"{ADMIN}/6", 0.0),
    ("http://gl:8023/a11y/-/issues/?label_name%5B%5D=BUG", "http://gl:8023/a11y/-/issues/?label_name[]=BUG&sort=x", 1.0),
    ("http://gl:8023/a11y/-/issues/?label_name%5B%5D=BUG", "http://gl:8023/a11y/-/issues/?label_name[]=bug", 0.0),
    ("http://shop.test/catalog/items/?q=usb+wifi", "https://shop.test/catalog/items/?q=usb+wifi&sort=price", 1.0),
    ("http://f:9999/f/books |OR| http://f:9999/f/novels", "http://f:9999/f/novels/hot", 1.0),
    ("http://f:9999/f/books", "http://f:9999/f/books#comments", 1.0),
    ("http://f:9999", "http://f:9999/anything/at/all", 1.0),
    ("http://gl:8023/dashboard/todos", "http://gl:8023/dashboard/todos?sid=private", 1.0),
    ("http://gl:8023/dashboard/todos", "http://gl:8023/dashboard/issues", 0.0),
]
HOLES = [  # (reference, page): upstream says 1 by substring, the page is not the reference's
    (f"{ADMIN}/5", f"{ADMIN}/55"),
    (f"{ADMIN}/5", f"{ADMIN}/5000/"),
    ("http://f:9999/f/books", "http://f:9999/f/bookshelf"),
    ("http://shop:7780/checkout", "http://myshop:7780/checkout"),  # a host ending in the reference host
    ("http://f:9999/f/books", "http://127.0.0.1:5/redirect/f:9999/f/books"),  # the reference inside another host's path
]


@pytest.mark.parametrize(("ref", "page", "score"), AGREE)
def test_url_match_agrees_with_webarena_on_conformant_urls(ref: str, page: str, score: float) -> None:
    assert upstream(ref, page) == score
    assert ours(ref, page) == score


@pytest.mark.parametrize(("ref", "page"), HOLES)
def test_url_match_closes_the_substring_holes(ref: str, page: str) -> None:
    assert upstream(ref, page) == 1.0  # the hole is real upstream
    assert ours(ref, page) == 0.0


# WebArena compares netloc and path as raw text: no case folding, no default port dropped, no
# percent-decoding (each of these pages scores 0 there, so 0 here)
RAW_TEXT = [  # (reference, page, upstream score)
    ("http://Shop.Test/x", "http://shop.test/x", 0.0),
    ("http://shop.test/x", "http://SHOP.test/x", 0.0),
    ("http://shop.test:80/x", "http://shop.test/x", 0.0),
    ("https://shop.test:443/x", "https://shop.test/x", 0.0),
    ("http://shop.test/x", "http://shop.test:80/x", 0.0),
    ("http://shop.test/café/x", "http://shop.test/caf%C3%A9/x/", 0.0),
    ("http://shop.test/caf%C3%A9", "http://shop.test/café", 0.0),
    ("http://shop.test/a%20b", "http://shop.test/a b", 0.0),
    ("http://shop.test/a%2Fb", "http://shop.test/a/b", 0.0),
    ("http://shop.test/f/books", "http://shop.test/f//books", 0.0),
    ("http://shop.test/Books", "http://shop.test/books", 0.0),
    ("http://shop.test/", "http://shop.test", 1.0),
    ("http://shop.test/x/", "http://shop.test/x?a=1/", 1.0),
    ("http://shop.test/caf%C3%A9", "http://shop.test/caf%C3%A9/", 1.0),
    ("http://shop.test/s?q=caf%C3%A9", "http://shop.test/s?q=café", 1.0),  # parse_qs decodes the query
    ("http://shop.test/s?q=a+b", "http://shop.test/s?q=a%20b", 1.0),
]


@pytest.mark.parametrize(("ref", "page", "score"), RAW_TEXT)
def test_url_match_compares_netloc_and_path_as_webarena_does(ref: str, page: str, score: float) -> None:
    assert upstream(ref, page) == score
    assert ours(ref, page) == score


def test_url_match_never_accepts_what_webarena_rejects() -> None:
    urls = sorted({u for case in AGREE + HOLES + RAW_TEXT for u in case[:2]})
    for ref in urls:
        for page in urls:
            assert ours(ref, page) <= upstream(ref, page), (ref, page)
