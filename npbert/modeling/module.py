"""The base of every HF-named module: a prefix into one flat dict of parameters.

A model owns one `dict[str, np.ndarray]` keyed exactly as transformers' `state_dict()`
(`encoder.layer.0.attention.self.query.weight`, ...).  Each module knows its prefix and
reads its parameters from that dict at call time, so loading new weights into the dict
is all it takes to change the model.  Every module has

    forward(...)          -> (outputs..., cache)
    backward(dout, cache) -> (dinput, grads)      grads keyed by full parameter names

Modules never keep activations themselves: the caches are returned, and the model that
ran the forward keeps them until its backward.

Two paths (npbert/paths.py), fixed when the model is built: the path in force then
(`npbert.set_path`, `using_path`, NPBERT_PATH) is the model's path, `model.set_path(p)` switches
it.  A module computes with `self.ops`, the model's path's ops: npbert.ops (the reference ops,
each its formula) or npbert.fast (their fast twins, the same names and the same numbers).  The
modules whose fast version is shaped differently (stacked Q/K/V, the encoder's halves side by
side, activations freed during the backward) have a fast twin class in npbert/modeling/fast.py,
a subclass of the reference class; a model built on the fast path is made of the twins
(`state.module_class(BertSelfAttention)`), as transformers picks BertSdpaSelfAttention for
BertSelfAttention by `attn_implementation`.  print(model) shows transformers' names either way.

A frozen parameter (`model.freeze(...)`, as torch's `requires_grad = False`) gets no gradient:
the backward skips the GEMM or scatter that would compute it (`trainable`, `linear_backward`).

Every module also has torch's nn.Module surface: `parameters()`, `named_parameters()` (names
relative to the module), `children()`, `named_children()`, `modules()`, `named_modules()`,
`zero_grad()`, `requires_grad_()`, `get_submodule()`, and `print(module)` in torch's layout.  The
parameters are the model's Parameter objects (npbert/modeling/parameter.py); the leaves holding
them (Linear, Embedding, LayerNorm, ...) are in npbert/modeling/leaf_modules.py.
"""
import numpy as np

import npbert.fast
import npbert.ops
from npbert.ops.dropout import DropoutKey
from npbert.paths import get_path
from npbert.settings import BOOL, checked

from .call import CallScope
from .parameter import ParameterDict


class ModelState:
    """What every module of one model shares.  Its ten attributes:

        config      the BertConfig (None for a module made on its own)
        dtype       the dtype every parameter and activation has
        path        "fast" or "reference": the model's modules and ops (npbert/paths.py, model.set_path)
        params      name -> Parameter (npbert/modeling/parameter.py); params.arrays: the plain views the
                    ops get, params.inits: name -> (shape, initialiser) of every declared parameter
        frozen      names of frozen parameters (model.freeze, requires_grad=False): no gradient computed
        training    dropout on (model.train()) or off (model.eval())
        rng         np.random.Generator: one draw per training forward, the step's seed
        step_seed   that draw, for the forward running now (None in eval)
        call        what the call running now asks besides the formulas, per thread
                    (npbert/modeling/call.py)
        need_inputs_embeds_grad   compute model.inputs_embeds_grad even when every parameter
                    below is frozen (set by a user, or by npbert.interpret for one call)
    """

    SETTINGS = {"need_inputs_embeds_grad": BOOL}      # checked when set (npbert/settings.py)

    def __init__(self, config, dtype, rng, path=None):
        self.config = config
        self.dtype = dtype
        self.path = get_path() if path is None else path   # "fast" or "reference"
        self.params = ParameterDict(self)
        self.frozen = set()
        self.training = False
        self.rng = rng
        self.step_seed = None
        self.call = CallScope()
        self.need_inputs_embeds_grad = False

    def __setattr__(self, name, value):
        if name in type(self).SETTINGS:
            value = checked(self, name, value)
        object.__setattr__(self, name, value)

    @property
    def arrays(self):
        """name -> the plain ndarray view of each parameter: what the ops get."""
        return self.params.arrays

    @property
    def inits(self):
        """name -> (shape, initialiser): "normal" | "zeros" | "ones" | ("embedding", padding_idx)."""
        return self.params.inits

    @classmethod
    def standalone(cls, dtype=np.float32):
        """The state of a module made on its own (`Linear(4, 2)` outside any model): float32, no
        config, in training mode as torch's modules are built.  Assigned to an attribute of a
        model's module (`self.regressor = Linear(H, 1)`), the module joins that model's state
        (Module.__setattr__)."""
        state = cls(None, dtype, np.random.default_rng())       # the path in force now
        state.training = True
        return state

    def new_step(self):
        """At the start of a forward of the model: in training, one 64-bit draw from the model's
        generator, the seed every dropout mask of this forward is keyed by (npbert/ops/dropout.py).
        The generator's state is what a checkpoint saves, so a resumed run draws the same seeds."""
        self.step_seed = int(self.rng.bit_generator.random_raw()) if self.training else None

    def module_class(self, cls):
        """The class a module of `cls` is built as: `cls` itself on the reference path, its fast
        twin (a subclass with the same numbers, npbert/modeling/fast.py) on the fast path."""
        return FAST_TWINS.get(cls, cls) if self.path == "fast" else cls

    @property
    def ops(self):
        """npbert.fast on the fast path, npbert.ops on the reference path: the same op names."""
        return npbert.fast if self.path == "fast" else npbert.ops


# reference class -> its fast twin (a subclass computing the same numbers another way): filled by
# npbert/modeling/fast.py, which the models import; ModelState.module_class reads it.
FAST_TWINS = {}


class Module:
    # The attributes a user may set on a built module, checked when set (npbert/settings.py);
    # a subclass lists its own (BertEncoder.attention_tiles_from, Dropout.p, ...).
    SETTINGS = {}

    def __init__(self, state, prefix):
        self.state = state
        self.config = state.config
        self.prefix = prefix
        self._own = {}           # the module's own parameters: local name -> full name in the model's dict

    @property
    def ops(self):
        """The ops of the model's path: npbert.ops (reference) or npbert.fast (ModelState.ops)."""
        return self.state.ops

    # ---- a submodule made on its own joins the model it is assigned to, as in torch -----------
    def __setattr__(self, name, value):
        """`self.regressor = Linear(H, 1)`, `self.bert = BertModel(config)`: a module (or a
        ModuleList) of another state joins this module's model under `<prefix><name>.`, its
        parameters registered there (and, when this model's parameters exist already, its own
        values copied in, cast to this model's dtype).  A setting of the class's SETTINGS
        table is checked first (npbert/settings.py)."""
        if name in type(self).SETTINGS:
            value = checked(self, name, value)
        if (isinstance(value, (Module, ModuleList)) and "state" in self.__dict__
                and value.state is not self.state and not name.startswith("_")):
            _adopt(self.state, self.prefix + name + ".", value)
        object.__setattr__(self, name, value)

    # ---- module(...) and print(module), as torch -------------------------------------
    def __call__(self, *args, **kwargs):
        """module(...) as in torch: the forward's outputs without its cache (one output alone,
        several as a tuple), e.g. `model.bert.pooler(h)` or `layer.attention.self(h)` ->
        (context, probs).  For looking inside a model (masks are additive, as the modules
        receive them); gradients come from the model's backward() after the model's forward."""
        self.state.step_seed = None          # a new step: its first dropout site draws the seed (dropout_rng)
        out = self.forward(*args, **kwargs)[:-1]
        return out[0] if len(out) == 1 else out

    def extra_repr(self):
        """What torch prints inside a leaf's parentheses, e.g. "p=0.1, inplace=False"."""
        return ""

    def __repr__(self):
        """torch's Module.__repr__: `Name(extra)` for a leaf, else one indented line per child."""
        name = type(self).__name__.removeprefix("Fast")     # a fast twin prints as its transformers class
        lines = [f"({key}): " + repr(child).replace("\n", "\n  ") for key, child in self.named_children()]
        if not lines:
            return f"{name}({self.extra_repr()})"
        return f"{name}(\n  " + "\n  ".join(lines) + "\n)"

    # ---- torch's nn.Module tree ---------------------------------------------------------
    def named_children(self):
        """(attribute name, submodule) in construction order (transformers' `__init__` order)."""
        for name, value in vars(self).items():
            if isinstance(value, (Module, ModuleList)):
                yield name, value

    def children(self):
        return (m for _, m in self.named_children())

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(qualified name, module) for this module and every submodule, depth first, parents
        before children, as torch ("" for the module itself, then "bert", "bert.embeddings", ...)."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        return (m for _, m in self.named_modules())

    def get_submodule(self, target):
        """torch's get_submodule("encoder.layer.0.attention"): the module at that dotted path."""
        module = self
        for part in target.split(".") if target else ():
            children = dict(module.named_children())
            if part not in children:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r} (in {target!r}); "
                                     f"its children: {list(children)}")
            module = children[part]
        return module

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, Parameter) for the parameters of this module and (recurse) its submodules, names
        relative to this module, each parameter once (a tied weight under its first name), as torch."""
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        params = self.state.params
        for module_prefix, module in modules:
            for local, full in module._own.items():
                p = params[full]
                if remove_duplicate:
                    if id(p) in seen:
                        continue
                    seen.add(id(p))
                yield (f"{module_prefix}.{local}" if module_prefix else local), p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def zero_grad(self, set_to_none=True):
        """Every parameter's `.grad` to None (torch's default), or to zeros with set_to_none=False."""
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad[...] = 0

    def requires_grad_(self, requires_grad=True):
        """Freeze (False) or unfreeze every parameter of this module, as torch.  Returns the module."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    # ---- parameters -----------------------------------------------------------------
    def add_param(self, name, shape, init):
        """Register parameter `prefix + name` of `shape`; `init` says how _init_weights fills it."""
        full = self.prefix + name
        if full in self.state.inits:
            raise KeyError(f"parameter {full} registered twice")
        self.state.inits[full] = (tuple(shape), init)
        self._own[name] = full

    def p(self, name):
        """The parameter `prefix + name` as it is now in the model's dict, as a plain ndarray (the
        same memory as the Parameter object: the ops never see the subclass)."""
        return self.state.arrays[self.prefix + name]

    def trainable(self, name):
        """False when parameter `prefix + name` is frozen (model.freeze): its gradient is not computed."""
        return (self.prefix + name) not in self.state.frozen

    def linear_backward(self, name, dy, cache):
        """The backward of the nn.Linear submodule `name` (in the forward: y = x @ W.T + b):
        (dx = dy @ W, {"<prefix><name>.weight": dW, ...}), dW and db skipped when frozen.  It is
        that Linear's own backward (npbert/modeling/leaf_modules.py), called by name."""
        return self.get_submodule(name).backward(dy, cache)

    def prefixed(self, name, grads):
        """{"weight": dW, "bias": db} from a leaf op -> {"<prefix><name>.weight": dW, ...}."""
        return {f"{self.prefix}{name}.{k}": v for k, v in grads.items()}

    def dropout_rng(self, site=None):
        """What the nn.Dropout named `site` (this module's `<prefix>dropout` unless given,
        transformers' module path) draws its masks from in a training forward: DropoutKey(the
        step's seed, that name, the global index of the batch's first row: model.batch_offset);
        None in eval.  The one place a model's dropout key is made (an nn.Dropout called on its
        own asks here with its own name)."""
        if not self.state.training:
            return None
        if self.state.step_seed is None:
            self.state.new_step()
        return DropoutKey(self.state.step_seed, self.prefix + "dropout" if site is None else site,
                          self.state.call.batch_offset)

    @property
    def training(self):
        return self.state.training


def _adopt(state, prefix, child):
    """Move module `child` (and every module under it) from its own state into `state` with its
    parameter names under `prefix`: the names re-prefixed, the modules pointed at `state`.  A
    module taken from another model is moved, not shared (torch would share it between the two)."""
    old_state, old_prefix = child.state, child.prefix
    modules = list(child.modules())                           # (a ModuleList: itself, then its modules)

    def moved(name):
        if not name.startswith(old_prefix):
            raise ValueError(f"cannot move {type(child).__name__} into a model: its parameter {name!r} is not under "
                             f"its prefix {old_prefix!r} (tied to a parameter of another module)")
        return prefix + name[len(old_prefix):]
    for m in modules:
        for local, full in list(m._own.items()):
            new = moved(full)
            if new in state.inits and full in old_state.inits:
                raise KeyError(f"parameter {new} registered twice")
            if full in old_state.inits:
                state.inits[new] = old_state.inits[full]
                if state.params and full in old_state.params:     # this model exists already: keep the values
                    state.params[new] = np.array(old_state.arrays[full], dtype=state.dtype)
            m._own[local] = new
        object.__setattr__(m, "prefix", moved(m.prefix) if m.prefix else prefix)
        object.__setattr__(m, "state", state)
        if isinstance(m, Module):
            object.__setattr__(m, "config", m.config if m.config is not None else state.config)
            if hasattr(m, "_is_root"):
                object.__setattr__(m, "_is_root", False)          # a BertModel inside a head: the head's state


class ModuleList(list):
    """nn.ModuleList: a list of modules (BertEncoder.layer), indexable, iterable, and a module of
    the tree (named_modules lists it as `...encoder.layer`).  `layer[i].parameters()` as torch."""

    def __init__(self, state, prefix, modules):
        super().__init__(modules)
        self.state, self.prefix = state, prefix
        self._own = {}

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ModuleList(self.state, self.prefix, list.__getitem__(self, index))
        return list.__getitem__(self, index)

    def named_children(self):
        return ((str(i), m) for i, m in enumerate(self))

    def __repr__(self):
        """torch's layout: equal consecutive items collapse to "(0-5): 6 x BertLayer(...)"."""
        bodies = [repr(m) for m in self]
        lines, i = [], 0
        while i < len(bodies):
            j = i
            while j + 1 < len(bodies) and bodies[j + 1] == bodies[i]:
                j += 1
            label = f"({i}): " if i == j else f"({i}-{j}): {j - i + 1} x "
            lines.append(label + bodies[i].replace("\n", "\n  "))
            i = j + 1
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)" if lines else "ModuleList()"


for _name in ("parameters", "named_parameters", "children", "named_modules", "modules", "zero_grad",
              "requires_grad_", "get_submodule", "training", "extra_repr"):
    setattr(ModuleList, _name, getattr(Module, _name))
del _name
