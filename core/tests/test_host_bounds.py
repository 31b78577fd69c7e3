"""The host's own work on a spec is linear and capped (issue: containment v3, item 3):
nothing in a spec file — its YAML, its size, its contract code — can make the process that
reads it spend unbounded CPU or memory before any jail is involved."""

from __future__ import annotations

import ast

import envh
import pytest
from envh import errors
from envh.limits import MAX_CODE_BYTES, MAX_SPEC_BYTES, MAX_SPEC_WEIGHT, data_weight
from envh.sandbox import parse_and_check
from envh.spec import load_spec_data, parse_spec, spec_id

#: 754 bytes that expand to 9**9 strings: each level lists the one above nine times
BILLION_LAUGHS = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)) + \
    "bridge: toy24\nconfig: {x: *i}\n"


def test_a_spec_of_nested_aliases_is_refused_before_it_expands():
    assert len(BILLION_LAUGHS) < 1000
    with pytest.raises(errors.SpecError, match="expands to more than"):
        load_spec_data(BILLION_LAUGHS)
    for call in (parse_spec, spec_id, envh.make):  # every public way in refuses it the same way
        with pytest.raises(errors.SpecError, match="expands to more than"):
            call(BILLION_LAUGHS)


def test_the_same_blow_up_as_python_data_is_refused_too():
    level: object = ["lol"] * 9
    for _ in range(8):
        level = [level] * 9  # 9**9 leaves, 90 distinct objects
    with pytest.raises(errors.SpecError, match="expands to more than"):
        load_spec_data({"bridge": "toy24", "config": {"x": level}})


def test_aliases_that_stay_small_still_load():
    text = "base: &b {target: 24}\nbridge: toy24\nconfig: *b\n"
    assert load_spec_data(text)["config"] == {"target": 24}


def test_a_recursive_alias_is_refused():
    with pytest.raises(errors.SpecError, match="refers to itself"):
        load_spec_data("bridge: toy24\nconfig: &c {x: *c}\n")
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(errors.SpecError, match="refers to itself"):
        load_spec_data({"bridge": "toy24", "config": {"x": loop}})


def test_deep_nesting_is_a_spec_error_not_a_crash():
    with pytest.raises(errors.SpecError):
        load_spec_data("bridge: toy24\nconfig: {x: " + "[" * 100_000 + "]" * 100_000 + "}\n")


def test_a_spec_over_the_size_limit_is_refused_before_parsing(tmp_path):
    big = "bridge: toy24\n" + "#" * MAX_SPEC_BYTES + "\n"
    with pytest.raises(errors.SpecError, match="larger than"):
        load_spec_data(big)
    path = tmp_path / "big.yaml"
    path.write_text(big)
    with pytest.raises(errors.SpecError, match="larger than"):
        load_spec_data(str(path))


def test_weight_counts_every_expanded_node_and_character():
    shared = "x" * 100
    assert data_weight({"a": [shared, shared]}) == data_weight({"a": ["x" * 100, "y" * 100]})
    assert data_weight([[1] * 10] * 10) > 100
    assert data_weight({"bridge": "toy24"}) < MAX_SPEC_WEIGHT


def test_contract_code_over_the_size_limit_is_refused():
    code = "def filter_action(action, state, memo):\n    return None\n" + "# pad\n" * (MAX_CODE_BYTES // 6 + 1)
    with pytest.raises(errors.ContractCodeError, match="larger than"):
        parse_and_check(code)
    spec = {"bridge": "toy24", "layers": [{"kind": "contract", "code": code}]}
    with pytest.raises(errors.EnvhError, match="larger than"):
        envh.make(spec, trust="untrusted")


def _steps(monkeypatch, fn, *args) -> int:
    """How many AST nodes ``fn`` steps through (every ``ast.iter_child_nodes`` and
    ``ast.iter_fields`` call: what ``ast.walk`` and ``NodeVisitor`` do per node): a
    deterministic measure of a checker's work, without a profiler."""
    count = [0]
    for name in ("iter_child_nodes", "iter_fields"):
        real = getattr(ast, name)

        def counted(node, _real=real):
            count[0] += 1
            return _real(node)

        monkeypatch.setattr(ast, name, counted)
    try:
        fn(*args)
    except errors.ContractCodeError:
        pass
    finally:
        monkeypatch.undo()
    return count[0]


ADVERSARIAL = {
    # one statement of generator lambdas in 'finally': each yield used to walk the statement again
    "finally-lambdas": lambda n: "try:\n    pass\nfinally:\n    fs = (" + "lambda: (yield), " * n + ")\n",
    # one block of loops in 'finally', a break in each
    "finally-loops": lambda n: "try:\n    pass\nfinally:\n    if y:\n" + "".join(
        "        for x in y:\n            break\n" for _ in range(n)),
    # try/finally nested in 'finally' blocks, each block's jumps checked again by every outer one
    "nested-finally": lambda n: "".join(" " * (4 * i) + "try:\n" + " " * (4 * i + 4) + "pass\n" + " " * (4 * i)
                                        + "finally:\n" + " " * (4 * i + 4) + "g = (" + "lambda: (yield), " * (n // 60)
                                        + ")\n" for i in range(60)) + " " * 240 + "pass\n",
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_the_static_check_is_linear_in_the_code(name, monkeypatch):
    """Work per AST node stays bounded as the code grows ~8x (quadratic work grows ~64x)."""
    small, large = ADVERSARIAL[name](150), ADVERSARIAL[name](1200)
    per_node = []
    for code in (small, large):
        nodes = sum(1 for _ in ast.walk(ast.parse(code)))
        per_node.append(_steps(monkeypatch, parse_and_check, code) / nodes)
    assert per_node[1] < 1.2 * per_node[0] + 0.5, per_node
    assert per_node[1] < 4, per_node


def test_jumps_out_of_finally_are_still_refused():
    for body in ("    return 1\n", "    yield 1\n", "    for x in y:\n        pass\n    else:\n        break\n"):
        code = "def f(y):\n  for z in y:\n    try:\n        pass\n    finally:\n" + \
            "".join("    " + line + "\n" for line in body.splitlines())
        with pytest.raises(errors.ContractCodeError, match="inside 'finally'"):
            parse_and_check(code)
    fine = ("def f(y):\n    try:\n        pass\n    finally:\n        g = lambda: (yield)\n"
            "        for x in y:\n            break\n        def h():\n            return 1\n")
    parse_and_check(fine)
