"""docs/public_api.md: every name its table lists imports from its module, and every name in
those modules' __all__ is listed, so that the page and the code cannot drift apart (through the
reference/fast reorganisation too)."""
import importlib
import os
import re

import pytest

PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                    "public_api.md")


def table():
    """{module: [names]} from the page's table rows `| `module` | `a`, `b`, ... |`."""
    rows = {}
    for line in open(PAGE, encoding="utf-8"):
        m = re.match(r"\|\s*`(npbert[\w.]*)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = re.findall(r"`([\w.]+)`", m.group(2))
    return rows


TABLE = table()
NAMES = [(module, name) for module, names in TABLE.items() for name in names if "." not in name]


def test_the_table_lists_the_modules_the_issue_names():
    assert {"npbert", "npbert.testing", "npbert.functional", "npbert.gradcheck", "npbert.tokenization",
            "npbert.layers"} <= set(TABLE)
    assert len(NAMES) > 80


@pytest.mark.parametrize("module,name", NAMES, ids=[f"{m}.{n}" for m, n in NAMES])
def test_each_listed_name_imports(module, name):
    if module == "npbert.testing":
        pytest.importorskip("hypothesis")
    mod = importlib.import_module(module)
    assert hasattr(mod, name), f"{module} has no {name}, which docs/public_api.md lists"
    exec(f"from {module} import {name}", {})


def test_testing_reexports_the_layers():
    import npbert.layers
    import npbert.testing
    listed = TABLE["npbert.testing"]
    assert "npbert.layers" in listed                       # "and the names of `npbert.layers`"
    for name in TABLE["npbert.layers"]:
        assert getattr(npbert.testing, name) is getattr(npbert.layers, name)


@pytest.mark.parametrize("module", sorted(TABLE))
def test_every_name_in_all_is_listed(module):
    mod = importlib.import_module(module)
    exported = set(getattr(mod, "__all__", ()))
    listed = set(TABLE[module]) | (set(TABLE["npbert.layers"]) if module == "npbert.testing" else set())
    assert exported, f"{module} has no __all__"
    assert exported <= listed, f"{module}.__all__ has names docs/public_api.md does not list: {exported - listed}"
