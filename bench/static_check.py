"""Host cost of checking contract code: ``envh.sandbox.parse_and_check`` on adversarial
code against ``ast.parse`` of the same text (the floor: no check can be cheaper than
parsing), at 100 KB.

Classes (each reported): many generator lambdas in one ``finally`` statement, many loops
with ``break`` in one ``finally`` block, ``try/finally`` nested in ``finally`` blocks (each
used to be re-walked), and plain code (many small hook-like functions). The headline
``ratio`` is the worst class's check time over its parse time.

    python bench/static_check.py [--kb 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ast
import json
import time

from envh.sandbox import parse_and_check


def _fill(unit: str, head: str, kb: int) -> str:
    return head + unit * max(1, (kb * 1024 - len(head)) // len(unit))


CLASSES = {
    "finally-lambdas": lambda kb: _fill("lambda: (yield), ", "try:\n    pass\nfinally:\n    fs = (", kb) + ")\n",
    "finally-loops": lambda kb: _fill("        for x in y:\n            break\n", "try:\n    pass\nfinally:\n    if y:\n", kb),
    "nested-finally": lambda kb: "".join(
        " " * (4 * i) + "try:\n" + " " * (4 * i + 4) + "pass\n" + " " * (4 * i) + "finally:\n" + " " * (4 * i + 4)
        + "g = (" + "lambda: (yield), " * (kb * 1024 // 60 // 17) + ")\n" for i in range(60)) + " " * 240 + "pass\n",
    "plain": lambda kb: _fill("def f_{0}(action, state, memo):\n    if state.get('n', 0) > 3:\n        return None\n"
                              "    return action\n".replace("{0}", "x"), "", kb),
}


def _best(fn, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, float] = {}
    worst = 0.0
    for name, make in CLASSES.items():
        code = make(args.kb)
        parse = _best(lambda t: ast.parse(t), code, args.repeat)
        check = _best(lambda t: parse_and_check(t, max_bytes=None), code, args.repeat)
        print(f"{name:16s} {len(code) / 1024:6.0f} KB  parse {parse * 1000:7.1f} ms  check {check * 1000:7.1f} ms  "
              f"check/parse {check / parse:5.2f}")
        out[f"{name}/check_s"], out[f"{name}/ratio"] = round(check, 4), round(check / parse, 3)
        worst = max(worst, check / parse)
    print(json.dumps({"bench": "static_check", "kb": args.kb, **out, "ratio": round(worst, 3)}))


if __name__ == "__main__":
    main()
