"""The docs cannot say that code is somewhere it is not.  Over docs/*.md, docs/read-along/*.md and
README.md (docs/index.md, "Conventions", states the rules for writers):

1. Attributions: a code span, the word `in`, and a code span naming a place,

       `dx += dresidual` in `BertAttention.backward`
       `np.add.at` in `npbert/ops/embedding.py`
       `keep_mask` in `npbert/fast/dropout.py: keep_mask`
       `_sum_tied_decoder_gradient` in `base.py`

   A place is a file (`npbert/...py`, or a bare `name.py` that is one file of the package), a
   file and a name in it (`path.py: name` or `path.py: Class.method`), a class, a method
   (`Class.method`) or a module-level function (`name()` or a bare name defined once in the
   package).  The code must occur in that place's source, compared with runs of whitespace
   collapsed and `...` standing for any text.  (Spans in double backticks are examples, not
   attributions.)  A second span that names no place (e.g.
   "`head_mask` in `output`") is prose, not an attribution, and is not checked.
2. Places: every code span `path: name` names a file that defines that name, and every code span
   that is a path into the repository (npbert/, tests/, docs/, weights_tools/) exists.
"""
import ast
import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")) + glob.glob(os.path.join(REPO, "docs", "read-along", "*.md"))
               + [os.path.join(REPO, "README.md")])
SPAN = r"`([^`\n]+)`"
ATTRIBUTION = re.compile(SPAN + r"\s+in\s+" + SPAN)
PATH_SPAN = re.compile(r"`((?:npbert|tests|docs|weights_tools)/[^`\s:]*)(?::\s*([\w.]+))?`")


def _sources():
    """{relative path: (source text, ast tree)} of every Python file in npbert/."""
    found = {}
    for path in glob.glob(os.path.join(REPO, "npbert", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found[os.path.relpath(path, REPO)] = (text, ast.parse(text))
    return found


SOURCES = _sources()


def _definitions(tree, text):
    """{qualified name: source segment} for the module's classes, functions, methods and
    module-level assignments ("BertAttention", "BertAttention.backward", "ACT2FN", ...)."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = ast.get_source_segment(text, node)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        out[f"{node.name}.{item.name}"] = ast.get_source_segment(text, item)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(target, ast.Name):
                    out[target.id] = ast.get_source_segment(text, node)
    return out


DEFINITIONS = {path: _definitions(tree, text) for path, (text, tree) in SOURCES.items()}


def resolve(place):
    """The source text(s) a place names, or None when the span names no place (prose)."""
    place = place.strip()
    m = re.fullmatch(r"((?:[\w.]+/)*[\w.]+\.py)(?::\s*([\w.]+))?", place)
    if m:
        path, name = m.groups()
        files = [p for p in SOURCES if p == path or (("/" not in path) and os.path.basename(p) == path)]
        assert len(files) == 1, f"`{path}` is not one file of the package (found {files})"
        if name is None:
            return [SOURCES[files[0]][0]]
        assert name in DEFINITIONS[files[0]], f"{files[0]} defines no `{name}`"
        return [DEFINITIONS[files[0]][name]]
    name = place.removesuffix("()")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.\w+)?", name):
        return None
    found = [defs[name] for defs in DEFINITIONS.values() if name in defs]
    if not found:
        if "." in name and name[0].isupper() or place.endswith("()"):
            pytest.fail(f"`{place}`: no such class, method or function in npbert/")
        return None                                            # a plain word in backticks: prose
    return found


def _normalize(code):
    return re.sub(r"\s+", " ", code).strip()


def occurs(code, sources):
    pattern = r"\s*".join(re.escape(part).replace(r"\ ", r"\s+") for part in _normalize(code).split(" ... "))
    pattern = pattern.replace(re.escape("..."), ".*?")
    return any(re.search(pattern, src, re.S) for src in sources)


def _read(page):
    """The page, with ``double-backtick`` spans (code about code, e.g. the convention's own
    example) blanked out."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    return re.sub(r"``.*?``", lambda m: " " * len(m.group(0)), text, flags=re.S)


def attributions():
    found = []
    for page in PAGES:
        text = _read(page)
        for m in ATTRIBUTION.finditer(text):
            line = text[:m.start()].count("\n") + 1
            found.append((os.path.relpath(page, REPO), line, m.group(1), m.group(2)))
    return found


ALL = attributions()


@pytest.mark.parametrize("page,line,code,place", ALL, ids=[f"{a[0]}:{a[1]}" for a in ALL])
def test_attributed_code_occurs_where_the_page_says(page, line, code, place):
    sources = resolve(place)
    if sources is None:
        return
    assert occurs(code, sources), f"{page}:{line}: `{code}` does not occur in `{place}`"


def test_the_pages_attribute_code_and_the_check_can_fail():
    """There are attributions to check, the checker finds real ones and refuses wrong ones."""
    checked = [a for a in ALL if resolve(a[3]) is not None]
    assert len(checked) >= 20
    assert occurs("dx += dresidual", resolve("BertAttention.backward"))
    assert not occurs("dx = dx_q; dx += dx_k; dx += dx_v", resolve("BertSelfAttention.backward"))
    assert occurs("np.add.at", resolve("npbert/ops/embedding.py"))
    assert not occurs("one_hot", resolve("npbert/ops/embedding.py"))
    with pytest.raises(AssertionError, match="not one file"):
        resolve("npbert/modeling/heads.py")                    # the file became a package
    with pytest.raises(pytest.fail.Exception):
        resolve("BertAttention.forwrad")


@pytest.mark.parametrize("page", [os.path.relpath(p, REPO) for p in PAGES])
def test_paths_and_names_the_pages_give_exist(page):
    text = _read(os.path.join(REPO, page))
    for m in PATH_SPAN.finditer(text):
        path, name = m.group(1), m.group(2)
        line = text[:m.start()].count("\n") + 1
        assert os.path.exists(os.path.join(REPO, path.rstrip("/"))), f"{page}:{line}: `{path}` does not exist"
        if name is not None:
            assert path in DEFINITIONS, f"{page}:{line}: `{path}: {name}` names no Python file of npbert"
            assert name in DEFINITIONS[path], f"{page}:{line}: {path} defines no `{name}`"
