"""torch.nn.Module / transformers idioms on an npbert model: what a tutorial reader types.

    model.parameters()                 the arrays, as named_parameters() without names
    sum(p.size for p in model.parameters())     the tutorials' `numel()` loop
    model.named_modules()              ("", model), ("bert", ...), ("bert.embeddings", ...), ...
    print(model)                       the module tree in torch's layout
    model.get_input_embeddings()       the word embedding table (V, H), as an Embedding view
    model.get_output_embeddings()      the MLM decoder (tied to it) as a Linear view, or None
    model.resize_token_embeddings(n)   V -> n rows (and the MLM bias), config.vocab_size = n

npbert's modules own no arrays: every parameter lives in the model's one dict
`model.state.params`.  These methods read that dict; `resize_token_embeddings` replaces the
(V, H) array in it by a new (n, H) array (an optimizer built before holds the old array: build
it again after resizing).
"""
import numpy as np

from npbert.ops.embedding import embedding_forward
from npbert.ops.linear import linear_forward

from .embeddings import _as_int_array, _check_range
from .module import _children, _named_submodules, _tree


class Embedding:
    """A view of one embedding table of the model's dict, as torch's nn.Embedding:
    `.weight` (num_embeddings, embedding_dim) is read from the dict each time, so it is
    always the model's current array; calling it looks ids up: (B, T) -> (B, T, H)."""

    def __init__(self, params, name, padding_idx=None):
        self._params, self.name, self.padding_idx = params, name, padding_idx

    @property
    def weight(self):
        return self._params[self.name]

    @property
    def num_embeddings(self):
        return self.weight.shape[0]

    @property
    def embedding_dim(self):
        return self.weight.shape[1]

    def __call__(self, input_ids):
        ids = _as_int_array("input_ids", input_ids)
        _check_range("input_ids", ids, self.num_embeddings, f"the rows of {self.name}")   # torch: IndexError too
        return embedding_forward(ids, self.weight)[0]              # (B, T) -> (B, T, H)

    def __repr__(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"Embedding({self.num_embeddings}, {self.embedding_dim}{pad})"


class Linear:
    """A view of a linear layer whose weight (out, in) and bias (out,) live in the model's dict,
    as torch's nn.Linear: `.weight` and `.bias` are read from the dict each time; calling it
    computes x W^T + b: (..., in) -> (..., out)."""

    def __init__(self, params, weight_name, bias_name=None):
        self._params, self.weight_name, self.bias_name = params, weight_name, bias_name

    @property
    def weight(self):
        return self._params[self.weight_name]

    @property
    def bias(self):
        return None if self.bias_name is None else self._params[self.bias_name]

    @property
    def out_features(self):
        return self.weight.shape[0]

    @property
    def in_features(self):
        return self.weight.shape[1]

    def __call__(self, x):
        return linear_forward(np.asarray(x), self.weight, self.bias)[0]   # (..., in) -> (..., out)

    def __repr__(self):
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None})"


class TorchModuleAPI:
    """Mixed into BertPreTrainedModel: torch's and transformers' module idioms."""

    def parameters(self):
        """The parameter arrays in named_parameters() order (a tied weight once), as torch's
        `parameters()`: `sum(p.size for p in model.parameters())` is the parameter count."""
        return iter(self.state.params.values())

    def named_children(self):
        """(name, submodule) of the direct children, as torch."""
        return iter(list(_children(self)))

    def children(self):
        return (m for _, m in self.named_children())

    def named_modules(self, prefix=""):
        """(qualified name, module) for this model and every submodule, depth first, as torch
        ("" for the model itself, then "bert", "bert.embeddings", "bert.encoder.layer.0", ...).
        npbert's modules are the HF classes that hold parameters (BertEmbeddings, BertSelfAttention,
        ...); nn.Linear / nn.LayerNorm / nn.Dropout are not modules here but entries of the dict."""
        yield prefix, self
        yield from _named_submodules(self, prefix)

    def modules(self):
        return (m for _, m in self.named_modules())

    def __repr__(self):
        """The module tree in torch's `print(model)` layout, leaves (Linear, Embedding,
        LayerNorm) written from the parameter shapes; dropout and activations are not shown."""
        return _tree(self, dict(self._tied_aliases))

    # ---- input embeddings ---------------------------------------------------------------
    def _word_embeddings_name(self):
        prefix = getattr(getattr(self, "bert", self), "prefix", "")
        return prefix + "embeddings.word_embeddings.weight"

    def get_input_embeddings(self):
        """The word embeddings (V, H) as an Embedding view: `.weight` is the model's array."""
        return Embedding(self.state.params, self._word_embeddings_name(), self.config.pad_token_id)

    def get_output_embeddings(self):
        """The MLM decoder (V, H) + bias (V,) as a Linear view, or None for a model without an LM
        head (as transformers).  Its weight is the word embeddings' array: the two are tied."""
        aliases = dict(getattr(self, "_tied_aliases", {}))
        weight = next((aliases[a] for a in aliases if a.endswith("predictions.decoder.weight")), None)
        if weight is None:
            return None
        bias = next((aliases[a] for a in aliases if a.endswith("predictions.decoder.bias")), None)
        return Linear(self.state.params, weight, bias)

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """Resize the word embeddings (V, H) -> (n, H), as transformers: rows [0, min(V, n)) are
        kept; new rows, with `mean_resizing` (transformers' default), are drawn from a normal
        with the old rows' mean and 1e-9 times their covariance, else from N(0, initializer_range).
        The MLM decoder (tied) follows; its bias (V,) keeps its entries and new ones get the old
        mean (or 0).  `config.vocab_size` becomes n.  Returns get_input_embeddings().

        The model's dict stays the one source of truth: the table (and bias) are NEW arrays in
        it, so an optimizer built before holds the old ones: build the optimizer after resizing."""
        name = self._word_embeddings_name()
        old = self.state.params[name]
        V, H = old.shape
        n = V if new_num_tokens is None else int(new_num_tokens)
        if pad_to_multiple_of is not None:
            n = -(-n // int(pad_to_multiple_of)) * int(pad_to_multiple_of)       # round up
        if n <= 0:
            raise ValueError(f"resize_token_embeddings: new_num_tokens must be positive, got {n}")
        if n == V:
            return self.get_input_embeddings()
        pad = self.config.pad_token_id
        if pad is not None and pad >= n:
            raise ValueError(f"resize_token_embeddings({n}): pad_token_id={pad} would fall outside the table")
        rng = getattr(self, "_init_rng", None) or np.random.default_rng(0)
        new = np.empty((n, H), dtype=old.dtype)
        keep = min(V, n)
        new[:keep] = old[:keep]
        if n > V:
            if mean_resizing:
                x = old.astype(np.float64)
                mean = x.mean(axis=0)                                            # (H,)
                cov = (x - mean).T @ (x - mean) / V                              # (H, H)
                new[V:] = rng.multivariate_normal(mean, 1e-9 * cov, size=n - V, method="eigh")
            else:
                new[V:] = rng.normal(0.0, self.config.initializer_range, size=(n - V, H))
        self.state.params[name] = new                                            # same key: order kept
        self.state.inits[name] = ((n, H), self.state.inits[name][1])
        for bias_name in [k for k in self.state.params if k.endswith("predictions.bias")]:
            b = self.state.params[bias_name]
            nb = np.empty((n,), dtype=b.dtype)
            nb[:keep] = b[:keep]
            nb[keep:] = b.mean() if mean_resizing else 0.0
            self.state.params[bias_name] = nb
            self.state.inits[bias_name] = ((n,), self.state.inits[bias_name][1])
        self.config.vocab_size = n
        self._cache = None                     # a forward before the resize cannot be differentiated now
        return self.get_input_embeddings()
