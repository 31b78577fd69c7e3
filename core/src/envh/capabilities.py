"""What contract code may use: an explicit allow-list of functions and immutable values.

Contract code never sees a module object, a class it could change, or a function that
takes an attribute name or copies attributes (``getattr``, ``functools.update_wrapper``,
``operator.attrgetter``, ``str.format``). Each importable name below is a read-only
namespace of hand-picked members; everything else does not exist for the code. Regular
expressions are RE2 (linear time: no catastrophic backtracking). Iterators that can run
forever (``itertools.count``, ``iter(f, sentinel)``) are counted like loops, so even
``sum(count())`` stops at the limits in-process.

Both tiers build the same namespace: the trusted tier in the host process, the untrusted
tier inside the jail process (``envh.jail``).
"""

from __future__ import annotations

import bisect
import builtins
import collections
import difflib
import fnmatch
import functools
import heapq
import itertools
import json
import math
import operator
import statistics
import string
import textwrap
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

MAX_SIZE = 10_000_000  # elements or characters one capped operation may produce


class SizeLimit(Exception):
    """An operation would exceed ``MAX_SIZE``; the sandbox reports it as a code error."""


class Namespace:
    """A read-only bag of members: ``re.sub`` works, ``re.sub = f`` and ``re.x`` fail."""

    __slots__ = ("_members", "_name")

    def __init__(self, name: str, members: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_members", MappingProxyType(dict(members)))

    def __getattr__(self, attr: str) -> Any:
        try:
            return self._members[attr]
        except KeyError:
            raise AttributeError(
                f"module {self._name!r} has no attribute {attr!r} here; available: "
                f"{', '.join(sorted(self._members))}") from None

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"module {self._name!r} is read-only")

    __delattr__ = __setattr__  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<module {self._name!r} (contract capabilities)>"


def too_big(what: str) -> SizeLimit:
    return SizeLimit(f"{what} would exceed the size limit of {MAX_SIZE:,} elements")


def cap_mul(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_SIZE:
            raise too_big("repeating a sequence")
    return a * b


def cap_pow(a: Any, b: Any, mod: Any = None) -> Any:
    if mod is not None:
        return pow(a, b, mod)  # modular powers stay small
    if isinstance(a, int) and isinstance(b, int) and abs(a) > 1 and b * max(abs(a).bit_length(), 1) > 1_000_000:
        raise too_big("an integer power")
    return a ** b


def cap_lshift(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > 1_000_000:
        raise too_big("a left shift")
    return a << b


def _cap_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_SIZE:
        raise too_big("range()")
    return r


def _cap_bytes(*args: Any) -> bytes:
    if args and isinstance(args[0], int) and args[0] > MAX_SIZE:
        raise too_big("bytes()")
    return bytes(*args)


def _text_re() -> Namespace:
    """``re`` with RE2 semantics; flags are the ``re`` values, applied as inline flags."""
    import re2

    options = re2.Options()
    options.log_errors = False
    flag_names = {2: "i", 8: "m", 16: "s"}  # re.IGNORECASE, re.MULTILINE, re.DOTALL

    @functools.lru_cache(maxsize=256)
    def cached(pattern: str, flags: int = 0) -> Any:
        if not isinstance(pattern, str):
            raise TypeError("pattern must be a str")
        inline = "".join(c for bit, c in flag_names.items() if flags & bit)
        return re2.compile(f"(?{inline}){pattern}" if inline else pattern, options)

    regexp = type(cached("", 0))
    slots = getattr(regexp, "__slots__", ())

    def compile(pattern: str, flags: int = 0) -> Any:  # noqa: A001 - re's own name
        # not the cache itself: its cache_info() would let one episode count what earlier
        # episodes compiled (state that survives reset, save/restore and replay); and a
        # new wrapper each time (sharing the compiled program), so 'compile(p) is P' does
        # not tell whether an earlier episode evicted p from the cache
        shared = cached(pattern, flags)
        fresh = object.__new__(regexp)
        for slot in slots:
            object.__setattr__(fresh, slot, object.__getattribute__(shared, slot))
        return fresh

    def search(pattern: str, string: str, flags: int = 0) -> Any:
        return compile(pattern, flags).search(string)

    def match(pattern: str, string: str, flags: int = 0) -> Any:
        return compile(pattern, flags).match(string)

    def fullmatch(pattern: str, string: str, flags: int = 0) -> Any:
        return compile(pattern, flags).fullmatch(string)

    def findall(pattern: str, string: str, flags: int = 0) -> list[Any]:
        return compile(pattern, flags).findall(string)

    def finditer(pattern: str, string: str, flags: int = 0) -> Any:
        return compile(pattern, flags).finditer(string)

    def split(pattern: str, string: str, maxsplit: int = 0, flags: int = 0) -> list[str]:
        return compile(pattern, flags).split(string, maxsplit)

    def sub(pattern: str, repl: Any, string: str, count: int = 0, flags: int = 0) -> str:
        return compile(pattern, flags).sub(repl, string, count)

    def subn(pattern: str, repl: Any, string: str, count: int = 0, flags: int = 0) -> tuple[str, int]:
        return compile(pattern, flags).subn(repl, string, count)

    return Namespace("re", {
        "compile": compile, "search": search, "match": match, "fullmatch": fullmatch,
        "findall": findall, "finditer": finditer, "split": split, "sub": sub, "subn": subn,
        "escape": re2.escape, "error": re2.error, "IGNORECASE": 2, "I": 2, "MULTILINE": 8, "M": 8,
        "DOTALL": 16, "S": 16})


def _json() -> Namespace:
    def dumps(obj: Any, *, sort_keys: bool = False, indent: int | None = None,
              separators: tuple[str, str] | None = None, ensure_ascii: bool = True) -> str:
        return json.dumps(_plain(obj), sort_keys=sort_keys, indent=indent, separators=separators,
                          ensure_ascii=ensure_ascii)

    def loads(text: str | bytes) -> Any:
        return json.loads(text)

    return Namespace("json", {"dumps": dumps, "loads": loads, "JSONDecodeError": json.JSONDecodeError})


def _plain(value: Any) -> Any:
    """Read-only records' payloads as JSON (``json.dumps(action.args)`` works in hooks)."""
    if isinstance(value, Mapping) and not isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _pick(name: str, module: Any, names: str) -> Namespace:
    return Namespace(name, {n: getattr(module, n) for n in names.split()})


def build_modules(guard: Callable[[Any], Iterator[Any]]) -> dict[str, Namespace]:
    """The importable namespaces; ``guard`` wraps an iterator so each item is counted."""

    def count(start: Any = 0, step: Any = 1) -> Iterator[Any]:
        return guard(itertools.count(start, step))

    def cycle(iterable: Any) -> Iterator[Any]:
        return guard(itertools.cycle(iterable))

    def repeat(obj: Any, times: int | None = None) -> Iterator[Any]:
        if times is None:
            return guard(itertools.repeat(obj))
        if times > MAX_SIZE:
            raise too_big("itertools.repeat()")
        return itertools.repeat(obj, times)

    def counted(make: Callable[..., Any]) -> Callable[..., Any]:
        # product(range(10**7), repeat=9) or permutations(range(30)) would otherwise run
        # for ages inside one C call such as max() or sorted(): count every item they yield
        def build(*args: Any, **kwargs: Any) -> Iterator[Any]:
            return guard(make(*args, **kwargs))
        return build

    its = {n: counted(getattr(itertools, n)) for n in (
        "accumulate combinations combinations_with_replacement compress dropwhile "
        "filterfalse groupby islice pairwise permutations product starmap takewhile "
        "zip_longest").split()}
    its.update(count=count, cycle=cycle, repeat=repeat, chain=counted(itertools.chain),
               tee=itertools.tee)
    ops = {n: getattr(operator, n) for n in (
        "abs add and_ concat contains countOf eq floordiv ge getitem gt index indexOf inv invert "
        "is_ is_not itemgetter le lt mod ne neg not_ or_ pos sub truediv truth xor").split()}
    ops.update(mul=cap_mul, pow=cap_pow, lshift=cap_lshift)

    def Counter(*args: Any, **kwargs: Any) -> collections.Counter[Any]:  # noqa: N802
        return collections.Counter(*args, **kwargs)

    def SequenceMatcher(*args: Any, **kwargs: Any) -> difflib.SequenceMatcher[Any]:  # noqa: N802
        return difflib.SequenceMatcher(*args, **kwargs)

    return {
        "re": _text_re(),
        "json": _json(),
        "math": Namespace("math", {n: v for n, v in vars(math).items() if not n.startswith("_")}),
        "itertools": Namespace("itertools", its),
        "operator": Namespace("operator", ops),
        "functools": Namespace("functools", {"reduce": functools.reduce, "cmp_to_key": functools.cmp_to_key}),
        "collections": Namespace("collections", {
            "Counter": Counter, "OrderedDict": collections.OrderedDict,
            "defaultdict": collections.defaultdict, "deque": collections.deque}),
        "string": _pick("string", string, "ascii_letters ascii_lowercase ascii_uppercase digits "
                                          "hexdigits octdigits punctuation printable whitespace capwords"),
        "statistics": _pick("statistics", statistics, "mean fmean median median_low median_high mode "
                                                      "multimode pstdev pvariance stdev variance quantiles"),
        "heapq": _pick("heapq", heapq, "heappush heappop heapify heapreplace heappushpop nlargest "
                                      "nsmallest merge"),
        "bisect": _pick("bisect", bisect, "bisect bisect_left bisect_right insort insort_left insort_right"),
        "textwrap": _pick("textwrap", textwrap, "wrap fill shorten dedent indent"),
        "difflib": Namespace("difflib", {"SequenceMatcher": SequenceMatcher,
                                         "get_close_matches": difflib.get_close_matches,
                                         "unified_diff": difflib.unified_diff, "ndiff": difflib.ndiff}),
        "fnmatch": _pick("fnmatch", fnmatch, "fnmatch fnmatchcase filter"),
        "unicodedata": _pick("unicodedata", unicodedata, "name lookup category bidirectional "
                                                         "combining decimal digit numeric normalize"),
    }


#: Builtins offered as they are: pure functions and immutable builtin types.
PLAIN_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "int", "isinstance", "len", "list", "map", "max", "min", "next", "ord", "chr", "repr",
    "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip", "hash",
    "callable", "bin", "hex", "oct", "ascii", "Exception", "ValueError", "KeyError", "TypeError",
    "IndexError", "LookupError", "StopIteration", "ArithmeticError", "ZeroDivisionError",
    "AssertionError", "RuntimeError", "AttributeError", "NotImplementedError", "OverflowError",
    "True", "False", "None",
)


def build_builtins(guard: Callable[[Any], Iterator[Any]], importer: Callable[..., Any]) -> dict[str, Any]:
    def iter_(obj: Any, *sentinel: Any) -> Iterator[Any]:
        # the two-argument form calls a function until it returns the sentinel: count it
        return guard(iter(obj, *sentinel)) if sentinel else iter(obj)

    out = {n: getattr(builtins, n) for n in PLAIN_BUILTINS}
    out.update(range=_cap_range, pow=cap_pow, bytes=_cap_bytes, iter=iter_, __import__=importer)
    return out


def _check_json(value: Any, where: str, depth: int = 0) -> None:
    """Record payloads built by contract code must be plain JSON data (no functions,
    generators or namespaces smuggled to the base env or the trajectory)."""
    t = type(value)
    if t in (str, int, float, bool) or value is None:
        return
    if depth > 64:
        raise ValueError(f"{where} is nested too deeply")
    if isinstance(value, Mapping):
        for k, v in value.items():
            if type(k) is not str:
                raise TypeError(f"{where} has a non-string key {k!r:.40}")
            _check_json(v, f"{where}.{k}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]", depth + 1)
    else:
        raise TypeError(f"{where} must be JSON data, got {t.__name__}")


def record_factories() -> dict[str, Any]:
    """``Action``, ``Block``, ``Observation``, ``EnvResponse`` and ``evolve`` for contract
    code: functions, not the classes (which code could otherwise change or subclass)."""
    import attrs

    from .types import Action as A
    from .types import Block as B
    from .types import EnvResponse as R
    from .types import Observation as O

    def Action(tool: str, args: Mapping[str, Any] | None = None) -> A:  # noqa: N802
        if type(tool) is not str:
            raise TypeError("Action(tool=...) must be a str")
        _check_json(args or {}, "args")
        return A(tool=tool, args=args or {})

    def Block(reason: str) -> B:  # noqa: N802
        if type(reason) is not str:
            raise TypeError("Block(reason=...) must be a str")
        return B(reason=reason)

    def Observation(text: str, data: Mapping[str, Any] | None = None) -> O:  # noqa: N802
        if type(text) is not str:
            raise TypeError("Observation(text=...) must be a str")
        _check_json(data or {}, "data")
        return O(text=text, data=data or {})

    def EnvResponse(observation: O, reward: float = 0.0, terminated: bool = False,  # noqa: N802
                    truncated: bool = False, info: Mapping[str, Any] | None = None) -> R:
        return evolve(R(observation=O(text="")), observation=observation, reward=reward,
                      terminated=terminated, truncated=truncated, info=info or {})

    checks: dict[str, Callable[[Any], bool]] = {
        "tool": lambda v: type(v) is str, "text": lambda v: type(v) is str,
        "reason": lambda v: type(v) is str, "observation": lambda v: type(v) is O,
        "reward": lambda v: type(v) in (int, float), "terminated": lambda v: type(v) is bool,
        "truncated": lambda v: type(v) is bool}

    def evolve(record: Any, **changes: Any) -> Any:
        if type(record) not in (A, B, O, R):
            raise TypeError(f"evolve() takes an Action, Block, Observation or EnvResponse, "
                            f"not {type(record).__name__}")
        names = {f.name for f in attrs.fields(type(record))}
        for name, value in changes.items():
            if name not in names:
                raise TypeError(f"{type(record).__name__} has no field {name!r}")
            if name in ("args", "data", "info"):
                _check_json(value, name)
                value = changes[name] = dict(value)
            elif not checks[name](value):
                raise TypeError(f"{type(record).__name__}.{name} cannot be {type(value).__name__}")
        if type(record) is R and "info" in changes:
            from .types import frozen

            changes["info"] = frozen(changes["info"])
        return attrs.evolve(record, **changes)

    return {"Action": Action, "Block": Block, "Observation": Observation,
            "EnvResponse": EnvResponse, "evolve": evolve}
