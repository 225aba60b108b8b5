"""What a tutorial reader reaches for on a torch module, on npbert's models:

    model.parameters()                   the arrays, in named_parameters() order (a tied weight once),
                                         so sum(p.size for p in model.parameters()) counts as numel does
    model.named_modules()                ("", model), ("bert", ...), ("bert.embeddings", ...), ... as torch
    model.get_input_embeddings()         the word embedding table (an Embedding view with .weight)
    model.resize_token_embeddings(n)     a vocabulary of n rows (new rows drawn as at initialisation)
    print(model)                         the module tree as torch prints it
"""
from collections import namedtuple

import numpy as np

Embedding = namedtuple("Embedding", ["weight", "num_embeddings", "embedding_dim", "padding_idx"])


def _children(module):
    """(attribute name, child module) in attribute order; lists of modules as name.0, name.1, ..."""
    from .module import Module
    for name, value in vars(module).items():
        if name.startswith("_") or name in ("state", "config"):
            continue
        if isinstance(value, Module):
            yield name, value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Module) for v in value):
            yield name, _ModuleList(value)


class _ModuleList:
    """How torch prints a ModuleList: (layer): ModuleList((0-11): N x BertLayer(...))."""

    def __init__(self, items):
        self.items = items


def _leaves(module, shapes, config):
    """The leaf layers (Linear, Embedding, LayerNorm) of a module from its own parameter names:
    [(position of its first parameter, line)]."""
    own = {}
    order = {n: i for i, n in enumerate(shapes)}
    children = {name for name, _ in _children(module)}
    for full, shape in shapes.items():
        if not full.startswith(module.prefix):
            continue
        rest = full[len(module.prefix):]
        leaf, _, kind = rest.rpartition(".")
        if not leaf or "." in leaf or leaf in children:
            continue
        own.setdefault(leaf, {"at": order[full]})[kind] = shape
    lines = []
    for leaf, params in own.items():
        w = params.get("weight")
        if leaf.endswith("embeddings"):
            pad = ", padding_idx=%d" % config.pad_token_id if leaf == "word_embeddings" else ""
            line = f"({leaf}): Embedding({w[0]}, {w[1]}{pad})"
        elif "LayerNorm" in leaf:
            line = f"({leaf}): LayerNorm(({w[0]},), eps={config.layer_norm_eps}, elementwise_affine=True)"
        elif w is not None and len(w) == 2:
            line = f"({leaf}): Linear(in_features={w[1]}, out_features={w[0]}, bias={'bias' in params})"
        else:
            continue
        lines.append((params["at"], line))
    return lines


def _first(module, shapes):
    items = module.items[0] if isinstance(module, _ModuleList) else module
    return next((i for i, n in enumerate(shapes) if n.startswith(items.prefix)), len(shapes))


def _tree(module, shapes, config, indent=""):
    """torch's module repr: children (leaf layers and submodules) in the order of their parameters."""
    inner = indent + "  "
    body = [(at, inner + line) for at, line in _leaves(module, shapes, config)]
    for name, child in _children(module):
        if isinstance(child, _ModuleList):
            first = _tree(child.items[0], shapes, config, inner + "  ")
            n = len(child.items)
            text = f"{inner}({name}): ModuleList(\n{inner}  (0-{n - 1}): {n} x {first}\n{inner})"
        else:
            text = f"{inner}({name}): {_tree(child, shapes, config, inner)}"
        body.append((_first(child, shapes), text))
    body = [text for _, text in sorted(body, key=lambda x: x[0])]
    if type(module).__name__ == "BertSelfAttention":
        body.append(f"{inner}(dropout): Dropout(p={module.config.attention_probs_dropout_prob}, inplace=False)")
    if not body:
        return f"{type(module).__name__}()"
    return f"{type(module).__name__}(\n" + "\n".join(body) + f"\n{indent})"


class TorchModuleAPI:
    def parameters(self):
        return iter(self.state.params.values())

    def named_modules(self, prefix=""):
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop(0)
            yield name, module
            kids = []
            for child_name, child in _children(module):
                full = f"{name}.{child_name}" if name else child_name
                if isinstance(child, _ModuleList):
                    kids += [(f"{full}.{i}", m) for i, m in enumerate(child.items)]
                else:
                    kids.append((full, child))
            stack[0:0] = kids

    def _word_embeddings_name(self):
        return next(n for n in self.state.params if n.endswith("embeddings.word_embeddings.weight"))

    def get_input_embeddings(self):
        name = self._word_embeddings_name()
        w = self.state.params[name]
        return Embedding(w, w.shape[0], w.shape[1], self.config.pad_token_id)

    def resize_token_embeddings(self, new_num_tokens):
        """Grow or shrink the vocabulary to `new_num_tokens` rows (the MLM decoder bias with it).
        Kept rows are unchanged; new rows ~ N(0, initializer_range), as at initialisation.
        This makes new arrays: build optimizers after it, not before."""
        n = int(new_num_tokens)
        if n < 1:
            raise ValueError(f"resize_token_embeddings: new_num_tokens must be >= 1, got {new_num_tokens}")
        rng = np.random.default_rng(n)
        for name in list(self.state.params):
            old = self.state.params[name]
            is_table = name == self._word_embeddings_name()
            is_bias = name.endswith("cls.predictions.bias")
            if not (is_table or is_bias):
                continue
            shape = (n,) + old.shape[1:]
            new = (rng.normal(0.0, self.config.initializer_range, size=shape).astype(old.dtype) if is_table
                   else np.zeros(shape, dtype=old.dtype))
            keep = min(n, old.shape[0])
            new[:keep] = old[:keep]
            self.state.params[name] = new
            init_shape, init = self.state.inits[name]
            self.state.inits[name] = (shape, init)
        self.config.vocab_size = n
        return self.get_input_embeddings()

    def __repr__(self):
        shapes = {n: p.shape for n, p in self.state.params.items()}
        return _tree(self, shapes, self.config)
