"""The loss a model returns, with torch's `loss.backward()`, and the losses computed from a
model's outputs (npbert.nn, npbert/nn/functional.py), which have it too.

    outputs = model(**batch)            # batch holds labels
    loss = outputs.loss                 # a NumPy float (np.float32 or np.float64) that also has:
    loss.backward()                     # the model's backward: every trainable parameter's .grad += d loss / d p
    loss = nn.CrossEntropyLoss()(outputs.logits, labels)     # the same, from the logits

`loss` is a NumPy scalar of the model's dtype (a subclass of np.float32 / np.float64):
`float(loss)`, `loss.item()`, `print(loss)`, `f"{loss:.4f}"` and arithmetic work as on any NumPy
float.  Scaling it by a number, adding a number and adding or subtracting another such loss keep
it differentiable (`(loss / accumulation_steps).backward()`, `(loss_a + 0.5 * loss_b).backward()`);
any other arithmetic gives a plain NumPy float.

`backward()` differentiates the LAST forward call of its model (the model keeps that call's
activations): a loss from an earlier call is an error, as is a second backward of one forward
(unless the first was given `retain_graph=True`).  Gradients accumulate in `.grad` until
`model.zero_grad()` or `optimizer.zero_grad()`, as in torch.
"""
import numbers
import weakref

import numpy as np


class _Loss:
    """The methods of Loss32 / Loss64 (np.float32 / np.float64 with these on top, see below): a
    loss that knows where its gradient goes.  `_terms` is a list of (model, forward call, {output
    name: upstream gradient}): the loss a model returned is [(model, call, {"loss": 1})]; a loss
    computed from a model's outputs (npbert.nn) is [(model, call, {"logits": dL/dlogits})];
    scaling scales every upstream, adding two losses joins their lists."""

    def backward(self, gradient=None, retain_graph=False):
        """d (gradient * loss) / d p for every trainable parameter p, added into p.grad (None -> the
        gradient).  `gradient`: the upstream gradient of the loss (default 1), as torch's."""
        g = 1.0 if gradient is None else float(np.asarray(gradient))
        if not self._terms:
            raise RuntimeError("backward(): this loss was not computed from a model's outputs, so there is nothing to "
                               "differentiate (compute it from outputs.logits of a model call, or use outputs.loss)")
        calls = {}
        for model, forward_id, upstream in self._terms:         # one backward per model call, its upstreams summed
            _, _, ups = calls.setdefault((id(model), forward_id), (model, forward_id, {}))
            for name, u in upstream.items():
                ups[name] = _plus(ups[name], u) if name in ups else u
        for model, forward_id, ups in calls.values():
            model._backward_into_grads({k: _times(v, g) for k, v in ups.items()}, retain_graph, forward_id)

    def _scaled(self, value, factor):
        return _make(value, [(m, f, {k: _times(v, factor) for k, v in u.items()}) for m, f, u in self._terms])

    def __mul__(self, other):
        value = self.dtype.type(self) * _plain(other)        # NumPy's own arithmetic, in the loss's dtype
        if _is_number(other):
            return self._scaled(value, other)
        return value

    def __rmul__(self, other):
        value = _plain(other) * self.dtype.type(self)
        if _is_number(other):
            return self._scaled(value, other)
        return value

    def __truediv__(self, other):
        value = self.dtype.type(self) / _plain(other)
        if _is_number(other):
            return self._scaled(value, 1.0 / float(other))
        return value

    def __neg__(self):
        return self._scaled(-self.dtype.type(self), -1.0)

    def __add__(self, other):
        value = self.dtype.type(self) + (other.dtype.type(other) if isinstance(other, (Loss32, Loss64)) else other)
        if isinstance(other, (Loss32, Loss64)):             # the gradient of a sum: both terms' upstreams
            return _make(value, self._terms + other._terms)
        if _is_number(other):                               # a constant moves the value, not the gradient
            return _make(value, self._terms)
        return value

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, (Loss32, Loss64)) or _is_number(other):
            return self + (-other)
        return self.dtype.type(self) - _plain(other)

    def __rsub__(self, other):
        return (-self) + other if _is_number(other) else _plain(other) - self.dtype.type(self)

    def mean(self, *args, **kwargs):
        """A scalar's mean is itself (torch's `loss.mean()` under DataParallel); with NumPy's
        arguments (axis, dtype, ...) it is NumPy's mean of the plain value."""
        return self.dtype.type(self).mean(*args, **kwargs) if args or kwargs else self

    def sum(self, *args, **kwargs):
        return self.dtype.type(self).sum(*args, **kwargs) if args or kwargs else self

    def detach(self):
        """The value as a plain NumPy float (torch's `loss.detach()`)."""
        return self.dtype.type(self)

    def __reduce__(self):                         # pickle / copy: the plain value
        return self.dtype.type, (self.dtype.type(self).item(),)

    def __copy__(self):
        return self.dtype.type(self)

    def __deepcopy__(self, memo):
        return self.dtype.type(self)


def _plain(x):
    """A loss as its plain NumPy float (so that NumPy's arithmetic does not call back into Loss)."""
    return x.dtype.type(x) if isinstance(x, (Loss32, Loss64)) else x


def _is_number(x):
    return isinstance(x, numbers.Real) and not isinstance(x, (Loss32, Loss64, bool))


def _plus(a, b):
    """Two upstream gradients of one output added (numbers, arrays, or lists of arrays / None)."""
    if isinstance(a, list):
        return [x if y is None else y if x is None else x + y for x, y in zip(a, b)]
    return a + b


def _times(upstream, factor):
    """An upstream gradient (a number, an array, or a list of arrays / None) times a number."""
    if isinstance(upstream, list):
        return [None if u is None else u * factor for u in upstream]
    return upstream * factor


# (NumPy's scalar type must come first in the bases, and a Python mixin before it crashes NumPy's
# scalar constructor: the methods are copied in instead.)
_METHODS = {k: v for k, v in vars(_Loss).items() if not k.startswith("__") or k in (
    "__mul__", "__rmul__", "__truediv__", "__neg__", "__add__", "__radd__", "__sub__", "__rsub__", "__reduce__",
    "__copy__", "__deepcopy__")}
Loss32 = type("Loss32", (np.float32,), dict(_METHODS, __doc__="A float32 loss with backward()."))
Loss64 = type("Loss64", (np.float64,), dict(_METHODS, __doc__="A float64 loss with backward()."))


def _make(value, terms):
    dtype = np.asarray(value).dtype
    cls = Loss64 if dtype == np.float64 else Loss32
    loss = cls(value)
    loss._terms = terms
    return loss


def make_loss(value, model, forward_id, scale=1.0):
    """`value` (a NumPy float) as a loss whose backward() runs `model`'s backward of forward `forward_id`."""
    return _make(value, [(model, forward_id, {"loss": scale})])


def loss_from_output(value, model, forward_id, upstream):
    """`value`, a loss computed from `model`'s outputs of forward `forward_id`, whose gradient with
    respect to them is `upstream` ({output name: array}): its backward() runs that model's backward."""
    return _make(value, [(model, forward_id, upstream)])


# ---- which model call an output array came from (for losses computed from outputs) ----------
_SOURCES = {}           # id(array) -> (weakref to the array, weakref to the model, forward call, name, index)


def remember_outputs(model, forward_id, output):
    """Note, for each array of `output` (and of its hidden_states / attentions tuples), the model call
    and output name it is, so that a loss computed from it can send its gradient there."""
    if len(_SOURCES) > 4096:                                  # forget arrays that no longer exist
        for key in [k for k, v in _SOURCES.items() if v[0]() is None or v[1]() is None]:
            del _SOURCES[key]
    for name, value in output.items():
        if name == "loss" or value is None:
            continue
        items = [(value, None)] if isinstance(value, np.ndarray) else (
            [(a, (i, len(value))) for i, a in enumerate(value)] if isinstance(value, (tuple, list)) else [])
        for array, index in items:
            if isinstance(array, np.ndarray):
                _SOURCES[id(array)] = (weakref.ref(array), weakref.ref(model), forward_id, name, index)


def _bounds(a):
    return np.lib.array_utils.byte_bounds(a) if hasattr(np.lib, "array_utils") else np.byte_bounds(a)


def source_of(array):
    """(model, forward call, output name, (i, n) for entry i of n of a tuple output or None, the output
    array) that `array` is, or a view of (a slice, a reshape: its memory inside the output's), or None."""
    if not isinstance(array, np.ndarray):
        return None
    entry = _SOURCES.get(id(array))
    if entry is not None and entry[0]() is array and entry[1]() is not None:
        return entry[1](), entry[2], entry[3], entry[4], array
    lo, hi = _bounds(array)
    for ref, model_ref, forward_id, name, index in list(_SOURCES.values()):
        output, model = ref(), model_ref()
        if output is None or model is None or output.dtype != array.dtype:
            continue
        out_lo, out_hi = _bounds(output)
        if out_lo <= lo and hi <= out_hi and array.size:
            return model, forward_id, name, index, output
    return None


def gradient_to_source(array, grad, source):
    """The gradient `grad` of the view `array` as the gradient of the output array it views (zeros
    where the view does not reach)."""
    if array is source:
        return grad
    if not source.flags.c_contiguous:
        raise ValueError("a loss of a view of a non-contiguous model output: pass the output itself")
    offset = array.__array_interface__["data"][0] - source.__array_interface__["data"][0]
    if offset % source.itemsize or any(st == 0 for st, n in zip(array.strides, array.shape) if n > 1):
        raise ValueError("a loss of a broadcast view of a model output: pass the output, or a slice or reshape of it")
    full = np.zeros(source.shape, dtype=grad.dtype)
    view = np.lib.stride_tricks.as_strided(full.reshape(-1)[offset // source.itemsize:], shape=array.shape,
                                           strides=array.strides)
    view += grad                                              # a slice or reshape: each entry once
    return full
