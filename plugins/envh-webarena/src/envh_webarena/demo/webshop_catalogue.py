"""A small catalogue written in WebShop's own data format (the raw scrape fields)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _opts(**named: list[str]) -> dict[str, list[dict[str, Any]]]:
    return {name: [{"value": v, "image": None} for v in values] for name, values in named.items()}


PRODUCTS: list[dict[str, Any]] = [
    {"asin": "B0TSHIRT01", "name": "Men's Cotton Crew Neck T-Shirt", "category": "fashion",
     "query": "men's t-shirts", "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts",
     "full_description": "A soft everyday crew neck tee made from ring-spun cotton.",
     "small_description": ["100% cotton", "Machine wash cold", "Short sleeve, regular fit"],
     "pricing": "$15.99", "images": ["img1"],
     "customization_options": _opts(color=["Black", "Navy Blue", "White"], size=["Small", "Medium", "Large"])},
    {"asin": "B0POLO0002", "name": "Men's Slim Fit Polo Shirt", "category": "fashion",
     "query": "men's polos", "product_category": "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › Polos",
     "full_description": "A slim fit pique polo with a two-button placket.",
     "small_description": ["Polyester blend", "Hand wash only"], "pricing": "$24.00", "images": ["img2"],
     "customization_options": _opts(color=["Red", "Navy Blue"], size=["Medium", "Large"])},
    {"asin": "B0SHOES003", "name": "Women's Lightweight Running Shoes Breathable Sneakers", "category": "fashion",
     "query": "women's running shoes", "product_category": "Clothing, Shoes & Jewelry › Women › Shoes › Athletic",
     "full_description": "Breathable mesh running shoes with a cushioned sole.",
     "small_description": ["Lightweight mesh upper", "Rubber sole"], "pricing": "$39.99 - $49.99",
     "images": ["img3"], "customization_options": _opts(color=["Pink", "Grey"], size=["7", "8", "9"])},
    {"asin": "B0BOTTLE04", "name": "Stainless Steel Insulated Water Bottle", "category": "sports",
     "query": "water bottles", "product_category": "Sports & Outdoors › Accessories › Water Bottles",
     "full_description": "Double wall vacuum insulated bottle keeps drinks cold for 24 hours.",
     "small_description": ["Stainless steel", "BPA free lid"], "pricing": "$22.50", "images": ["img4"],
     "customization_options": _opts(color=["Black", "Green"], size=["32 oz", "40 oz"])},
    {"asin": "B0GREENT05", "name": "Organic Green Tea Bags", "category": "grocery",
     "query": "green tea", "product_category": "Grocery & Gourmet Food › Beverages › Tea › Green",
     "full_description": "Organic whole leaf green tea in 100 bags.",
     "small_description": ["USDA organic", "100 tea bags"], "pricing": "$8.99", "images": ["img5"],
     "customization_options": None},
    {"asin": "B0PHONES06", "name": "Wireless Bluetooth Over Ear Headphones", "category": "electronics",
     "query": "headphones", "product_category": "Electronics › Headphones › Over-Ear",
     "full_description": "Noise cancelling wireless headphones with 30 hour battery.",
     "small_description": ["Bluetooth 5.0", "Noise cancelling"], "pricing": "$59.00", "images": ["img6"],
     "customization_options": _opts(color=["Black", "Silver"])},
]
ATTRIBUTES = {
    "B0TSHIRT01": {"attributes": ["machine wash", "cotton", "short sleeve"]},
    "B0POLO0002": {"attributes": ["slim fit", "hand wash"]},
    "B0SHOES003": {"attributes": ["lightweight", "rubber sole"]},
    "B0BOTTLE04": {"attributes": ["stainless steel", "bpa free"]},
    "B0GREENT05": {"attributes": ["organic"]},
    "B0PHONES06": {"attributes": ["noise cancelling"]},
}
HUMAN = {
    "B0TSHIRT01": [{"instruction": "i need a machine wash cotton t-shirt for men in navy blue, size large",
                    "instruction_attributes": ["machine wash", "cotton"], "instruction_options": ["navy blue", "large"]}],
    "B0BOTTLE04": [{"instruction": "i want a stainless steel water bottle in green, 32 oz",
                    "instruction_attributes": ["stainless steel"], "instruction_options": ["green", "32 oz"]}],
    "B0GREENT05": [{"instruction": "i am looking for organic green tea bags",
                    "instruction_attributes": ["organic"], "instruction_options": []}],
    "B0SHOES003": [{"instruction": "lightweight running shoes for women, pink, size 8",
                    "instruction_attributes": ["lightweight"], "instruction_options": ["pink", "8"]}],
}


def write_catalogue(folder: Path) -> Path:
    """Write the three WebShop data files into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items_shuffle_test.json").write_text(json.dumps(PRODUCTS))
    (folder / "items_ins_v2_test.json").write_text(json.dumps(ATTRIBUTES))
    (folder / "items_human_ins.json").write_text(json.dumps(HUMAN))
    return folder
