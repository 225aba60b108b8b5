"""The page's data model, one stage at a time: a tensor as the page stores it (float32, base64),
and a stage's row (its module, formula, dims, value, gradient, checks, and links to the line that
computes it and to its docs page).  The keys are the schema of docs/explain.md, "The data block"."""
import base64
import inspect
import os
import re
import urllib.parse

import numpy as np

from npbert import reference

from .heads import output_dims, output_source
from .stages import source_line

# npbert/.. : the repository (docs/ beside npbert/ in a checkout)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(reference.__file__)))


def tensor(x):
    """An array as the page stores it: float32, little-endian, base64 (docs/explain.md)."""
    a = np.ascontiguousarray(x, dtype="<f4")
    return {"dtype": "float32", "shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode("ascii")}


def decode(t):
    """The inverse of tensor(): a numpy float32 array (for scripts reading the page, and the tests)."""
    return np.frombuffer(base64.b64decode(t["b64"]), dtype="<f4").reshape(t["shape"])


def summary(x):
    x = np.asarray(x, dtype=np.float64)
    return {"mean": float(x.mean()), "std": float(x.std()), "min": float(x.min()), "max": float(x.max())}


def href(path, page_dir):
    """A link from the page's folder to `path`: relative when it can be, else a file:// URI."""
    try:
        rel = os.path.relpath(path, page_dir)
    except ValueError:                                   # another drive (Windows)
        return "file://" + urllib.parse.quote(os.path.abspath(path).replace(os.sep, "/"))
    return urllib.parse.quote(rel.replace(os.sep, "/"))


def row(section, layer, key, module, label, formula, dims, value, grad, check_pair, function, line, doc, page_dir):
    """One stage.  function: the function whose file (line `line`) computes it."""
    source = os.path.abspath(inspect.getsourcefile(function))
    return {
        "section": section, "layer": layer, "key": key, "module": module, "label": label,
        "formula": formula, "dims": list(dims), "shape": list(value.shape),
        "value": tensor(value), "summary": summary(value), "grad": tensor(grad), "grad_summary": summary(grad),
        "check": check_pair,
        "source": {"file": os.path.relpath(source, REPO).replace(os.sep, "/"), "line": line,
                   "function": function.__qualname__, "href": f"{href(source, page_dir)}#L{line}"},
        "doc": {"page": f"docs/{doc}", "href": href(os.path.join(REPO, "docs", doc), page_dir)},
    }


def stage_rows(section, table, values, grads, layer, checks_by_key, page_dir):
    """The rows of one section of stages.SECTIONS (layer: its index, else None)."""
    rows = []
    for key, module, label, formula, dims, doc, function, piece in table:
        if layer is not None:
            module = module.replace("{i}", str(layer))
            label = label.replace("[i]", f"[{layer}]").replace("[i+1]", f"[{layer + 1}]")
        rows.append(row(section, layer, key, module, label, formula, dims.split(","), values[key], grads[key],
                        checks_by_key.get(key, {"forward": None, "backward": None}), function,
                        source_line(function, piece), doc, page_dir))
    return rows


def head_rows(head, outputs, grads, check_pair, page_dir):
    """The head's outputs as stages: each linked to the line of the head's forward that computes it."""
    cls = type(head)
    own = sorted({n.split(".")[0] for n in head.state_dict() if not n.startswith(head.base_model_prefix + ".")})
    rows = []
    for name, value in outputs:
        line, code = output_source(cls, name)
        m = re.search(r"self\.([\w.]+)\.forward", code)
        rows.append(row("head", None, name, m.group(1) if m else ", ".join(own), f"{name}  ({cls.__name__})", code,
                        output_dims(head, name, value.shape), value, grads[name], check_pair, cls.forward, line,
                        "heads.md", page_dir))
    return rows


def split_checks(forward, backward):
    """{stage key: {"forward": check or None, "backward": check or None}} (None: nothing to check)."""
    return {k: {"forward": forward.get(k), "backward": backward.get(k)} for k in set(forward) | set(backward)}
