"""Parameter: a model's array as torch users hold it, and ParameterDict, the model's one dict of them.

A Parameter IS a NumPy array (an `np.ndarray` subclass): every NumPy function takes it, and an
in-place update (`p -= lr * g`, `p[...] = 0`) changes the model, because it is the model's own
memory.  On top it carries what torch's `nn.Parameter` carries:

    p.grad            the gradient `loss.backward()` accumulated (None before, and after zero_grad)
    p.requires_grad   False when frozen; settable: `p.requires_grad = False` is model.freeze(name)
    p.numel()         the number of values; p.shape, p.dtype, p.ndim as NumPy's
    p.data            the same memory as a plain ndarray (torch's `.data`); assigning copies in

What a Parameter computes is a plain `np.ndarray`: `p * 2`, `p.T`, `p[:64]`, `np.sum(p)`,
`p @ x` are arrays, not parameters (as in torch, where they are tensors without a `.grad`).

The model keeps its parameters in one `ParameterDict` (`model.state.params`), keyed by
transformers' `state_dict()` names.  Storing an array there makes a Parameter that shares its
memory; beside each, the dict keeps a plain ndarray view of the same memory (`.arrays`), which is
what the modules hand to the ops (Module.p): the forward and backward never see the subclass.

A Parameter knows its name and (weakly) its model, so that misuse is named: a parameter of a
model that no longer exists, one the model has replaced (resize_token_embeddings), a `.grad` of
the wrong shape or dtype.
"""
import weakref

import numpy as np

from npbert.settings import BOOL, checked


def _plain(x):
    """A Parameter as a plain ndarray view (same memory); lists and tuples of them element-wise."""
    if isinstance(x, Parameter):
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    return x


class Parameter(np.ndarray):
    """One parameter of an npbert model (see the module docstring).  Made by ParameterDict."""

    SETTINGS = {"requires_grad": BOOL}        # `p.requires_grad = False`, checked when set (npbert/settings.py)

    # ---- what NumPy makes from a Parameter is a plain array --------------------------------
    def __array_finalize__(self, obj):
        # A Parameter that NumPy makes from another (a view, a copy) is not a model parameter;
        # ParameterDict sets these three on the ones it stores.
        self._name = None
        self._state_ref = None
        self._grad = None

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """Compute on plain views: results are ndarrays; with `out=` (in place: `p += x`) the
        given output objects are returned, so `p` stays the Parameter it was."""
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        if out is None or method == "at":
            return result
        return out[0] if len(out) == 1 else out

    def __array_function__(self, func, types, args, kwargs):
        return func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})

    def __getitem__(self, key):
        return self.view(np.ndarray)[key]

    @property
    def T(self):
        return self.view(np.ndarray).T

    @property
    def mT(self):
        return self.view(np.ndarray).mT

    def __reduce_ex__(self, protocol):          # pickle / copy: a plain array
        return self.view(np.ndarray).copy().__reduce_ex__(protocol)

    def __copy__(self):
        return self.view(np.ndarray).copy()

    def __deepcopy__(self, memo):
        return self.view(np.ndarray).copy()

    # ---- torch's Parameter ---------------------------------------------------------------
    def _owner(self, what):
        """The ModelState this parameter belongs to; an error naming it if it has none now."""
        if self._name is None:
            raise AttributeError(f"{what}: this array is not a model parameter (an array computed from one, "
                                 "e.g. p.T or p[:64], is a plain array)")
        state = self._state_ref()
        if state is None:
            raise RuntimeError(f"{what}: parameter {self._name!r} belongs to a model that no longer exists "
                               "(it was freed); use the parameters of a live model")
        if state.params.get(self._name) is not self:
            raise RuntimeError(f"{what}: parameter {self._name!r} is no longer the model's (the model replaced "
                               "it, e.g. resize_token_embeddings makes a new table): take it again from "
                               "model.parameters() / named_parameters()")
        return state

    @property
    def grad(self):
        """The gradient that loss.backward() accumulated, shaped and typed like the parameter, or None."""
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is None:
            self._grad = None
            return
        name = self._name or "this array"
        if not isinstance(value, np.ndarray):
            raise TypeError(f"assigned grad of parameter {name!r} must be a numpy array (or None), "
                            f"got {type(value).__name__}")
        if value.shape != self.shape:
            raise ValueError(f"assigned grad of parameter {name!r} has shape {value.shape}, "
                             f"the parameter has shape {self.shape}")
        if value.dtype != self.dtype:
            raise TypeError(f"assigned grad of parameter {name!r} has dtype {value.dtype}, "
                            f"the parameter has dtype {self.dtype}")
        self._grad = _plain(value)

    @property
    def requires_grad(self):
        """False when the parameter is frozen (model.freeze): no gradient is computed for it."""
        return self._name not in self._owner("requires_grad").frozen

    @requires_grad.setter
    def requires_grad(self, value):
        value = checked(self, "requires_grad", value, where=f"requires_grad of parameter {self._name!r}")
        frozen = self._owner("requires_grad").frozen
        if value:
            frozen.discard(self._name)
        else:
            frozen.add(self._name)

    def requires_grad_(self, requires_grad=True):
        """torch's in-place setter: `p.requires_grad_(False)` freezes p.  Returns p."""
        self.requires_grad = requires_grad
        return self

    def numel(self):
        """The number of values (torch's numel(); NumPy's p.size)."""
        return int(self.size)

    nelement = numel

    def dim(self):
        return self.ndim

    @property
    def is_leaf(self):
        return True

    @property
    def data(self):
        """The parameter's memory as a plain ndarray (torch's `.data`): writing to it changes the model."""
        return self.view(np.ndarray)

    @data.setter
    def data(self, value):
        value = np.asarray(value)
        if value.shape != self.shape:
            raise ValueError(f"p.data = ...: parameter {self._name!r} has shape {self.shape}, the new value "
                             f"{value.shape}; npbert copies into the parameter's memory, so the shape must match")
        self.view(np.ndarray)[...] = value

    def detach(self):
        """The same memory as a plain ndarray (no gradient bookkeeping), as torch's detach()."""
        return self.view(np.ndarray)

    numpy = detach

    def clone(self):
        return self.view(np.ndarray).copy()

    def zero_(self):
        self.view(np.ndarray).fill(0)
        return self

    def __repr__(self):
        if self._name is None:
            return repr(self.view(np.ndarray))
        return "Parameter containing:\n" + repr(self.view(np.ndarray))

    def __str__(self):
        return str(self.view(np.ndarray))


def _plain_method(name):
    method = getattr(np.ndarray, name)

    def plain(self, *args, **kwargs):
        return method(self.view(np.ndarray), *args, **kwargs)
    plain.__name__, plain.__doc__ = name, f"np.ndarray.{name} on the parameter's memory: a plain ndarray."
    return plain


# Methods whose result NumPy would otherwise make a Parameter-typed copy or view.
for _name in ("copy", "astype", "reshape", "ravel", "flatten", "transpose", "squeeze", "swapaxes", "dot", "take",
              "repeat", "compress", "diagonal", "argmax", "argmin", "argsort", "conj", "conjugate"):
    setattr(Parameter, _name, _plain_method(_name))
del _name


class ParameterDict(dict):
    """name -> Parameter, in named_parameters() order; `.arrays` holds a plain ndarray view of each.

    Storing any array makes a Parameter sharing its memory (a new object, `.grad` None): the
    loaders, the initialiser and resize_token_embeddings store arrays, and every reader finds
    parameter objects."""

    def __init__(self, state):
        super().__init__()
        self._state_ref = weakref.ref(state)
        self.arrays = {}                  # name -> plain ndarray view of the same memory (for the ops)
        self.inits = {}                   # name -> (shape, "normal" | "zeros" | "ones" | ("embedding", padding_idx))

    def __setitem__(self, name, value):
        array = np.asarray(value)         # a Parameter (of any model) -> its plain view
        p = array.view(Parameter)
        p._name, p._state_ref = name, self._state_ref
        super().__setitem__(name, p)
        self.arrays[name] = array

    def __delitem__(self, name):
        super().__delitem__(name)
        del self.arrays[name]

    def pop(self, name, *default):
        self.arrays.pop(name, None)
        return super().pop(name, *default)

    def popitem(self):
        name, p = super().popitem()
        del self.arrays[name]
        return name, p

    def clear(self):
        super().clear()
        self.arrays.clear()

    def update(self, *args, **kwargs):
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return self[name]

    def __reduce_ex__(self, protocol):          # copy / pickle: a plain dict of plain arrays
        return dict, ({k: np.array(v) for k, v in self.items()},)
