"""Offline demo material in the benchmarks' own formats: a small shop and forum in
WebArena's shape (``sites``), WebArena task configs for them (``tasks``) and a small
WebShop catalogue (``webshop_catalogue``). The tests and the README example use them."""
