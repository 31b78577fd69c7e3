"""What the host accepts from a spec before any jail is involved, and the bounded YAML
reader that enforces it.

A spec is data a user downloads or a designer writes. Reading it must cost the reading
process work linear in its size, and the size is capped: a spec's text
(``MAX_SPEC_BYTES``), the data it expands to (``MAX_SPEC_WEIGHT``: YAML aliases and
shared Python objects count once per place they appear, as ``json.dumps`` and
``spec_id`` would see them), and each contract's code (``MAX_CODE_BYTES``, checked where
the code is parsed).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from . import errors  # nothing else: the jail's worker imports this module (no yaml there)

#: Largest spec text read (a YAML/JSON file or string), in bytes.
MAX_SPEC_BYTES = 1024 * 1024
#: Largest spec data after alias expansion: one unit per node plus one per character of
#: every string, key included.
MAX_SPEC_WEIGHT = 2 * 1024 * 1024
#: Largest contract or coach code, in bytes (UTF-8).
MAX_CODE_BYTES = 64 * 1024


def check_size(text: str | bytes, limit: int, what: str) -> None:
    size = len(text.encode() if isinstance(text, str) else text)
    if size > limit:
        raise errors.SpecError(f"{what} is larger than {limit:,} bytes ({size:,}); split it or "
                               "move data out of it")


def data_weight(data: Any, *, limit: int | None = None) -> int:
    """Size of ``data`` written out in full: nodes plus string characters, every shared
    object counted once per reference. Linear in the *distinct* objects (a memo per
    object), so a billion-laughs structure is measured without being expanded; a
    structure that contains itself is a ``SpecError``. Stops early past ``limit``."""
    memo: dict[int, int] = {}
    active: set[int] = set()

    def weigh(value: Any) -> int:
        if isinstance(value, str):
            return 1 + len(value)
        if not isinstance(value, (Mapping, list, tuple)):
            return 1
        key = id(value)
        if key in memo:
            return memo[key]
        if key in active:
            raise errors.SpecError("The spec refers to itself (a recursive YAML alias or a list that "
                                   "contains itself); write the value out")
        active.add(key)
        items = [x for kv in value.items() for x in kv] if isinstance(value, Mapping) else list(value)
        total = 1
        for item in items:
            total += weigh(item)
            if limit is not None and total > limit:
                break
        active.discard(key)
        memo[key] = total
        return total

    try:
        return weigh(data)
    except RecursionError:
        raise errors.SpecError("The spec is nested too deeply") from None


def check_weight(data: Any, where: str) -> None:
    weight = data_weight(data, limit=MAX_SPEC_WEIGHT)
    if weight > MAX_SPEC_WEIGHT:
        raise errors.SpecError(f"Spec {where} expands to more than {MAX_SPEC_WEIGHT:,} nodes and characters "
                               "(YAML aliases are expanded where they are used); write a smaller spec")


def load_yaml(text: str, where: str) -> Any:
    """``yaml.safe_load`` with the limits above: the text is capped before parsing, the
    composed document (aliases still shared, so composing is linear) is weighed before
    anything is built from it."""

    check_size(text, MAX_SPEC_BYTES, f"Spec {where}")
    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_weight(_plain_nodes(node), where)
        return loader.construct_document(node)
    except RecursionError:
        raise errors.SpecError(f"Spec {where} is nested too deeply") from None
    except ValueError as exc:  # a scalar Python refuses to build (a 5,000-digit integer)
        raise errors.SpecError(f"Spec {where} has a value that cannot be read: {str(exc)[:200]}") from None
    finally:
        loader.dispose()


@functools.cache
def _loader_class() -> Any:
    """SafeLoader without YAML 1.1's base-60 numbers (``1:2:3``): PyYAML builds them digit by
    digit, quadratic in their length; such a scalar stays a string, as in YAML 1.2."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
        list("-+0123456789"))
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))
    return Loader



def _plain_nodes(node: Any) -> Any:
    """The composed YAML graph as lists and strings that share what the aliases share, so
    ``data_weight`` measures the expansion without performing it."""
    import yaml

    made: dict[int, Any] = {}

    def plain(n: Any) -> Any:
        if isinstance(n, yaml.ScalarNode):
            return str(n.value)
        if id(n) in made:
            return made[id(n)]
        out: list[Any] = []
        made[id(n)] = out  # before the children: a node that contains itself is found
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                out.extend((plain(k), plain(v)))
        else:
            out.extend(plain(c) for c in n.value)
        return out

    return plain(node)
