"""The loss a model returns, with torch's `loss.backward()`.

    outputs = model(**batch)            # batch holds labels
    loss = outputs.loss                 # a NumPy float (np.float32 or np.float64) that also has:
    loss.backward()                     # the model's backward: every trainable parameter's .grad += d loss / d p

`loss` is a NumPy scalar of the model's dtype (a subclass of np.float32 / np.float64):
`float(loss)`, `loss.item()`, `print(loss)`, `f"{loss:.4f}"` and arithmetic work as on any NumPy
float.  Scaling it by a number keeps it differentiable (`(loss / accumulation_steps).backward()`
differentiates loss / accumulation_steps); any other arithmetic gives a plain NumPy float.

`backward()` differentiates the LAST forward call of its model (the model keeps that call's
activations): a loss from an earlier call is an error, as is a second backward of one forward
(unless the first was given `retain_graph=True`).  Gradients accumulate in `.grad` until
`model.zero_grad()` or `optimizer.zero_grad()`, as in torch.
"""
import numbers

import numpy as np


class _Loss:
    """The methods of Loss32 / Loss64 (np.float32 / np.float64 with these on top, see below): a
    loss that knows its model and its forward call."""

    def backward(self, gradient=None, retain_graph=False):
        """d (scale * loss) / d p for every trainable parameter p, added into p.grad (None -> the
        gradient).  `gradient`: the upstream gradient of the loss (default 1), as torch's."""
        scale = self._scale if gradient is None else self._scale * float(np.asarray(gradient))
        self._model._backward_into_grads(scale, retain_graph, self._forward_id)

    def _scaled(self, value, factor):
        return make_loss(value, self._model, self._forward_id, self._scale * float(factor))

    def __mul__(self, other):
        value = self.dtype.type(self) * other                # NumPy's own arithmetic, in the loss's dtype
        if isinstance(other, numbers.Real) and not isinstance(other, (Loss32, Loss64)):
            return self._scaled(value, other)
        return value

    def __rmul__(self, other):
        value = other * self.dtype.type(self)
        if isinstance(other, numbers.Real) and not isinstance(other, (Loss32, Loss64)):
            return self._scaled(value, other)
        return value

    def __truediv__(self, other):
        value = self.dtype.type(self) / other
        if isinstance(other, numbers.Real) and not isinstance(other, (Loss32, Loss64)):
            return self._scaled(value, 1.0 / float(other))
        return value

    def __neg__(self):
        return self._scaled(-self.dtype.type(self), -1.0)

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


# (NumPy's scalar type must come first in the bases, and a Python mixin before it crashes NumPy's
# scalar constructor: the methods are copied in instead.)
_METHODS = {k: v for k, v in vars(_Loss).items() if not k.startswith("__") or k in (
    "__mul__", "__rmul__", "__truediv__", "__neg__", "__reduce__", "__copy__", "__deepcopy__")}
Loss32 = type("Loss32", (np.float32,), dict(_METHODS, __doc__="A float32 loss with backward()."))
Loss64 = type("Loss64", (np.float64,), dict(_METHODS, __doc__="A float64 loss with backward()."))


def make_loss(value, model, forward_id, scale=1.0):
    """`value` (a NumPy float) as a loss whose backward() runs `model`'s backward of forward `forward_id`."""
    dtype = np.asarray(value).dtype
    cls = Loss64 if dtype == np.float64 else Loss32
    loss = cls(value)
    loss._model, loss._forward_id, loss._scale = model, forward_id, scale
    return loss
