"""Checking and running contract code (DESIGN invariant 3).

Code is parsed and checked before it runs: imports only of the capability namespaces in
``envh.capabilities``, no names or attributes that reach interpreter internals (dunders,
frames, ``str.format``), no attribute assignment, no ``global``, no classes, no
``return``/``break``/``continue``/``yield`` in ``finally`` (which would swallow the time limit). It
then runs against an allow-list namespace (functions and immutable values only), with
cheap deadline checks at the top of every function and loop iteration, so a hook that
loops forever stops at its limit. Single huge operations are capped (``range``, ``*``,
``**``, ``<<``, ``bytes``).

This is the whole story for the *trusted* tier, which runs in the host process. What no
in-process check can stop (a C call that never returns, a gigabyte ``str.ljust``) is
bounded for *untrusted* code by running the same sandbox inside ``envh.jail``'s process,
with hard resource limits and a wall-clock kill.
"""

from __future__ import annotations

import ast
import collections
import time
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from . import capabilities as caps
from .errors import ContractCodeError, EnvhError
from .limits import MAX_CODE_BYTES

ALLOWED_MODULES = frozenset({
    "re", "math", "json", "collections", "itertools", "string", "difflib", "functools",
    "operator", "statistics", "heapq", "bisect", "textwrap", "fnmatch", "unicodedata",
})
FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "getattr", "setattr", "delattr", "hasattr", "globals",
    "locals", "vars", "dir", "input", "breakpoint", "help", "memoryview", "type", "object",
    "super", "classmethod", "staticmethod", "property", "exit", "quit", "evaluate",
    "BaseException", "print",
})
FORBIDDEN_ATTRS = frozenset({"format", "format_map", "mro", "attrgetter", "methodcaller",
                             "update_wrapper", "wraps", "Formatter"})
FORBIDDEN_ATTR_PREFIXES = ("_", "gi_", "f_", "tb_", "cr_", "ag_", "co_", "func_")
_TICK, _ITER, _MUL, _POW, _LSHIFT = "_envh_tick", "_envh_iter", "_envh_mul", "_envh_pow", "_envh_lshift"
FILENAME = "<contract>"


class _Timeout(BaseException):
    """Raised inside untrusted code at its deadline; not catchable by ``except Exception``."""


def _fail(node: ast.AST, message: str) -> ContractCodeError:
    return ContractCodeError(message, lineno=getattr(node, "lineno", None),
                             col=getattr(node, "col_offset", None))


class _Checker(ast.NodeVisitor):
    def visit(self, node: ast.AST) -> Any:
        # every identifier the code binds: a parameter, import alias, handler or pattern
        # name called '_envh_tick' would shadow the deadline check itself
        for field in ("arg", "asname", "name", "rest"):
            ident = getattr(node, field, None)
            if isinstance(ident, str) and (ident.startswith("__") or ident.startswith("_envh")):
                raise _fail(node, f"name {ident!r} is not allowed (dunder names are off limits)")
        return super().visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
        self.generic_visit(node)  # the aliases: 'import re as _envh_tick' is a binding too

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            raise _fail(node, "relative imports are not allowed")
        self._module(node, node.module or "")
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_") or alias.name in FORBIDDEN_ATTRS:
                raise _fail(node, f"'from {node.module} import {alias.name}' is not allowed")
        self.generic_visit(node)

    def _module(self, node: ast.AST, name: str) -> None:
        if name not in ALLOWED_MODULES:
            raise _fail(node, f"import of {name!r} is not allowed; allowed modules: "
                              f"{', '.join(sorted(ALLOWED_MODULES))}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__") or node.id.startswith("_envh"):
            raise _fail(node, f"name {node.id!r} is not allowed (dunder names are off limits)")
        if node.id in FORBIDDEN_NAMES:
            raise _fail(node, f"name {node.id!r} is not allowed in contract code")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._attr(node, node.attr)
        if not isinstance(node.ctx, ast.Load):
            raise _fail(node, f"assigning or deleting attribute {node.attr!r} is not allowed: "
                              "records are immutable; build a new one (evolve) or use memo")
        self.generic_visit(node)

    @staticmethod
    def _attr(node: ast.AST, attr: str) -> None:
        if attr.startswith(FORBIDDEN_ATTR_PREFIXES) or attr in FORBIDDEN_ATTRS:
            raise _fail(node, f"attribute {attr!r} is not allowed (no private, dunder, frame, "
                              "str.format or attribute-by-name access)")

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:  # 'case str(__class__=c)' reads an attribute by name
            self._attr(node, attr)
        self.generic_visit(node)

    # A jump out of 'finally' discards the time-limit exception. One pass finds them: each
    # function body is a frame holding its loop depth and, per enclosing 'finally' in that
    # frame, the loop depth where the 'finally' began. 'return'/'yield' in a frame with a
    # 'finally' leaves it; 'break'/'continue' leaves it unless a loop began inside it (a
    # loop's 'else' is not inside the loop). Work is linear in the code.
    def __init__(self) -> None:
        self.frames: list[list[int]] = [[0]]  # per function: [loop depth, *loop depth at each 'finally']

    def _frame(self) -> list[int]:
        return self.frames[-1]

    def visit_Try(self, node: ast.Try) -> None:
        for child in (*node.body, *node.handlers, *node.orelse):
            self.visit(child)
        frame = self._frame()
        frame.append(frame[0])
        for child in node.finalbody:
            self.visit(child)
        frame.pop()

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def _jump(self, node: ast.AST) -> None:
        frame = self._frame()
        leaves = len(frame) > 1 and (not isinstance(node, (ast.Break, ast.Continue)) or frame[-1] == frame[0])
        if leaves:
            raise _fail(node, "'return', 'break', 'continue' or 'yield' inside 'finally' is not allowed")
        self.generic_visit(node)

    visit_Return = visit_Yield = visit_YieldFrom = visit_Break = visit_Continue = _jump  # type: ignore[assignment]

    def _loop(self, node: ast.For | ast.While) -> None:
        for name in ("target", "iter", "test"):
            if getattr(node, name, None) is not None:
                self.visit(getattr(node, name))
        frame = self._frame()
        frame[0] += 1
        for child in node.body:
            self.visit(child)
        frame[0] -= 1
        for child in node.orelse:
            self.visit(child)

    visit_For = visit_While = _loop  # type: ignore[assignment]

    def _def(self, node: ast.FunctionDef | ast.Lambda) -> None:
        name = getattr(node, "name", "<lambda>")
        if name.startswith("_envh") or name.startswith("__") or name in FORBIDDEN_NAMES:
            raise _fail(node, f"a function may not be named {name!r}"
                              + (": the verifier is sealed" if name == "evaluate" else ""))
        # decorators and defaults run where the def stands (inside any 'finally' there); the body
        # is a frame of its own
        outer: list[ast.AST] = [*getattr(node, "decorator_list", ()), *node.args.defaults,
                                *(d for d in node.args.kw_defaults if d is not None)]
        for child in outer:
            self.visit(child)
        done = {id(c) for c in outer}
        self.frames.append([0])
        try:
            for _field, value in ast.iter_fields(node):
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, ast.AST) and id(child) not in done:
                        self.visit(child)
        finally:
            self.frames.pop()

    visit_FunctionDef = _def  # type: ignore[assignment]
    visit_Lambda = _def  # type: ignore[assignment]

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is None:
            raise _fail(node, "catch specific exceptions (e.g. 'except Exception:'), not everything")
        self.generic_visit(node)

    def _reject(self, what: str) -> Callable[[Any, ast.AST], None]:
        def visit(node: ast.AST) -> None:
            raise _fail(node, f"{what} is not allowed in contract code")
        return visit  # type: ignore[return-value]

    def generic_visit(self, node: ast.AST) -> None:
        banned = {ast.Global: "'global'", ast.Nonlocal: "'nonlocal'", ast.ClassDef: "defining classes",
                  ast.AsyncFunctionDef: "async code", ast.Await: "async code",
                  ast.AsyncFor: "async code", ast.AsyncWith: "async code", ast.With: "'with'"}
        for t, what in banned.items():
            if isinstance(node, t):
                raise _fail(node, f"{what} is not allowed in contract code")
        super().generic_visit(node)


class _Instrument(ast.NodeTransformer):
    """Deadline checks at function entry and loop bodies; capped big operations.

    A top-level function whose name the code never loads can only be called from outside
    (the harness calling a hook, which resets the limits anyway): it cannot recurse, so
    its entry needs no check. Every other function gets one.
    """

    def __init__(self, tree: ast.Module) -> None:
        loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        # a decorator is handed the function itself, and may keep it where the code calls it
        self.entry_free = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in loaded
                           and not n.decorator_list}
        self.depth = 0

    @staticmethod
    def _tick(node: ast.AST) -> ast.stmt:
        call = ast.Expr(ast.Call(ast.Name(_TICK, ast.Load()), [], []))
        return ast.copy_location(call, node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        top = self.depth == 0
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        if not (top and node.name in self.entry_free):
            node.body.insert(0, self._tick(node))
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        # a lambda can recurse through a name too: its body becomes (tick(), body)[1]
        self.generic_visit(node)
        tick = ast.Call(ast.Name(_TICK, ast.Load()), [], [])
        node.body = ast.copy_location(
            ast.Subscript(ast.Tuple([tick, node.body], ast.Load()), ast.Constant(1), ast.Load()), node.body)
        return node

    def _loop(self, node: ast.For | ast.While) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, self._tick(node))
        if isinstance(node, ast.For):
            node.iter = ast.copy_location(ast.Call(ast.Name(_ITER, ast.Load()), [node.iter], []), node.iter)
        return node

    visit_For = _loop  # type: ignore[assignment]
    visit_While = _loop  # type: ignore[assignment]

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        node.iter = ast.copy_location(ast.Call(ast.Name(_ITER, ast.Load()), [node.iter], []), node.iter)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        fn = {ast.Mult: _MUL, ast.Pow: _POW, ast.LShift: _LSHIFT}.get(type(node.op))
        if fn is None:
            return node
        return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), [node.left, node.right], []), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        fn = {ast.Mult: _MUL, ast.Pow: _POW, ast.LShift: _LSHIFT}.get(type(node.op))
        if fn is None or not isinstance(node.target, ast.Name):
            return node
        load = ast.Name(node.target.id, ast.Load())
        value = ast.Call(ast.Name(fn, ast.Load()), [load, node.value], [])
        return ast.copy_location(ast.Assign([node.target], value), node)


# a 'yield' in 'finally' suspends the generator while the time-limit exception is in flight:
# the caller gets a value as if nothing happened and simply drops the generator


def _import(modules: dict[str, caps.Namespace]) -> Callable[..., Any]:
    def import_(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level or name not in modules:
            raise ImportError(f"import of {name!r} is not allowed")
        return modules[name]
    return import_


class Sandbox:
    """Compiled untrusted code and a call gate with per-call limits.

    Two limits, both checked at the instrumented points (function entry, loop iterations):
    ``max_ops`` counts those points — deterministic, immune to a busy machine, and what
    stops a runaway loop in practice — and ``time_limit`` is a wall-clock backstop checked
    every 256 points. Code without loops never consults the clock, so a descheduled
    process cannot make a correct hook fail. ``clock`` is wall time in the host; the jail
    passes the process's CPU time, so a busy machine does not fail honest code there.
    """

    def __init__(self, source: str, *, names: dict[str, Any] | None = None,
                 time_limit: float = 0.25, max_ops: int = 200_000,
                 allowed_functions: Iterable[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.time_limit, self.max_ops = time_limit, max_ops
        self._deadline = [float("inf")]
        fuel = [max_ops]
        tripped: list[bool | None] = [None]  # set once a limit is hit in the current call
        tree = parse_and_check(source)
        if allowed_functions is not None:
            check_top_level(tree, set(allowed_functions))
        try:
            tree = ast.fix_missing_locations(_Instrument(tree).visit(tree))
            code = compile(tree, FILENAME, "exec")
        except SyntaxError as exc:  # a limit of the compiler (e.g. a pattern that binds too much)
            raise ContractCodeError(f"syntax error: {exc.msg}", lineno=exc.lineno) from None
        except (RecursionError, MemoryError):
            raise ContractCodeError("the code is nested too deeply to compile") from None
        deadline, monotonic, limit = self._deadline, clock, time_limit

        def over_limit(n: int) -> bool:
            # every 256 points: the operation count, then the wall clock, whose deadline is
            # set on the first check so calls without loops never read the clock at all
            if n >= 0:
                now = monotonic()
                if deadline[0] == 0.0:
                    deadline[0] = now + limit
                    return False
                if now <= deadline[0]:
                    return False
            # from here on every check fails, not every 256th: code run by a finalizer (a
            # dropped generator's 'finally') swallows the exception and carries on
            tripped[0] = n < 0
            self.namespace[_TICK] = stopped
            return True

        def tick() -> None:
            n = fuel[0] = fuel[0] - 1
            if not n & 255 and over_limit(n):
                raise _Timeout(n < 0)

        def stopped() -> None:
            raise _Timeout(tripped[0])

        def guarded(it: Any) -> Iterator[Any]:
            for item in it:
                n = fuel[0] = fuel[0] - 1
                if not n & 255 and over_limit(n):
                    raise _Timeout(n < 0)
                yield item

        modules = caps.build_modules(guarded)
        self.namespace: dict[str, Any] = {
            "__builtins__": caps.build_builtins(guarded, _import(modules)), "__name__": "contract",
            _TICK: tick, _ITER: guarded, _MUL: caps.cap_mul, _POW: caps.cap_pow, _LSHIFT: caps.cap_lshift,
            **(names or {})}

        def call(fn: Callable[..., Any], hook: str, *args: Any) -> Any:
            fuel[0] = max_ops
            deadline[0] = 0.0
            if tripped[0] is not None:
                tripped[0], self.namespace[_TICK] = None, tick
            try:
                out = fn(*args)
                if tripped[0] is not None:  # the limit was hit and the exception swallowed
                    raise _Timeout(tripped[0])
            except BaseException as exc:  # noqa: BLE001 - translated into a typed error
                typed = self._translate(exc, hook)
                if typed is exc:
                    raise
                raise typed from (None if isinstance(exc, _Timeout) else exc)
            return out

        def call3(fn: Callable[..., Any], hook: str, a: Any, b: Any, c: Any) -> Any:
            # call() for the three-argument hooks, without packing arguments (hot path)
            fuel[0] = max_ops
            deadline[0] = 0.0
            if tripped[0] is not None:
                tripped[0], self.namespace[_TICK] = None, tick
            try:
                out = fn(a, b, c)
                if tripped[0] is not None:  # the limit was hit and the exception swallowed
                    raise _Timeout(tripped[0])
                return out
            except BaseException as exc:  # noqa: BLE001 - translated into a typed error
                typed = self._translate(exc, hook)
                if typed is exc:
                    raise
                raise typed from (None if isinstance(exc, _Timeout) else exc)

        def call4(fn: Callable[..., Any], hook: str, a: Any, b: Any, c: Any, d: Any) -> Any:
            # call3 for modify_transition's four arguments
            fuel[0] = max_ops
            deadline[0] = 0.0
            if tripped[0] is not None:
                tripped[0], self.namespace[_TICK] = None, tick
            try:
                out = fn(a, b, c, d)
                if tripped[0] is not None:
                    raise _Timeout(tripped[0])
                return out
            except BaseException as exc:  # noqa: BLE001 - translated into a typed error
                typed = self._translate(exc, hook)
                if typed is exc:
                    raise
                raise typed from (None if isinstance(exc, _Timeout) else exc)

        self.call_function, self.call3, self.call4 = call, call3, call4
        preset = dict(self.namespace)
        call(lambda: exec(code, self.namespace), "<module>")
        provided = {id(v) for v in preset.values()} | {id(v) for v in self.namespace["__builtins__"].values()}
        provided |= {id(v) for ns in modules.values() for v in object.__getattribute__(ns, "_members").values()}
        for key, value in list(self.namespace.items()):
            if key not in preset or preset[key] is not value:
                self.namespace[key] = _constant(value, key, seen=provided)

    def function(self, name: str) -> Callable[..., Any] | None:
        fn = self.namespace.get(name)
        return fn if isinstance(fn, types.FunctionType) else None

    def _translate(self, exc: BaseException, hook: str) -> BaseException:
        if isinstance(exc, _Timeout):
            what = (f"more than {self.max_ops:,} loop iterations and calls" if exc.args and exc.args[0]
                    else f"longer than its time limit of {self.time_limit * 1000:.0f} ms")
            return ContractCodeError(
                f"ran {what}; avoid unbounded loops and heavy work in hooks", hook=hook)
        if isinstance(exc, ContractCodeError):
            if exc.hook is None:
                exc.hook = hook
            return exc
        if isinstance(exc, EnvhError):
            return exc  # raised by envh under the code (e.g. non-JSON state): not the code's fault
        if isinstance(exc, caps.SizeLimit):
            return ContractCodeError(str(exc), lineno=_code_line(exc), hook=hook)
        if isinstance(exc, (Exception, RecursionError)):
            return ContractCodeError(f"{type(exc).__name__}: {str(exc)[:2000]}", lineno=_code_line(exc), hook=hook)
        return exc  # KeyboardInterrupt, SystemExit: not the code's business to swallow


_IMMUTABLE = (str, int, float, complex, bool, bytes, range, type(None), type, caps.Namespace)


def _constant(value: Any, where: str, depth: int = 0, seen: set[int] | None = None) -> Any:
    """A top-level value made read-only. Hooks must answer from their arguments and memo
    alone: a module-level list or a mutable default argument would carry data from one
    episode (or env) to the next, invisibly to save/restore and replay."""
    if depth > 64:
        raise ContractCodeError(f"top-level value {where!r} is nested too deeply")
    seen = set() if seen is None else seen  # ids left as they are: envh's own, or done
    if id(value) in seen:
        return value
    from .types import Action, Block, EnvResponse, FrozenList, Observation  # frozen records

    if isinstance(value, types.BuiltinFunctionType):  # '[].append' carries its list along
        owner = value.__self__
        if owner is None or isinstance(owner, (types.ModuleType, str, bytes, int, float)):
            return value
        raise ContractCodeError(f"top-level {where!r} is a method of a {type(owner).__name__}: "
                                "top-level values must be constants; keep per-episode data in memo")
    if isinstance(value, _IMMUTABLE) or type(value) in (Action, Block, EnvResponse, Observation) \
            or type(value).__name__ == "_Regexp":
        return value
    if isinstance(value, types.FunctionType) and value.__code__.co_filename == FILENAME:
        seen.add(id(value))
        for cell in value.__closure__ or ():  # a function made by a function at top level
            try:
                contents = cell.cell_contents
            except ValueError:  # not bound yet
                continue
            cell.cell_contents = _constant(contents, where, depth + 1, seen)
        if value.__defaults__:
            value.__defaults__ = tuple(_constant(v, f"{where} default", depth + 1, seen) for v in value.__defaults__)
        if value.__kwdefaults__:
            value.__kwdefaults__ = {k: _constant(v, f"{where} default", depth + 1, seen)
                                    for k, v in value.__kwdefaults__.items()}
        return value
    if isinstance(value, dict):
        return types.MappingProxyType({k: _constant(v, where, depth + 1, seen) for k, v in value.items()})
    if isinstance(value, (list, collections.deque)):  # still == the list it was made from
        return FrozenList(_constant(v, where, depth + 1, seen) for v in value)
    if isinstance(value, tuple):
        return type(value)(_constant(v, where, depth + 1, seen) for v in value) if type(value) in (
            tuple, FrozenList) else tuple(_constant(v, where, depth + 1, seen) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, types.MappingProxyType):
        return value
    raise ContractCodeError(
        f"top-level {where!r} is a {type(value).__name__}: top-level values must be constants "
        "(numbers, strings, tuples, lists, dicts, sets, compiled patterns, functions); keep "
        "per-episode data in memo")


def _code_line(exc: BaseException) -> int | None:
    tb, line = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def parse_and_check(source: str, *, max_bytes: int | None = MAX_CODE_BYTES) -> ast.Module:
    """Parse and check untrusted source; raise ``ContractCodeError`` at the first problem."""
    if not isinstance(source, str):
        raise ContractCodeError(f"code must be a string, got {type(source).__name__}")
    size = len(source.encode("utf-8", "surrogatepass"))
    if max_bytes is not None and size > max_bytes:
        raise ContractCodeError(f"the code is larger than {max_bytes:,} bytes ({size:,}); keep contract code "
                                "small, and data out of it")
    try:
        tree = ast.parse(source, FILENAME)
        _Checker().visit(tree)
    except SyntaxError as exc:
        raise ContractCodeError(f"syntax error: {exc.msg}", lineno=exc.lineno,
                                col=(exc.offset or 1) - 1) from None
    except (RecursionError, MemoryError):
        raise ContractCodeError("the code is nested too deeply; split long expressions and deep "
                                "nesting into functions") from None
    return tree


def check_top_level(tree: ast.Module, allowed: set[str]) -> None:
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Assign, ast.AnnAssign)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstrings
        raise _fail(node, "only imports, constants and function definitions may stand at top level")
