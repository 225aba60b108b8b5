"""Every test in this folder runs on both paths, the fast one and the reference one
(the `npbert_path` fixture of tests/conftest.py)."""
import pytest


@pytest.fixture(scope="module", autouse=True)
def _on_both_paths(npbert_path):
    yield
