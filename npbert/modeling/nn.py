"""torch.nn's leaf modules as transformers' BERT holds them: Linear, Embedding, LayerNorm, Dropout
and the activations (ModuleList is in npbert/modeling/module.py).

    self.query = Linear(state, prefix + "query.", H, H)          # transformers: nn.Linear(H, H)

Each is a Module (npbert/modeling/module.py) whose `.weight` / `.bias` are the model's own
Parameter objects, read from the model's dict each time (so after a reload or a resize they are
the current ones).  Calling one computes with the reference op (npbert/ops): `pooler.dense(x)`,
`pooler.activation(x)`, `embeddings.word_embeddings(ids)`.  Each prints as torch prints it.

The modules that own these leaves still compute their own forward and backward from the
parameters by name (Module.p); the leaves are how a reader reaches a layer and its weights, as in
torch (`bert.encoder.layer[0].attention.self.query.weight`).
"""
import numpy as np

from npbert.ops.activations import get_activation
from npbert.ops.dropout import DropoutKey, dropout_forward
from npbert.ops.embedding import embedding_forward
from npbert.ops.layer_norm import layer_norm_forward
from npbert.ops.linear import linear_forward

from .module import Module


def as_int_array(name, value):
    a = np.asarray(value)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def check_range(name, ids, high, what):
    if ids.size and (ids.min() < 0 or ids.max() >= high):
        bad = ids[(ids < 0) | (ids >= high)]
        raise IndexError(f"{name} has values outside [0, {high}) ({what}): e.g. {bad.ravel()[:5].tolist()}")


class Linear(Module):
    """nn.Linear(in_features, out_features, bias): y = x W^T + b, W (out, in) ~ N(0, initializer_range),
    b (out,) zeros.  `tied_to=(weight_name, bias_name)`: registers nothing and reads those two
    parameters instead (the MLM decoder: the word embeddings and cls.predictions.bias)."""

    def __init__(self, state, prefix, in_features, out_features, bias=True, tied_to=None):
        super().__init__(state, prefix)
        if tied_to is None:
            self.add_param("weight", (out_features, in_features), "normal")
            if bias:
                self.add_param("bias", (out_features,), "zeros")
        else:
            self._own = {"weight": tied_to[0], "bias": tied_to[1]}

    @property
    def weight(self):
        return self.state.params[self._own["weight"]]

    @property
    def bias(self):
        name = self._own.get("bias")
        return None if name is None else self.state.params[name]

    @property
    def out_features(self):
        return self.weight.shape[0]

    @property
    def in_features(self):
        return self.weight.shape[1]

    def forward(self, x):
        """(..., in) -> (..., out)."""
        bias = self._own.get("bias")
        return linear_forward(np.asarray(x), self.state.arrays[self._own["weight"]],
                              None if bias is None else self.state.arrays[bias])

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """nn.Embedding(num_embeddings, embedding_dim, padding_idx): ids (B, T) -> rows (B, T, H);
    the weight ~ N(0, initializer_range) with the padding row 0."""

    def __init__(self, state, prefix, num_embeddings, embedding_dim, padding_idx=None):
        super().__init__(state, prefix)
        self.padding_idx = padding_idx
        self.add_param("weight", (num_embeddings, embedding_dim), ("embedding", padding_idx))

    @property
    def weight(self):
        return self.state.params[self._own["weight"]]

    @property
    def num_embeddings(self):
        return self.weight.shape[0]

    @property
    def embedding_dim(self):
        return self.weight.shape[1]

    def forward(self, input_ids):
        ids = as_int_array("input_ids", input_ids)
        check_range("input_ids", ids, self.num_embeddings, f"the rows of {self._own['weight']}")   # torch: IndexError too
        return embedding_forward(ids, self.state.arrays[self._own["weight"]])     # (B, T) -> (B, T, H)

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class LayerNorm(Module):
    """nn.LayerNorm(normalized_shape, eps): weight ones, bias zeros, over the last axis."""

    def __init__(self, state, prefix, normalized_shape, eps):
        super().__init__(state, prefix)
        self.normalized_shape, self.eps = (normalized_shape,), eps
        self.add_param("weight", (normalized_shape,), "ones")
        self.add_param("bias", (normalized_shape,), "zeros")

    @property
    def weight(self):
        return self.state.params[self._own["weight"]]

    @property
    def bias(self):
        return self.state.params[self._own["bias"]]

    def forward(self, x):
        a = self.state.arrays
        return layer_norm_forward(np.asarray(x), a[self._own["weight"]], a[self._own["bias"]], self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine=True, bias=True"


class Dropout(Module):
    """nn.Dropout(p).  In training, called on its own, it draws the masks its owner draws in the
    model's forward of this step (keyed by the owner's `<prefix>dropout` name: npbert/ops/dropout.py)."""

    def __init__(self, state, prefix, p):
        super().__init__(state, prefix)
        self.p = p

    def forward(self, x):
        rng = None
        if self.training and self.p:
            if self.state.step_seed is None:
                self.state.new_step()
            rng = DropoutKey(self.state.step_seed, self.prefix.rstrip("."), self.state.batch_offset)
        return dropout_forward(np.asarray(x), self.p, rng, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"


class _Activation(Module):
    """An activation module of transformers' ACT2FN, computing npbert's op of the same name."""

    hidden_act = None

    def forward(self, x):
        return get_activation(self.hidden_act)[0](np.asarray(x))


# transformers 5's ACT2FN class for each hidden_act name npbert computes (what print(model) shows)
_ACTIVATION_CLASSES = {"gelu": "GELUActivation", "gelu_python": "GELUActivation", "gelu_new": "NewGELUActivation",
                       "gelu_pytorch_tanh": "GELUTanh", "gelu_python_tanh": "GELUTanh",
                       "gelu_fast": "FastGELUActivation", "quick_gelu": "QuickGELUActivation", "relu": "ReLU",
                       "silu": "SiLUActivation", "swish": "SiLU", "sigmoid": "Sigmoid", "tanh": "Tanh",
                       "linear": "LinearActivation"}
_activation_types = {}


def activation(state, prefix, hidden_act):
    """The activation module for `hidden_act` (transformers' ACT2FN[hidden_act]), e.g. GELUActivation()."""
    get_activation(hidden_act)                          # an unknown name fails here, naming the known ones
    name = _ACTIVATION_CLASSES.get(hidden_act, "Activation")
    cls = _activation_types.get((name, hidden_act))
    if cls is None:
        cls = _activation_types[(name, hidden_act)] = type(name, (_Activation,), {"hidden_act": hidden_act})
    return cls(state, prefix)
