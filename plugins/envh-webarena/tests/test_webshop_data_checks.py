"""WebShop's data files are type-checked as they load: a malformed record is an EnvError
naming the file, the record and the field, never a KeyError deep in the loader or a
silently different goal."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from envh import errors
from envh_webarena.demo.webshop_catalogue import write_catalogue
from envh_webarena.webshop import data as wsdata


def folder_with(tmp_path: Path, prefix: str, change: Callable[[Any], Any]) -> str:
    """The demo catalogue with the file starting with ``prefix`` rewritten by ``change``."""
    folder = write_catalogue(tmp_path / "data")
    path = next(p for p in folder.iterdir() if p.name.startswith(prefix))
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return str(folder)


def with_field(index: int, **fields: Any) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    return lambda items: [dict(x, **fields) if i == index else x for i, x in enumerate(items)]


def test_the_demo_catalogue_in_webshops_format_loads(tmp_path: Path) -> None:
    cat = wsdata.load(str(write_catalogue(tmp_path)))
    assert len(cat.products) == 6 and len(cat.goals) == 4
    shirt = next(g for g in cat.goals if g["asin"] == "B0TSHIRT01")
    assert shirt["goal_options"] == ["navy blue", "large"]
    assert cat.products["B0SHOES003"]["options"]["size"] == ["7", "8", "9"]
    assert cat.products["B0PHONES06"]["Attributes"] == ["noise cancelling"]


@pytest.mark.parametrize(("prefix", "change", "says"), [
    ("items_shuffle", with_field(2, name=5), ["items_shuffle_test.json", "record #2", "B0SHOES003", "'name'",
                                              "a string", "int"]),
    ("items_shuffle", with_field(1, customization_options={"color": [{"image": None}]}),
     ["record #1", "customization_options.color", 'string "value"']),
    ("items_shuffle", with_field(0, customization_options={"color": "red"}), ["record #0", "customization_options.color"]),
    ("items_shuffle", with_field(3, small_description=[1, 2]), ["record #3", "'small_description'", "list of strings"]),
    ("items_shuffle", with_field(0, pricing=12.5), ["record #0", "'pricing'", "$12.99"]),
    ("items_shuffle", with_field(4, asin=123), ["record #4", "'asin'", "a string"]),
    ("items_shuffle", lambda items: [*items, "B0EXTRA"], ["record #6", "a product object"]),
    ("items_shuffle", lambda items: {"items": items}, ["items_shuffle_test.json", "top level", "a list"]),
    ("items_ins_v2", lambda d: dict(d, B0POLO0002=["slim fit"]), ["items_ins_v2_test.json", "asin B0POLO0002"]),
    ("items_ins_v2", lambda d: dict(d, B0POLO0002={"attributes": "slim fit"}), ["asin B0POLO0002", "'attributes'"]),
    ("items_human_ins", lambda d: list(d.values()), ["items_human_ins.json", "top level", "an object"]),
    ("items_human_ins", lambda d: dict(d, B0BOTTLE04={"instruction": "x"}), ["asin B0BOTTLE04", "a list"]),
    ("items_human_ins", lambda d: dict(d, B0BOTTLE04=[{"instruction_attributes": ["bpa free"]}]),
     ["items_human_ins.json", "asin B0BOTTLE04, instruction #0", "'instruction'", "a string"]),
    ("items_human_ins", lambda d: dict(d, B0BOTTLE04=[dict(d["B0BOTTLE04"][0], instruction_options="green")]),
     ["asin B0BOTTLE04, instruction #0", "'instruction_options'", "a list of strings", "'green'"]),
    ("items_human_ins", lambda d: dict(d, B0BOTTLE04=[dict(d["B0BOTTLE04"][0], instruction_attributes="steel")]),
     ["'instruction_attributes'"]),
])
def test_a_malformed_record_names_file_record_and_field(tmp_path: Path, prefix: str, change, says: list[str]) -> None:
    with pytest.raises(errors.EnvError) as caught:
        wsdata.load(folder_with(tmp_path, prefix, change))
    for part in says:
        assert part in str(caught.value)
    # the loader's internal signal is not shown as a chained traceback
    assert caught.value.__context__ is None or caught.value.__suppress_context__


def test_no_products_is_an_env_error_before_the_search_index(tmp_path: Path) -> None:
    with pytest.raises(errors.EnvError, match="no product with a usable asin"):
        wsdata.load(folder_with(tmp_path, "items_shuffle", lambda items: []))
    with pytest.raises(errors.EnvError, match="among the first 0 records"):
        wsdata.load(str(write_catalogue(tmp_path / "b")), num_products=0)


def test_rows_webshop_skips_are_still_skipped(tmp_path: Path) -> None:
    # "nan" / NaN asins and over-long ones are dropped, as WebShop's loader does; so are
    # instructions without attributes (even with no text), and null optional fields.
    def change(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        extra = [dict(items[0], asin="nan"), dict(items[0], asin="B0TOOLONGASIN"), dict(items[0], asin=float("nan"))]
        return [*with_field(1, full_description=None, small_description="one line", pricing=None,
                            customization_options={"color": None})(items), *extra]

    folder = folder_with(tmp_path, "items_shuffle", change)
    human = Path(folder) / "items_human_ins.json"
    human.write_text(json.dumps(dict(json.loads(human.read_text()), B0POLO0002=[{"instruction_attributes": []}])))
    cat = wsdata.load(folder)
    assert list(cat.products) == [p["asin"] for p in json.loads((Path(folder) / "items_shuffle_test.json").read_text())[:6]]
    polo = cat.products["B0POLO0002"]
    assert polo["Description"] == "" and polo["BulletPoints"] == ["one line"] and polo["Price"] == "$100.0"
    assert polo["options"] == {}
    assert len(cat.goals) == 4


def test_synthetic_goals_check_their_instruction(tmp_path: Path) -> None:
    good = lambda d: dict(d, B0GREENT05={"attributes": ["organic"], "instruction": "i want organic tea",  # noqa: E731
                                         "instruction_attributes": ["organic"]})
    cat = wsdata.load(folder_with(tmp_path / "a", "items_ins_v2", good), human_goals=False)
    assert [g["instruction_text"] for g in cat.goals][0].startswith("i want organic tea")
    bad = lambda d: dict(d, B0GREENT05={"instruction": "tea", "instruction_attributes": "organic"})  # noqa: E731
    with pytest.raises(errors.EnvError, match=r"items_ins_v2_test.json: asin B0GREENT05: 'instruction_attributes'"):
        wsdata.load(folder_with(tmp_path / "b", "items_ins_v2", bad), human_goals=False)


def test_malformed_reviews_name_the_record(tmp_path: Path) -> None:
    folder = write_catalogue(tmp_path)
    reviews = folder / "reviews.json"
    reviews.write_text(json.dumps([{"asin": "B0TSHIRT01", "average_rating": 4.5,
                                    "reviews": [{"title": "ok", "stars": 4, "review": "fine"}]}]))
    shirt = wsdata.load(str(folder)).products["B0TSHIRT01"]
    assert shirt["Rating"] == 4.5 and shirt["Reviews"] == [{"title": "ok", "score": 4, "body": "fine"}]
    reviews.write_text(json.dumps([{"asin": "B0TSHIRT01"}, {"reviews": []}]))
    with pytest.raises(errors.EnvError, match=r"reviews.json: record #1: the record must be an object with a string"):
        wsdata.load(str(folder))
    reviews.write_text(json.dumps([{"asin": "B0TSHIRT01", "reviews": ["great"]}]))
    with pytest.raises(errors.EnvError, match=r"record #0 \(asin B0TSHIRT01\): 'reviews' must be a list of objects"):
        wsdata.load(str(folder))
