"""The base of every HF-named module: a prefix into one flat dict of parameters.

A model owns one `dict[str, np.ndarray]` keyed exactly as transformers' `state_dict()`
(`encoder.layer.0.attention.self.query.weight`, ...).  Each module knows its prefix and
reads its parameters from that dict at call time, so loading new weights into the dict
is all it takes to change the model.  Every module has

    forward(...)          -> (outputs..., cache)
    backward(dout, cache) -> (dinput, grads)      grads keyed by full parameter names

Modules never keep activations themselves: the caches are returned, and the model that
ran the forward keeps them until its backward.

Two paths (npbert/paths.py).  A module reads its ops from the path that is on, in one line,
`F = ops_for_path()`: npbert.ops (the reference ops, each its formula) or npbert.fast (their
fast twins, the same names and the same numbers).  The modules whose fast version is shaped
differently (stacked Q/K/V, the encoder's halves side by side, activations freed during the
backward) have a fast twin class in npbert/modeling/fast.py; `ModelState.use_path` makes every
module an instance of its twin on the fast path and of its own class on the reference path,
when the model is called (as transformers picks BertSdpaSelfAttention for BertSelfAttention,
but at call time).  print(model) shows transformers' names either way.

A frozen parameter (`model.freeze(...)`, as torch's `requires_grad = False`) gets no gradient:
the backward skips the GEMM or scatter that would compute it (`trainable`, `linear_backward`).
"""
import contextlib

import npbert.fast
import npbert.ops
from npbert.ops.dropout import DropoutKey
from npbert.ops.linear import linear_input_grad, linear_param_grads
from npbert.paths import get_path, is_fast


def ops_for_path():
    """npbert.fast on the fast path, npbert.ops on the reference path: the same op names."""
    return npbert.fast if is_fast() else npbert.ops


class ModelState:
    """What every module of one model shares: the parameters, train/eval, the dropout step."""

    def __init__(self, config, dtype, rng):
        self.config = config
        self.dtype = dtype
        self.params = {}         # name -> np.ndarray, in named_parameters() order
        self.inits = {}          # name -> "normal" | "zeros" | "ones" | ("embedding", padding_idx)
        self.training = False
        self.rng = rng           # np.random.Generator: one draw per training forward, the step's seed
        self.step_seed = None    # that draw, for the forward running now (None in eval)
        self.batch_offset = 0    # the global index of this batch's first row (model.batch_offset)
        self.frozen = set()           # names of frozen parameters (model.freeze): no gradient computed
        self.need_inputs_embeds_grad = False   # True: compute model.inputs_embeds_grad even when all below is frozen
        self.modules = []        # every module of the model, for use_path
        self.twins = {}          # reference class -> fast twin class (npbert/modeling/fast.py)
        self.path = None         # the path the modules' classes are set for
        # The fast twins' bookkeeping (npbert/modeling/fast.py); the reference path ignores them.
        self.release_caches = False   # set during a backward that may free each cache once used
        self.keep_caches = True       # False in a forward under npbert.no_grad()
        # Kept only on request (npbert/modeling/outputs.py: Intermediates, IntermediateGrads):
        self.keep_intermediates = False        # during a forward called with output_intermediates=True
        self.keep_intermediate_grads = False   # during a backward called with return_intermediate_grads=True
        self.intermediates = None              # what that forward kept, until model(...) hands it over
        self.intermediate_grads = None         # what that backward computed, until it returns them
        self.replaced_outputs = {}             # module path -> the array its output is replaced by (interpret)

    def new_step(self):
        """At the start of a forward of the model: in training, one 64-bit draw from the model's
        generator, the seed every dropout mask of this forward is keyed by (npbert/ops/dropout.py).
        The generator's state is what a checkpoint saves, so a resumed run draws the same seeds."""
        self.step_seed = int(self.rng.bit_generator.random_raw()) if self.training else None

    @contextlib.contextmanager
    def rows_times(self, n):
        """Within the block, batch_offset counts n rows per row of the caller's batch (a multiple
        choice example is n flattened rows)."""
        before = self.batch_offset
        self.batch_offset = before * n
        try:
            yield
        finally:
            self.batch_offset = before

    def use_path(self, path):
        """Make every module an instance of its fast twin (path "fast") or of its reference class."""
        if path == self.path:
            return
        reference = {twin: cls for cls, twin in self.twins.items()}
        for m in self.modules:
            cls = reference.get(type(m), type(m))
            m.__class__ = self.twins.get(cls, cls) if path == "fast" else cls
        self.path = path


class Module:
    def __init__(self, state, prefix):
        self.state = state
        self.config = state.config
        self.prefix = prefix
        state.modules.append(self)

    # ---- module(...) and print(module), as torch -------------------------------------
    def __call__(self, *args, **kwargs):
        """module(...) as in torch: the forward's outputs without its cache (one output alone,
        several as a tuple), e.g. `model.bert.pooler(h)` or `layer.attention.self(h)` ->
        (context, probs).  For looking inside a model (masks are additive, as the modules
        receive them); gradients come from the model's backward() after the model's forward."""
        self.state.use_path(get_path())
        self.state.step_seed = None          # a new step: its first dropout site draws the seed (dropout_rng)
        out = self.forward(*args, **kwargs)[:-1]
        return out[0] if len(out) == 1 else out

    def __repr__(self):
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

    def dropout_rng(self, first_row=None):
        """What this module's nn.Dropout (`<prefix>dropout`, transformers' module path) draws its
        masks from in a training forward: DropoutKey(the step's seed, that name, the global index
        of the batch's first row: model.batch_offset unless given); None in eval."""
        if not self.state.training:
            return None
        if self.state.step_seed is None:
            self.state.new_step()
        first = self.state.batch_offset if first_row is None else first_row
        return DropoutKey(self.state.step_seed, self.prefix + "dropout", first)

    @property
    def training(self):
        return self.state.training


# ---- print(model) and named_modules, as torch ---------------------------------------------------
def _children(module):
    """(attribute name, submodule) in construction order; a list of modules (the encoder's
    `layer`) gives one child per item, named "layer.0", "layer.1", ..."""
    for name, value in vars(module).items():
        if isinstance(value, Module):
            yield name, value
        elif isinstance(value, list) and value and all(isinstance(v, Module) for v in value):
            for i, v in enumerate(value):
                yield f"{name}.{i}", v


def _named_submodules(module, prefix):
    """Depth first, parents before children, as torch's named_modules."""
    for name, child in _children(module):
        full = f"{prefix}.{name}" if prefix else name
        yield full, child
        yield from _named_submodules(child, full)


def _order(state, prefix):
    """Where `prefix` first appears among the registered parameters: construction order."""
    return next((i for i, name in enumerate(state.inits) if name.startswith(prefix)), len(state.inits))


def _leaves(module, child_prefixes, tied):
    """The parameter-holding leaves torch would show inside `module` (nn.Linear, nn.Embedding,
    nn.LayerNorm), as (order, name, repr) from the names and initialisers of the model's dict."""
    state, prefix = module.state, module.prefix
    groups = {}
    names = list(state.inits) + [alias for alias in tied if alias.startswith(prefix)]
    for full in names:
        if not full.startswith(prefix) or any(full.startswith(c) for c in child_prefixes):
            continue
        leaf, _, kind = full[len(prefix):].rpartition(".")
        if leaf:
            groups.setdefault(leaf, {})[kind] = full
    out = []
    for leaf, parts in groups.items():
        weight = parts.get("weight")
        if weight is None:
            continue                                   # a bare bias (the MLM decoder's) is a Parameter
        shape, init = state.inits[tied.get(weight, weight)]
        order = len(state.inits) if weight in tied else _order(state, prefix + leaf + ".")
        if weight in tied:                             # the MLM decoder: nn.Linear(H, V) tied to the word embeddings
            text = f"Linear(in_features={shape[1]}, out_features={shape[0]}, bias=True)"
        elif isinstance(init, tuple):                  # ("embedding", padding_idx)
            pad = "" if init[1] is None else f", padding_idx={init[1]}"
            text = f"Embedding({shape[0]}, {shape[1]}{pad})"
        elif init == "ones":
            text = (f"LayerNorm(({shape[0]},), eps={state.config.layer_norm_eps}, "
                    f"elementwise_affine=True, bias={'bias' in parts})")
        else:
            text = f"Linear(in_features={shape[1]}, out_features={shape[0]}, bias={'bias' in parts})"
        out.append((order, leaf, text))
    return out


def _tree(module, tied):
    """torch's Module.__repr__ lines for `module`, entries in construction order; equal
    consecutive items of a list collapse to "(0-5): 6 x BertLayer(...)" as torch's ModuleList."""
    children = list(_children(module))
    entries = _leaves(module, [c.prefix for _, c in children], tied)
    lists = {}
    for name, child in children:
        head, _, index = name.partition(".")
        body = _tree(child, tied)
        if index:
            if head not in lists:
                lists[head] = []
                entries.append((_order(module.state, child.prefix), head, lists[head]))
            lists[head].append(body)
        else:
            entries.append((_order(module.state, child.prefix), name, body))
    entries.sort(key=lambda e: e[0])
    name = type(module).__name__.removeprefix("Fast")     # a fast twin prints as its transformers class
    lines = [f"{name}("]
    for _, name, body in entries:
        if isinstance(body, list):                     # a ModuleList
            lines.append(f"  ({name}): ModuleList(")
            i = 0
            while i < len(body):
                j = i
                while j + 1 < len(body) and body[j + 1] == body[i]:
                    j += 1
                label = f"({i}): " if i == j else f"({i}-{j}): {j - i + 1} x "
                sub = body[i].split("\n")
                lines.append(f"    {label}{sub[0]}")
                lines += ["    " + s for s in sub[1:]]
                i = j + 1
            lines.append("  )")
        else:
            sub = body.split("\n")
            lines.append(f"  ({name}): {sub[0]}")
            lines += ["  " + s for s in sub[1:]]
    if len(lines) == 1:
        return f"{name}()"
    lines.append(")")
    return "\n".join(lines)


