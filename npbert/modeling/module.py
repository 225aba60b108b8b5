"""The base of every HF-named module: a prefix into one flat dict of parameters.

A model owns one `dict[str, np.ndarray]` keyed exactly as transformers' `state_dict()`
(`encoder.layer.0.attention.self.query.weight`, ...).  Each module knows its prefix and
reads its parameters from that dict at call time, so loading new weights into the dict
is all it takes to change the model.  Every module has

    forward(...)          -> (outputs..., cache)
    backward(dout, cache) -> (dinput, grads)      grads keyed by full parameter names

Modules never keep activations themselves: the caches are returned, and the model that
ran the forward keeps them until its backward.

A frozen parameter (`model.freeze(...)`, as torch's `requires_grad = False`) gets no gradient:
the backward skips the GEMM or scatter that would compute it (`trainable`, `linear_backward`).
"""
import threading

from npbert.ops.linear import linear_input_grad, linear_param_grads

_thread_rng = threading.local()      # .override: (state, generator) while a thread runs one part of a batch


class ModelState:
    """What every module of one model shares: the parameters, train/eval, the dropout rng."""

    def __init__(self, config, dtype, rng):
        self.config = config
        self.dtype = dtype
        self.params = {}         # name -> np.ndarray, in named_parameters() order
        self.inits = {}          # name -> "normal" | "zeros" | "ones" | ("embedding", padding_idx)
        self.training = False
        self.rng = rng           # np.random.Generator for dropout (see the property)
        self.release_caches = False   # set during a backward that may free each cache once used
        self.frozen = set()           # names of frozen parameters (model.freeze): no gradient computed
        self.need_inputs_embeds_grad = False   # True: compute model.inputs_embeds_grad even when all below is frozen
        self.keep_caches = True       # False in a forward under npbert.no_grad()

    @property
    def rng(self):
        """The generator dropout draws from: the model's, or, in a thread running one part of
        a batch (BertEncoder), that part's own (`part_rng`)."""
        override = getattr(_thread_rng, "override", None)
        if override is not None and override[0] is self:
            return override[1]
        return self._rng

    @rng.setter
    def rng(self, generator):
        self._rng = generator

    def part_rng(self, generator):
        """Context manager: in this thread, dropout draws from `generator` until the block ends."""
        return _PartRng(self, generator)


class _PartRng:
    def __init__(self, state, generator):
        self.state, self.generator = state, generator

    def __enter__(self):
        self.before = getattr(_thread_rng, "override", None)
        _thread_rng.override = (self.state, self.generator)

    def __exit__(self, *exc):
        _thread_rng.override = self.before


class Module:
    def __init__(self, state, prefix):
        self.state = state
        self.config = state.config
        self.prefix = prefix

    # ---- module(...) and print(module), as torch -------------------------------------
    def __call__(self, *args, **kwargs):
        """module(...) as in torch: the forward's outputs without its cache (one output alone,
        several as a tuple), e.g. `model.bert.pooler(h)` or `layer.attention.self(h)` ->
        (context, probs).  For looking inside a model (masks are additive, as the modules
        receive them); gradients come from the model's backward() after the model's forward."""
        out = self.forward(*args, **kwargs)[:-1]
        return out[0] if len(out) == 1 else out

    def __repr__(self):
        from .torch_api import _tree                # (torch_api builds on this module)
        return _tree(self, {})

    # ---- parameters -----------------------------------------------------------------
    def add_param(self, name, shape, init):
        """Register parameter `prefix + name` of `shape`; `init` says how _init_weights fills it."""
        full = self.prefix + name
        if full in self.state.inits:
            raise KeyError(f"parameter {full} registered twice")
        self.state.inits[full] = (tuple(shape), init)

    def add_linear(self, name, in_features, out_features, bias=True):
        """nn.Linear(in, out): `name.weight` (out, in) ~ N(0, initializer_range), `name.bias` zeros."""
        self.add_param(name + ".weight", (out_features, in_features), "normal")
        if bias:
            self.add_param(name + ".bias", (out_features,), "zeros")

    def add_layer_norm(self, name, size):
        """nn.LayerNorm(size): `name.weight` ones, `name.bias` zeros."""
        self.add_param(name + ".weight", (size,), "ones")
        self.add_param(name + ".bias", (size,), "zeros")

    def p(self, name):
        """The parameter `prefix + name` as it is now in the model's dict."""
        return self.state.params[self.prefix + name]

    def trainable(self, name):
        """False when parameter `prefix + name` is frozen (model.freeze): its gradient is not computed."""
        return (self.prefix + name) not in self.state.frozen

    def linear_backward(self, name, dy, cache):
        """The backward of nn.Linear `name` (in the forward: y = x @ W.T + b):
        (dx = dy @ W, prefixed {"weight": dW, "bias": db}); dW and db are skipped when frozen."""
        x, weight, has_bias = cache
        grads = {}
        if self.trainable(name + ".weight") or (has_bias and self.trainable(name + ".bias")):
            grads = self.prefixed(name, linear_param_grads(dy, x, has_bias))
        return linear_input_grad(dy, weight, x.shape), grads

    def prefixed(self, name, grads):
        """{"weight": dW, "bias": db} from a leaf op -> {"<prefix><name>.weight": dW, ...}."""
        return {f"{self.prefix}{name}.{k}": v for k, v in grads.items()}

    @property
    def training(self):
        return self.state.training

    def release(self, cache):
        """End of this module's backward: during a backward that frees activations as it goes
        (not retain_graph), empty the cache dict so its arrays are freed now, as torch frees
        each saved tensor once its node has run, not when the whole layer is done."""
        if self.state.release_caches:
            cache.clear()
