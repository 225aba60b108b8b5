"""npbert.explain's page is three package-data files (page.html, page.css, page.js) that a
non-editable install ships and importlib.resources reads; every placeholder of page.html is filled."""
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import resources

import pytest

from npbert.explain import page

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ("page.html", "page.css", "page.js")


def test_the_page_files_are_package_data():
    root = resources.files("npbert.explain")
    for name in FILES:
        assert root.joinpath(name).is_file(), name
    assert 'id="npbert-status"' in page.package_file("page.html")
    assert "npbert-status" in page.package_file("page.js") and ".stage" in page.package_file("page.css")


def test_every_placeholder_is_filled(tmp_path):
    """render_page fills each $name of page.html; a page left with one would show it."""
    import numpy as np

    from npbert.explain import LookupTokenizer, random_model, write_page
    model = random_model(seed=1, dtype=np.float64)
    path = tmp_path / "p.html"
    write_page(str(path), model, LookupTokenizer(), "a dog")
    text = path.read_text(encoding="utf-8")
    template = page.package_file("page.html")
    names = set(re.findall(r"\$\{(\w+)\}", template))
    assert {"data", "script", "style", "loss"} <= names
    assert not re.search(r"\$\{\w+\}", text.split('<script type="application/json"')[0])
    assert page.package_file("page.js").strip() in text and page.package_file("page.css").strip() in text


def test_a_wheel_ships_the_page_files(tmp_path):
    """`pip wheel` (not editable) of a copy of the project: the wheel holds the three files."""
    pytest.importorskip("setuptools")
    source = tmp_path / "src"                     # a copy: building in the checkout would leave build/ there
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), source / name)
    for package in ("npbert", "weights_tools"):
        shutil.copytree(os.path.join(REPO, package), source / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(tmp_path / "wheel"), str(source)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("npbert-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"npbert/explain/{name}" for name in FILES} <= names
