"""Running a tutorial's listing twice: as written, on transformers + torch, and with only mechanical
edits, on npbert; then comparing what the two computed and printed.

A listing is kept as the tutorial prints it (ORIGINAL).  `edit(ORIGINAL, level)` applies the
mechanical edits of the issue (level "mechanical"):

    imports from transformers          -> from npbert (and transformers.models.bert.* -> npbert)
    import torch                       -> import numpy as np
    return_tensors="pt"                -> return_tensors="np"
    torch tensor constructors          -> NumPy (torch.tensor, torch.LongTensor -> np.array)

and, at level "numpy", also the renames of torch functions to their NumPy (or npbert) twins, which
a NumPy user makes without thinking but which are not constructors:

    torch.argmax(x, dim=d) -> np.argmax(x, axis=d)   torch.softmax / F.softmax -> npbert.functional.softmax
    torch.no_grad()        -> npbert.no_grad()        torch.equal / allclose / matmul / flatten -> np.*
    .numpy() / .detach().cpu() dropped                 x.detach().clone() -> x.copy()
    torch.rand(shape)      -> np.random.rand(*shape)   x.nonzero() on a mask -> np.flatnonzero(x)
    t.to(args.device) dropped (a CPU library has no devices)

A test asserts that the npbert listing IS `edit(ORIGINAL, level)`: the edits above and nothing
else.  Hub names become the local checkpoint directories when a listing runs (`run`), on both
sides alike (the other mechanical edit).  transformers 5 dropped a few 4.x names the tutorials
use (its AdamW): the torch side then runs the replacement transformers 5 documents, named in
`TORCH_SIDE_FIXES`.
"""
import ast
import contextlib
import io
import re

MECHANICAL = [
    (r"from transformers\.models\.bert\.[a-z_]+ import", "from npbert import"),
    (r"from transformers import", "from npbert import"),
    (r"from transformers\.optimization import", "from npbert.optim import"),
    (r"from torch\.optim import", "from npbert.optim import"),
    (r"^import torch$", "import numpy as np"),
    (r"return_tensors *= *(['\"])pt\1", r"return_tensors=\1np\1"),
    (r"torch\.(?:tensor|LongTensor)\(", "np.array("),
]
NUMPY = [
    (r"^import torch\.nn\.functional as F$", "import npbert.functional as F"),
    (r"torch\.argmax\(([^()]*(?:\([^()]*\))?[^()]*?), dim( *= *)", r"np.argmax(\1, axis\2"),
    (r"torch\.argmax\(", "np.argmax("),
    (r"torch\.softmax\(", "F.softmax("),
    (r"torch\.no_grad\(\)", "npbert.no_grad()"),
    (r"torch\.equal\(", "np.array_equal("),
    (r"torch\.allclose\(", "np.allclose("),
    (r"torch\.matmul\(", "np.matmul("),
    (r"torch\.flatten\(([^()]*)\.nonzero\(\)\)", r"np.flatnonzero(\1)"),
    (r"torch\.rand\(([^()]*)\.shape\)", r"np.random.rand(*\1.shape)"),
    (r"\.detach\(\)\.clone\(\)", ".copy()"),
    (r"\.detach\(\)\.cpu\(\)\.numpy\(\)", ""),
    (r"\.numpy\(\)", ""),
    (r"\.to\([\w.]*device\)", ""),
]
# The torch side's replacements for names transformers 5 removed (what its docs say to use instead).
TORCH_SIDE_FIXES = [
    (r"^from transformers import AdamW, ", "from torch.optim import AdamW\nfrom transformers import "),
    (r"^from transformers import AdamW$", "from torch.optim import AdamW"),
]


def edit(original, level="mechanical"):
    """The listing with the edits of `level` ("mechanical", or "numpy": those and the renames)."""
    rules = MECHANICAL + (NUMPY if level == "numpy" else [])
    text = original
    for pattern, replacement in rules:
        text = re.sub(pattern, replacement, text, flags=re.M)
    body = text.lstrip("\n")
    lead = text[:len(text) - len(body)]
    if re.search(r"\bF\.softmax\(", body) and not re.search(r"^import [\w.]+ as F$", body, re.M):
        body = "import npbert.functional as F\n" + body
    if re.search(r"^import npbert$", body, re.M) is None and re.search(r"\bnpbert\.no_grad", body):
        body = "import npbert\n" + body
    if re.search(r"\bnp\.", body) and not re.search(r"^import numpy as np$", body, re.M):
        body = "import numpy as np\n" + body
    return lead + body


def torch_side(original):
    """The listing as the torch side runs it: transformers 5's replacements for removed names."""
    text = original
    for pattern, replacement in TORCH_SIDE_FIXES:
        text = re.sub(pattern, replacement, text, flags=re.M)
    return text


def run(code, hub_names=None, namespace=None):
    """Exec `code` with each hub name (a quoted string literal) replaced by its local directory,
    as a notebook cell: a last line that is an expression is printed (its repr) and kept as `_`.
    Returns (namespace, printed text)."""
    for name, directory in (hub_names or {}).items():
        code = re.sub(r"(['\"])" + re.escape(name) + r"\1", repr(str(directory)), code)
    namespace = dict(namespace or {})
    namespace.setdefault("__name__", "__tutorial__")
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, "<listing>", "exec"), namespace)
        if last is not None:
            namespace["_"] = eval(compile(ast.Expression(last.value), "<listing>", "eval"), namespace)
            if namespace["_"] is not None:                 # as a notebook: None is not shown
                print(repr(namespace["_"]))
    return namespace, out.getvalue()


def as_numpy(value):
    """A torch tensor (or anything array-like) as a NumPy array, for comparing the two sides."""
    import numpy as np
    if hasattr(value, "detach"):
        return value.detach().numpy()
    return np.asarray(value)


def torch_shapes(printed):
    """NumPy's printed shapes written as torch prints them: (1, 384) -> torch.Size([1, 384]),
    (384,) -> torch.Size([384]) (the one difference between the two sides' printed shapes)."""
    printed = re.sub(r"\((\d+),\)", r"torch.Size([\1])", printed)
    return re.sub(r"\((\d+(?:, \d+)+)\)", r"torch.Size([\1])", printed)
