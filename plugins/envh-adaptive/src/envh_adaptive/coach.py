"""The ``coach`` curriculum policy: a user function of the window statistics, run as
untrusted code in the jail (``envh.jail``, the tier contract code runs in).

The code defines ``coach(stats)`` or ``coach(stats, memo)``. ``stats`` is read-only data
(see ``window_stats``); ``memo`` is a dict of JSON data the coach keeps from one window to
the next (saved with the curriculum, so it survives a resume). It returns the parameter
*changes*: ``{name: delta}`` with integer deltas, or ``None`` / ``{}`` to hold. The host
checks every proposal (``check_changes``): known names, integers, ``|delta| ≤ step``, the
result inside the planned range. Anything else — an exception, a timeout, a memory bomb, a
malformed answer — is a ``ContractCodeError``; the curriculum then holds its values and
writes the failure into the audit log. A coach never overrides the kill switch or the
circuit breaker.
"""

from __future__ import annotations

import ast
import json
import weakref
from collections.abc import Mapping
from typing import Any

from envh import errors
from envh.sandbox import check_top_level, parse_and_check

from .params import ParamPlan

FUNCTION = "coach"
ENTRY = "coach_entry"  # the wrapper the jail calls; user code may not use the name
MAX_OPS = 200_000
MAX_MEMO = 64_000  # bytes of JSON
MAX_TIME_LIMIT = 5.0  # seconds; the jail kills a call at twice this plus a grace
# the call the jail makes is ENTRY(state, memo): the window statistics arrive as frozen
# state, and the answer leaves through memo, which crosses the pipe as strict JSON data
_WRAPPER = """

def {entry}(stats, box):
    box["out"] = {call}
"""


def _coach_arity(tree: ast.Module) -> int:
    """How many parameters the code's ``coach`` takes (1 or 2); refuses anything else."""
    for node in ast.walk(tree):
        for ident in (getattr(node, "id", None), getattr(node, "name", None), getattr(node, "arg", None),
                      getattr(node, "asname", None), getattr(node, "attr", None)):
            if ident == ENTRY:
                raise errors.ContractCodeError(f"the name {ENTRY!r} is reserved", lineno=getattr(node, "lineno", None))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if not defs:
        raise errors.ContractCodeError("coach code must define a top-level function coach(stats) "
                                       "or coach(stats, memo)")
    args = defs[-1].args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        raise errors.ContractCodeError("coach takes exactly (stats) or (stats, memo): no defaults, "
                                       "*args or keyword-only parameters", lineno=defs[-1].lineno)
    n = len(args.posonlyargs) + len(args.args)
    if n not in (1, 2):
        raise errors.ContractCodeError(f"coach takes (stats) or (stats, memo), not {n} parameters",
                                       lineno=defs[-1].lineno)
    return n


class Coach:
    """A jailed coach program. ``propose`` runs it on one window's statistics and returns
    the checked changes. It runs in one of its spec's jails (``envh.jail.stack_jail``),
    never in another spec's (a coach built outside ``envh.make`` gets a jail of its own),
    so a hostile coach can break only its own spec's code."""

    def __init__(self, code: str, *, time_limit: float = 0.25, jail: Any = None) -> None:
        if type(time_limit) not in (int, float) or not 0 < time_limit <= MAX_TIME_LIMIT:
            raise errors.SpecError(f"coach time_limit_ms must be in (0, {MAX_TIME_LIMIT * 1000:.0f}]")
        tree = parse_and_check(code)
        check_top_level(tree, {FUNCTION})
        arity = _coach_arity(tree)
        call = f"{FUNCTION}(stats, box['memo'])" if arity == 2 else f"{FUNCTION}(stats)"
        from envh.jail import stack_jail

        self.code, self.time_limit = code, float(time_limit)
        self.memo: dict[str, Any] = {}
        self._jail = jail or stack_jail()
        self._program: int | None = self._jail.load(code + _WRAPPER.format(entry=ENTRY, call=call), (ENTRY,),
                                                     time_limit=self.time_limit, max_ops=MAX_OPS)
        self._unloader = weakref.finalize(self, self._jail.drop, self._program)  # dropped unclosed

    def propose(self, stats: Mapping[str, Any], plans: Mapping[str, ParamPlan],
                values: Mapping[str, int]) -> dict[str, int]:
        """The coach's checked changes for this window; raises ``ContractCodeError``. The
        memo is kept only when the whole proposal is valid."""
        if self._program is None:
            raise errors.ContractCodeError("the coach was closed", hook=FUNCTION)
        _, box = self._jail.call(self._program, ENTRY, [], dict(stats), {"memo": self.memo}, self.time_limit)
        memo = box.get("memo")
        if type(memo) is not dict:
            raise errors.ContractCodeError("memo must stay a dict", hook=FUNCTION)
        try:
            size = len(json.dumps(memo, allow_nan=False))
        except ValueError:  # NaN or Infinity would make the audit log's line something no JSON reader takes
            raise errors.ContractCodeError("memo holds NaN or Infinity, which is not JSON data", hook=FUNCTION) from None
        if size > MAX_MEMO:  # every decision logs it: an unbounded memo would flood the audit log
            raise errors.ContractCodeError(f"memo of {size:,} bytes exceeds the {MAX_MEMO:,} byte limit; keep "
                                           "only the statistics the coach needs", hook=FUNCTION)
        changes = check_changes(box.get("out"), plans, values)
        self.memo = memo
        return changes

    def close(self) -> None:
        if self._program is not None:
            self._unloader.detach()
            self._jail.unload(self._program)
            self._program = None


def check_changes(out: Any, plans: Mapping[str, ParamPlan], values: Mapping[str, int]) -> dict[str, int]:
    """A coach's answer as ``{name: delta}``, all or nothing: every name planned, every
    delta an integer within the parameter's ``step``, every result inside its range."""
    if out is None:
        return {}
    if type(out) is not dict:
        raise errors.ContractCodeError(f"must return a dict of parameter changes or None, got "
                                       f"{type(out).__name__}", hook=FUNCTION)
    changes = {}
    for name, delta in out.items():
        plan = plans.get(name)
        if plan is None:
            raise errors.ContractCodeError(f"changed {str(name)[:80]!r}, which is not a planned parameter; "
                                           f"choose from {', '.join(sorted(plans))}", hook=FUNCTION)
        if type(delta) is not int:
            raise errors.ContractCodeError(f"change of {name!r} must be an integer, got {type(delta).__name__}",
                                           hook=FUNCTION)
        if abs(delta) > plan.step:
            raise errors.ContractCodeError(f"change of {name!r} by {delta} exceeds its step {plan.step}",
                                           hook=FUNCTION)
        if not plan.low <= values[name] + delta <= plan.high:
            raise errors.ContractCodeError(f"would move {name!r} to {values[name] + delta}, outside "
                                           f"[{plan.low}, {plan.high}]", hook=FUNCTION)
        if delta:
            changes[name] = delta
    return changes


def window_stats(cur: Any, rate: float) -> dict[str, Any]:
    """What a coach sees at a window boundary of the curriculum ``cur`` (plain JSON data)."""
    return {"episode": cur.episodes, "rate": rate, "successes": sum(cur.outcomes),
            "window": len(cur.outcomes), "recent_rates": list(cur.rates), "windows_below": cur.below,
            "floor": cur.floor, "ceiling": cur.ceiling, "values": dict(cur.values),
            "params": {n: {"low": p.low, "high": p.high, "step": p.step, "init": p.init, "safe": p.safe,
                           "harder": p.bounds.harder} for n, p in cur.plans.items()}}
