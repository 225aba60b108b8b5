"""transformers' and torch's public surface against npbert's, name by name (issue 45).

The names and keywords are read from the installed transformers and torch (surface.py); each is
classified in table.py.  A name transformers or torch adds is a failure until it is classified;
a name marked supported must be in npbert (a keyword in its callable's signature, where the
signature can tell); a refused one must raise one line naming it; docs/compatibility.md is what
compatibility.py writes."""
import warnings

import pytest

pytest.importorskip("torch")
if int(pytest.importorskip("transformers").__version__.split(".")[0]) < 5:
    pytest.skip("the table classifies transformers 5's surface", allow_module_level=True)

import compatibility  # noqa: E402
import counterparts  # noqa: E402
from surface import surface  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compatibility.build(tmp_path_factory.mktemp("conformance"))


def test_every_name_is_classified_once(built):
    found, verdicts, _, _ = built
    assert len(found) > 800                                   # (the names did come from transformers and torch)
    unclassified = sorted(k for k, (v, _) in verdicts.items() if v is None)
    assert not unclassified, f"classify these in tests/conformance/table.py: {unclassified}"


def test_every_rule_is_used():
    """A table entry no name matches is stale (a name transformers dropped, a typo)."""
    import fnmatch

    import table
    keys = list(surface())
    stale = [p for p, _, _ in compatibility.rules()
             if p not in table.DERIVED and not any(fnmatch.fnmatchcase(k, p) for k in keys)]
    assert not stale, f"entries of table.py that match no name: {stale}"


def test_supported_names_are_in_npbert(built, tmp_path):
    found, verdicts, _, _ = built
    objects = counterparts.Objects(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        missing = [k for k, (v, _) in verdicts.items() if v == "supported" and counterparts.present(objects, k) is False]
    assert not missing, f"marked supported, not in npbert: {missing}"


def test_the_named_tests_exist(built):
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for test in {d for v, d in built[1].values() if v == "supported"}:
        path, _, name = test.partition("::")
        assert os.path.isfile(os.path.join(root, path)), test
        if name:
            with open(os.path.join(root, path)) as f:
                assert f"def {name}(" in f.read(), test


def test_refusals_are_raised_in_one_line_naming_the_name(built):
    found, verdicts, messages, _ = built
    bad = []
    for key, message in messages.items():
        m = counterparts.KEY.match(key)
        method_refused = m["name"] and verdicts.get(f"{m['label']}.{m['name']}", (None,))[0] == "refused"
        name = m["name"] if method_refused or not m["kw"] else m["kw"]
        if message is None or "\n" in message or name not in message:
            bad.append((key, message))
    assert not bad, f"refusals npbert does not raise as one line naming them: {bad}"


def test_the_page_is_generated(built):
    with open(compatibility.PAGE) as f:
        assert f.read() == built[3], "run: python tests/conformance/compatibility.py"


def test_the_table_repeats_no_key():
    """A dict literal keeps the last of two equal keys: a test named twice in table.py would lose
    its first list of names without a word."""
    import ast
    import os
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "table.py")) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [ast.unparse(k) for k in node.keys if k is not None]
            repeated = sorted({k for k in keys if keys.count(k) > 1})
            assert not repeated, f"table.py: keys given twice in one dict: {repeated}"
