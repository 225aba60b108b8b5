"""torch.nn's leaf modules as transformers' BERT holds them: Linear, Embedding, LayerNorm, Dropout
and the activations (ModuleList is in npbert/modeling/module.py).

    self.regressor = Linear(config.hidden_size, 1)              # as torch: a module of its own,
                                                                # joining the model it is assigned to
    self.query = Linear(state, prefix + "query.", H, H)         # the explicit form npbert's modules use

Each is a Module (npbert/modeling/module.py) whose `.weight` / `.bias` are the model's own
Parameter objects, read from the model's dict each time (so after a reload or a resize they are
the current ones).  Each computes with the op of the path that is on (npbert.ops or npbert.fast,
the same numbers) and has the module pair every npbert module has:

    y, cache = linear.forward(x)             (..., in) -> (..., out)
    dx, grads = linear.backward(dy, cache)   grads keyed by the model's full parameter names
    y = linear(x)                            the forward's output alone, as torch

Each prints as torch prints it.  The public package npbert.nn re-exports these classes under
torch.nn's names, beside torch's loss modules.
"""
import numpy as np

from npbert.ops.activations import get_activation
from npbert.ops.linear import linear_input_grad, linear_param_grads
from npbert.settings import PROBABILITY

from .module import ModelState, Module


def _placement(args):
    """(state, prefix, the other arguments): the explicit form `Linear(state, prefix, ...)` of
    npbert's modules, or the torch form `Linear(...)` of a module made on its own (its own
    float32 state, until it is assigned to a model's module: module.py)."""
    if args and isinstance(args[0], ModelState):
        return args[0], args[1], args[2:]
    return ModelState.standalone(), "", args


def _init_standalone(module, std=0.02):
    """A module made on its own has no model to initialise it: draw its parameters now, as
    transformers' _init_weights would (N(0, std) weights, zero biases, unit LayerNorm weights)."""
    state = module.state
    if state.config is not None:
        return
    for full, (shape, init) in state.inits.items():
        if full in state.params:
            continue
        if init == "zeros":
            value = np.zeros(shape, dtype=state.dtype)
        elif init == "ones":
            value = np.ones(shape, dtype=state.dtype)
        else:
            value = state.rng.normal(0.0, std, size=shape).astype(state.dtype)
            if isinstance(init, tuple) and init[1] is not None:
                value[init[1]] = 0
        state.params[full] = value


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
    parameters instead (the MLM decoder: the word embeddings and cls.predictions.bias).
    `grad_name={"weight": name}`: backward() reports that gradient under `name` instead of the
    parameter's (the decoder's dW as "cls.predictions.decoder.weight", one of the word
    embeddings' two uses, which the model adds to the lookup's in one place)."""

    def __init__(self, *args, bias=True, tied_to=None, grad_name=None):
        state, prefix, (in_features, out_features, *rest) = _placement(args)
        bias = rest[0] if rest else bias
        super().__init__(state, prefix)
        if tied_to is None:
            self.add_param("weight", (out_features, in_features), "normal")
            if bias:
                self.add_param("bias", (out_features,), "zeros")
        else:
            self._own = {"weight": tied_to[0], "bias": tied_to[1]}
        self._grad_name = dict(grad_name or {})      # "weight" / "bias" -> the name backward() reports, if not the parameter's
        _init_standalone(self)

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
        """y = x W^T + b: (..., in) -> ((..., out), cache)."""
        bias = self._own.get("bias")
        return self.ops.linear_forward(np.asarray(x), self.state.arrays[self._own["weight"]],
                                             None if bias is None else self.state.arrays[bias])

    def backward(self, dy, cache):
        """In the forward: y = x W^T + b.  dy (..., out) -> (dx = dy W (..., in), {W's name: dW =
        dy^T x, b's name: db = sum of dy}); each of dW and db is skipped when its parameter is
        frozen (model.freeze), and the GEMM with it.  The one frozen-aware linear backward: every
        module's nn.Linear runs it (Module.linear_backward delegates here)."""
        x, weight, has_bias = cache
        wanted = {k: self._grad_name.get(k, full) for k, full in self._own.items() if full not in self.state.frozen}
        grads = {}
        if "weight" in wanted or (has_bias and "bias" in wanted):
            g = linear_param_grads(dy, x, has_bias and "bias" in wanted, weight_grad="weight" in wanted)
            grads = {wanted[k]: v for k, v in g.items()}          # weight (out, in), bias (out,)
        return linear_input_grad(dy, weight, x.shape), grads

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """nn.Embedding(num_embeddings, embedding_dim, padding_idx): ids (B, T) -> rows (B, T, H);
    the weight ~ N(0, initializer_range) with the padding row 0."""

    def __init__(self, *args, padding_idx=None):
        state, prefix, (num_embeddings, embedding_dim, *rest) = _placement(args)
        padding_idx = rest[0] if rest else padding_idx
        super().__init__(state, prefix)
        self.padding_idx = padding_idx
        self.add_param("weight", (num_embeddings, embedding_dim), ("embedding", padding_idx))
        _init_standalone(self)

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
        return self.ops.embedding_forward(ids, self.state.arrays[self._own["weight"]])   # (B, T) -> (B, T, H)

    def backward(self, dout, cache):
        """In the forward: out = W[ids].  dout (B, T, H) -> (None: ids have no gradient,
        {W's name: the rows of dout added into the rows of W they were looked up from, the
        padding row 0}); skipped when frozen."""
        name = self._own["weight"]
        if name in self.state.frozen:
            return None, {}
        return None, {name: self.ops.embedding_backward(dout, cache, self.padding_idx)}

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class LayerNorm(Module):
    """nn.LayerNorm(normalized_shape, eps): weight ones, bias zeros, over the last axis."""

    def __init__(self, *args, eps=1e-5):
        state, prefix, (normalized_shape, *rest) = _placement(args)
        eps = rest[0] if rest else eps
        super().__init__(state, prefix)
        self.normalized_shape, self.eps = (normalized_shape,), eps
        self.add_param("weight", (normalized_shape,), "ones")
        self.add_param("bias", (normalized_shape,), "zeros")
        _init_standalone(self)

    @property
    def weight(self):
        return self.state.params[self._own["weight"]]

    @property
    def bias(self):
        return self.state.params[self._own["bias"]]

    def forward(self, x):
        """y = weight * (x - mean) / sqrt(var + eps) + bias over the last axis: ((..., H), cache)."""
        a = self.state.arrays
        return self.ops.layer_norm_forward(np.asarray(x), a[self._own["weight"]], a[self._own["bias"]],
                                                 self.eps)

    def backward(self, dy, cache):
        """dy (..., H) -> (dx (..., H), {weight's name: dweight, bias's name: dbias})."""
        dx, g = self.ops.layer_norm_backward(dy, cache)
        frozen = self.state.frozen
        return dx, {self._own[k]: v for k, v in g.items() if self._own[k] not in frozen}

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine=True, bias=True"


class Dropout(Module):
    """nn.Dropout(p).  In training, called on its own, it draws the masks its owner draws in the
    model's forward of this step (keyed by the owner's `<prefix>dropout` name: npbert/ops/dropout.py)."""

    SETTINGS = {"p": PROBABILITY}            # `model.dropout.p = 0.2` is checked when set (npbert/settings.py)

    def __init__(self, *args):
        state, prefix, (p, *_) = _placement(args)
        super().__init__(state, prefix)
        self.p = p

    def forward(self, x):
        """In training: y = x * keep / (1 - p), keep ~ Bernoulli(1 - p) keyed by (the step's seed,
        this module's name, the row); in eval y = x.  ((same shape), cache)."""
        rng = self.dropout_rng(site=self.prefix.rstrip(".")) if self.p else None   # its name: <owner's prefix>dropout
        return self.ops.dropout_forward(np.asarray(x), self.p, rng, self.training)

    def backward(self, dy, cache):
        """dx = dy * keep / (1 - p) (the forward's mask); no parameter: (dx, {})."""
        return self.ops.dropout_backward(dy, cache), {}

    def extra_repr(self):
        return f"p={self.p}, inplace=False"


class _Activation(Module):
    """An activation module of transformers' ACT2FN, computing npbert's op of the same name."""

    hidden_act = None

    def forward(self, x):
        return self.ops.get_activation(self.hidden_act)[0](np.asarray(x))

    def backward(self, dy, cache):
        return self.ops.get_activation(self.hidden_act)[1](dy, cache), {}


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
