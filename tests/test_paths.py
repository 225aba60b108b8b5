"""npbert.get_path / set_path / using_path and NPBERT_PATH: the switch between the reference
and the fast path (what each path computes is tested beside the ops and modules)."""
import os
import subprocess
import sys

import pytest

import npbert


def test_set_path_returns_the_previous_path_and_using_path_restores_it():
    before = npbert.get_path()
    try:
        assert npbert.set_path("reference") == before
        assert npbert.get_path() == "reference"
        with npbert.using_path("fast"):
            assert npbert.get_path() == "fast"
        assert npbert.get_path() == "reference"
    finally:
        npbert.set_path(before)


@pytest.mark.parametrize("bad", ["Reference", "slow", "", None, 1])
def test_unknown_paths_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="'fast', 'reference'"):
        npbert.set_path(bad)


def _path_in_subprocess(value):
    env = {k: v for k, v in os.environ.items() if k != "NPBERT_PATH"}
    if value is not None:
        env["NPBERT_PATH"] = value
    return subprocess.run([sys.executable, "-c", "import npbert; print(npbert.get_path())"],
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value,expected", [(None, "fast"), ("reference", "reference"),
                                            ("fast", "fast"), (" Reference ", "reference")])
def test_the_environment_variable_chooses_the_path(value, expected):
    result = _path_in_subprocess(value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_a_bad_environment_variable_is_an_error_naming_it():
    result = _path_in_subprocess("turbo")
    assert result.returncode != 0
    assert "NPBERT_PATH" in result.stderr and "'turbo'" in result.stderr
