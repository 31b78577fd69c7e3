"""Spec errors say where: the file and line of bad YAML, and for contract code both the
line inside the code and the line in the YAML file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import envh
import pytest
from envh import errors

BLOCK = """bridge: toy24
layers:
  - kind: budget
    max_steps: 5
  - kind: contract
    code: |
      def filter_action(action, state, memo):
          return None
      def oops(:
          pass
"""


def test_bad_yaml_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("bridge: toy24\nlayers:\n  - kind: stage\n    actions: [\n")
    with pytest.raises(errors.SpecError) as info:
        envh.parse_spec(path)
    message = str(info.value)
    assert f"Spec {path} is not valid YAML/JSON at line 5, column 1" in message
    assert "<unicode string>" not in message and f"in {path}" in message


def test_inline_bad_yaml_says_inline() -> None:
    with pytest.raises(errors.SpecError, match=r"Spec \(inline spec\) is not valid YAML"):
        envh.parse_spec("bridge: toy24\nlayers: [\n")


@pytest.mark.parametrize(("text", "file_line", "code_line"), [
    (BLOCK, 9, 3),
    ('bridge: toy24\nlayers:\n  - kind: contract\n    code: "def f(:\\n  pass"\n', 4, 1),
])
def test_contract_code_errors_name_the_line_in_the_file(tmp_path: Path, text: str, file_line: int,
                                                         code_line: int) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(errors.ContractCodeError) as info:
        envh.make(path)
    assert info.value.lineno == code_line
    assert f"({path}, line {file_line}; line {code_line} of layers[" in str(info.value)
    proc = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "spec", "check", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"{path}, line {file_line}" in proc.stderr


def test_a_spec_built_from_data_keeps_the_code_line_only() -> None:
    with pytest.raises(errors.ContractCodeError) as info:
        envh.make({"bridge": "toy24", "layers": [{"kind": "contract", "code": "def f(:\n  pass\n"}]})
    assert info.value.lineno == 1 and "layers[" not in str(info.value)


def test_spec_check_runs_a_files_code_in_the_jail(tmp_path: Path) -> None:
    """A spec file may come from anywhere: ``envh spec check`` builds it in the untrusted
    tier, where a memory bomb is a contained error (in-process it would allocate 600 MB)."""
    path = tmp_path / "bomb.yaml"
    path.write_text('bridge: toy24\nlayers:\n  - kind: contract\n    code: |\n'
                    '      BIG = "x".ljust(6 * 10**8)\n'
                    '      def filter_observation(observation, state, memo):\n'
                    '          return observation.text\n')
    proc = subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", "spec", "check", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "MemoryError" in proc.stderr and f"{path}, line 5" in proc.stderr
