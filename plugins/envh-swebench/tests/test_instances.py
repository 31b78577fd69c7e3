"""Loading instances in SWE-bench's schema from every supported source (no Docker)."""

from __future__ import annotations

import json

import pytest
from envh import errors
from envh_swebench.instances import (
    Instance,
    created_files,
    default_image,
    host_arch,
    load_instances,
    patched_files,
)
from envh_swebench.state import is_test_command


@pytest.fixture
def row(instances_file):
    return json.loads(instances_file.read_text())[0]


def test_json_jsonl_parquet_and_rows_agree(tmp_path, row):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    second = {**row, "instance_id": "envh__mathx-2"}
    (tmp_path / "i.jsonl").write_text("\n".join(json.dumps(r) for r in (row, second)) + "\n")
    pq.write_table(pa.Table.from_pylist([row, second]), tmp_path / "i.parquet")
    (tmp_path / "one.json").write_text(json.dumps(row))
    sources = [tmp_path / "i.jsonl", str(tmp_path / "i.parquet"), [row, second]]
    loaded = [load_instances(s) for s in sources]
    assert all(sorted(x) == ["envh__mathx-1", "envh__mathx-2"] for x in loaded)
    assert loaded[0] == loaded[1] == loaded[2]
    assert list(load_instances(tmp_path / "one.json")) == ["envh__mathx-1"]


def test_swebench_fields(row, instances_file):
    inst = load_instances(str(instances_file))["envh__mathx-1"]
    assert isinstance(inst, Instance)
    assert inst.fail_to_pass == ["tests/test_stats.py::test_median_even"]  # parsed from JSON text
    assert len(inst.pass_to_pass) == 3
    assert inst.image == f"sweb.eval.{host_arch()}.envh__mathx-1:latest"
    assert Instance.from_row({**row, "image": "mine:1"}).image == "mine:1"


def test_default_image_names_follow_swebench():
    assert default_image("Django__Django-11099") == f"sweb.eval.{host_arch()}.django__django-11099:latest"
    assert default_image("django__django-11099", namespace="swebench") == \
        f"swebench/sweb.eval.{host_arch()}.django_1776_django-11099:latest"


def test_errors_name_the_problem(tmp_path, row):
    with pytest.raises(errors.SpecError, match="lacks field.*FAIL_TO_PASS"):
        load_instances([{k: v for k, v in row.items() if k != "FAIL_TO_PASS"}])
    with pytest.raises(errors.SpecError, match="Duplicate"):
        load_instances([row, row])
    with pytest.raises(errors.SpecError, match="does not exist"):
        load_instances(tmp_path / "absent.json")


def test_instance_file_formats(tmp_path, row):
    import gzip

    second = {**row, "instance_id": "envh__mathx-2"}
    lines = "\n".join(json.dumps(r) for r in (row, second)) + "\n"
    (tmp_path / "lines.json").write_text(lines)  # JSON Lines saved as .json
    with gzip.open(tmp_path / "i.jsonl.gz", "wt") as fh:
        fh.write(lines)
    with gzip.open(tmp_path / "i.json.gz", "wt") as fh:
        json.dump([row, second], fh)
    (tmp_path / "keyed.json").write_text(json.dumps({r["instance_id"]: {k: v for k, v in r.items() if k != "instance_id"}
                                                     for r in (row, second)}))
    literal = {**row, "FAIL_TO_PASS": "['tests/test_stats.py::test_median_even']"}
    (tmp_path / "literal.json").write_text(json.dumps([literal]))
    for name in ("lines.json", "i.jsonl.gz", "i.json.gz", "keyed.json"):
        assert sorted(load_instances(tmp_path / name)) == ["envh__mathx-1", "envh__mathx-2"], name
    assert load_instances(tmp_path / "literal.json")["envh__mathx-1"].fail_to_pass == \
        ["tests/test_stats.py::test_median_even"]


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.json", "", r"empty\.json is empty"),
    ("blank.jsonl", "\n\n", r"blank\.jsonl is empty"),
    ("broken.jsonl", '{"instance_id": "a"}\n{oops\n', r"broken\.jsonl line 2 is not JSON"),
    ("broken.json", "[{", r"broken\.json is not JSON"),
    ("scalar.json", "42", r"scalar\.json holds a int"),
    ("list_of_lists.json", "[[1, 2]]", r"list_of_lists\.json row 0 is a list"),
    ("keyed_mismatch.json", '{"a": {"instance_id": "b"}}', r"entry 'a' holds instance_id 'b'"),
    ("empty_list.json", "[]", r"empty_list\.json: no rows"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, r"deep\.json nests its JSON too deeply"),
    ("deep.jsonl", "[" * 100_000 + "]" * 100_000, r"deep\.jsonl line 1 nests its JSON too deeply"),
])
def test_bad_instance_files_name_the_file_and_row(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(errors.SpecError, match=message):
        load_instances(tmp_path / name)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("FAIL_TO_PASS", "not a list [", r"row 0 \('envh__mathx-1'\): field FAIL_TO_PASS is neither"),
    ("PASS_TO_PASS", "{'a': 1}", "field PASS_TO_PASS must be a list of test names"),
    ("FAIL_TO_PASS", [1, 2], "field FAIL_TO_PASS must be a list of test names"),
    ("FAIL_TO_PASS", "[" * 100_000 + "]" * 100_000, "field FAIL_TO_PASS nests too deeply"),
    ("PASS_TO_PASS", "(" * 100_000, "field PASS_TO_PASS is neither"),
    ("instance_id", "../../etc", "instance_id '../../etc' may only hold"),
    ("instance_id", 7, "field instance_id must be a non-empty string"),
    ("base_commit", "", "field base_commit must be a non-empty string"),
    ("base_commit", "HEAD; rm -rf /", "base_commit 'HEAD; rm -rf /' is not a commit id"),
    ("base_commit", "$(reboot)", "is not a commit id"),
    ("instance_id", ".hidden", "may only hold"),
    ("test_patch", None, "field test_patch must be a non-empty string"),
    ("eval_script", ["echo"], "field eval_script must be a string"),
])
def test_bad_fields_name_the_row_and_field(row, field, value, message):
    with pytest.raises(errors.SpecError, match=message):
        load_instances([{**row, field: value}])


def test_a_directory_is_not_an_instance_file(tmp_path):
    with pytest.raises(errors.SpecError, match="is not a file"):
        load_instances(tmp_path)


def test_bad_gzip_is_named(tmp_path):
    (tmp_path / "i.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(errors.SpecError, match=r"Could not read SWE-bench instances file .*i\.jsonl\.gz"):
        load_instances(tmp_path / "i.jsonl.gz")


def test_eval_script_shape(row):
    inst = Instance.from_row(row)
    script = inst.eval_script()
    assert patched_files(inst.test_patch) == ["tests/test_stats.py"]
    lines = script.splitlines()
    start = lines.index(": '>>>>> Start Test Output'")
    assert lines[start + 1] == "python3 -m pytest -rA -p no:cacheprovider tests/test_stats.py"
    assert lines[start + 2] == ": '>>>>> End Test Output'"
    given = ": '>>>>> Start Test Output'\necho given\n: '>>>>> End Test Output'\n"
    assert Instance.from_row({**row, "eval_script": given}).eval_script() == given


@pytest.mark.parametrize(("command", "expected"), [
    ("pytest -q", True), ("python -m pytest tests/x.py", True), ("python3 -X dev -m unittest", True),
    ("cd repo && tox -e py311", True), ("./tests/runtests.py admin_views", True),
    ("python manage.py test", True), ("bin/test sympy/core", True),
    ("FOO=1 timeout 60 pytest -x", True), ("timeout -s KILL 60 python3 -m pytest -q", True),
    ("timeout 60 python3 reproduce.py", False), ("make test", True), ("git diff && py.test", True),
    ("cat pytest.ini", False), ("grep -rn tox setup.cfg", False), ("ls tests", False),
    ("test -f setup.py && echo yes", False), ("pip install pytest", False),
    ("python -c 'import pytest'", False), ("python3 reproduce.py", False),
])
def test_recognises_test_commands(command, expected):
    assert is_test_command(command) is expected


def test_instance_test_command_counts():
    assert is_test_command("make -C build check-unit", "make -C build check-unit")
    assert not is_test_command("make -C build", "make -C build check-unit")


@pytest.fixture
def official_row():
    from pathlib import Path
    return json.loads((Path(__file__).parent / "data" / "official_rows.json").read_text())[0]


@pytest.mark.parametrize("field, value", [
    ("log_parser", ["parse_log_pytest"]), ("log_parser", {"a": 1}), ("eval_type", ["pass_and_fail"]),
    ("eval_type", 3), ("test_cmd", ["pytest"]), ("env_setup", ["export A=1"]), ("patch", 5),
    ("version", [1]),
])
def test_optional_fields_of_the_wrong_type_are_named(official_row, field, value):
    """An unhashable log_parser/eval_type crashed with TypeError; a list test_cmd or patch
    was turned into its repr and run or applied."""
    with pytest.raises(errors.SpecError, match=f"field {field} must be a string"):
        load_instances([{**official_row, field: value}])
    assert load_instances([{**official_row, "version": 3.0}])  # datasets' numeric versions load


def test_a_key_given_twice_is_refused_not_silently_replaced(tmp_path, official_row):
    """json keeps the last of two equal keys: a second row under one id, or a second
    `patch` field, would replace the first without a word."""
    body = {k: v for k, v in official_row.items() if k != "instance_id"}
    keyed = tmp_path / "keyed.json"
    keyed.write_text(f'{{"a": {json.dumps({**body, "patch": "one"})}, "a": {json.dumps(body)}}}')
    field = tmp_path / "field.jsonl"
    field.write_text(json.dumps(official_row)[:-1] + ', "patch": "second"}\n')
    for path, key in ((keyed, "'a'"), (field, "'patch'")):
        with pytest.raises(errors.SpecError, match=f"names key {key} twice"):
            load_instances(path)


def test_a_byte_order_mark_is_accepted(tmp_path, official_row):
    for name, text in (("bom.json", json.dumps([official_row])), ("bom.jsonl", json.dumps(official_row) + "\n")):
        (tmp_path / name).write_text("\ufeff" + text, encoding="utf-8")
        assert list(load_instances(tmp_path / name)) == [official_row["instance_id"]]


def test_tasks_carry_their_repository_and_the_cli_filters_by_it(tmp_path):
    """Users stratify SWE-bench by repository: list_tasks gives it as the task's group,
    `envh tasks` prints it and filters on it, and an unknown group lists the real ones."""
    from pathlib import Path

    from click.testing import CliRunner
    from envh.cli import cli
    from envh_swebench.bridge import SWEBenchEnv

    rows = Path(__file__).parent / "data" / "official_rows.json"
    env = SWEBenchEnv(str(rows))
    groups = {t.instance_id: t.group for t in env.list_tasks()}
    assert groups == {"django__django-11099": "django/django", "psf__requests-5414": "psf/requests",
                      "sympy__sympy-21171": "sympy/sympy", "gin-gonic__gin-3741": "gin-gonic/gin"}
    config = json.dumps({"instances": str(rows)})
    out = CliRunner().invoke(cli, ["tasks", "swebench", "--config", config])
    assert out.exit_code == 0, out.output
    assert "test\tdjango__django-11099\tdjango/django" in out.output.splitlines()
    only = CliRunner().invoke(cli, ["tasks", "swebench", "--config", config, "--group", "sympy/sympy"])
    assert only.exit_code == 0 and only.output.splitlines() == ["test\tsympy__sympy-21171\tsympy/sympy"]
    typo = CliRunner().invoke(cli, ["tasks", "swebench", "--config", config, "--group", "sympy"])
    assert typo.exit_code != 0 and "no task is in group 'sympy'" in typo.output and "sympy/sympy" in typo.output


# As `git diff` writes them: a blank in a name is left as is (with a tab after the name on
# `+++`); a quote, a tab or a non-ASCII byte makes git quote the name, C style.
QUOTED_PATHS_DIFF = """\
diff --git "a/tests/q\\"t.py" "b/tests/q\\"t.py"
new file mode 100644
--- /dev/null
+++ "b/tests/q\\"t.py"
@@ -0,0 +1 @@
+b
diff --git a/tests/sp ace.py b/tests/sp ace.py
new file mode 100644
--- /dev/null
+++ b/tests/sp ace.py\t
@@ -0,0 +1 @@
+a
diff --git "a/tests/\\303\\274 t.py" "b/tests/\\303\\274 t.py"
index 1111111..2222222 100644
--- "a/tests/\\303\\274 t.py"
+++ "b/tests/\\303\\274 t.py"
@@ -1 +1 @@
-d
+e
diff --git a/tests/old name.py b/tests/new name.py
similarity 90%
rename from tests/old name.py
rename to tests/new name.py
"""


def test_diff_headers_with_quoted_and_blank_paths():
    """`\\S+` read `tests/sp` for a name with a blank and missed quoted names, so the eval
    script reset and ran the wrong paths and created files were not found."""
    assert patched_files(QUOTED_PATHS_DIFF) == ['tests/q"t.py', "tests/sp ace.py", "tests/\u00fc t.py",
                                               "tests/new name.py"]
    assert created_files(QUOTED_PATHS_DIFF) == ['tests/q"t.py', "tests/sp ace.py"]
