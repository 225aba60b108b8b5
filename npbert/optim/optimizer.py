"""The Optimizer base: parameter groups, per-parameter state, state_dict, as torch.optim.Optimizer.

Two ways to feed it gradients, the same update either way:

    opt = AdamW(model.parameters(), lr=2e-5)      torch's: the model's Parameter objects
    outputs.loss.backward(); opt.step(); opt.zero_grad()     step() reads each parameter's .grad

    opt = AdamW(model.named_parameters(), lr=2e-5)
    grads = model.backward(); opt.step(grads)     the dict form: step(grads) takes {name: gradient}

The optimizer keeps references to the model's own arrays and updates them in place, so the
model sees every step without being told.

    params       the model's parameters (model.parameters()), (name, array) pairs, a {name: array}
                 dict, or a list of groups {"params": any of those, "lr": ..., "weight_decay": ...}
                 whose keys override the optimizer's defaults (torch's per-group options)
    param_groups list of dicts: "params" (the names, in order) and the options; a
                 scheduler writes "lr" here
    state        {name: {"step": int, "exp_avg": array, ...}}, filled on the first step

Misuse is named, never a silent no-op: an array that is not a model's parameter (p.T, a copy),
a parameter of a freed model or one the model replaced, a frozen parameter (a warning: it gets no
gradient), a step() when no parameter has a gradient (a warning naming the groups), a gradient
holding nan or inf (a RuntimeWarning naming the parameters; the step is applied, as torch's).

Which step runs is read from npbert.get_path() at each step() call: "fast" (the default) runs
each optimizer's in-place threaded kernel, "reference" the plain functions of reference.py.  Both
keep the same state arrays under the same names, so state_dict() from one loads into the other
and a run may switch path between steps.
"""
import math
import warnings

import numpy as np

from npbert.paths import get_path
from npbert.settings import checked, one_of


def _entries(params, where):
    """(name, plain array, parameter object or None) from a model, a {name: array} dict, or an
    iterable of the model's parameters and/or (name, array) pairs."""
    if hasattr(params, "named_parameters"):
        params = params.named_parameters()
    if isinstance(params, dict):
        params = params.items()
    if isinstance(params, np.ndarray):                    # one parameter, as torch accepts one tensor
        params = [params]
    entries = []
    for i, item in enumerate(params):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            name, array = item
        elif isinstance(item, np.ndarray) and hasattr(item, "requires_grad_"):
            if item._name is None:
                raise TypeError(f"{where}: item {i} is an array computed from a parameter (a view or copy such "
                                "as p.T or p[:64]), not one of the model's parameters")
            name, array = item._name, item
        elif isinstance(item, np.ndarray):
            raise TypeError(f"{where}: item {i} is a plain numpy array of shape {item.shape}, not one of the "
                            "model's parameters: give model.parameters() (or the parameters themselves), or "
                            "(name, array) pairs as model.named_parameters() gives")
        else:
            raise TypeError(f"{where}: params must be the model's parameters (model.parameters()) or (name, array) "
                            f"pairs as model.named_parameters() gives, got an item of type {type(item).__name__}")
        if not isinstance(array, np.ndarray) or not np.issubdtype(array.dtype, np.floating):
            raise TypeError(f"{where}: parameter {name!r} must be a floating-point numpy array, "
                            f"got {type(array).__name__}{'' if not hasattr(array, 'dtype') else ' ' + str(array.dtype)}")
        obj = array if hasattr(array, "requires_grad_") and array._name is not None else None
        if obj is not None:
            obj._owner(where)                              # a freed model or a replaced parameter: an error
        entries.append((name, np.asarray(array), obj))
    return entries


def all_finite(x):
    """True when every element of x is finite (no nan, no inf).  A contiguous x is checked by its
    dot product with itself, one read without a temporary (a square of nan or inf is not
    finite); only when that overflows is the elementwise test run."""
    if x.flags.c_contiguous and x.size and math.isfinite(float(np.vdot(x.reshape(-1), x.reshape(-1)))):
        return True
    return bool(np.isfinite(x).all())


NONFINITE = ("apply", "raise", "skip")     # what step() does with a nan or inf gradient (Optimizer.nonfinite)


class Optimizer:
    """Base class.  A subclass sets `defaults` and implements the step twice: `_update(name, p, g,
    group, state)`, the fast path's in-place kernel, which returns whether g was all finite, and
    `_update_reference(...)`, the rule as written in reference.py.  Both keep the same state."""

    # A nan or inf in a gradient: "apply" updates as torch.optim does (the parameter becomes nan)
    # and warns naming it; "raise" refuses the step before anything changes (ValueError);
    # "skip" skips the whole step with a warning.  Set on an optimizer: opt.nonfinite = "skip".
    nonfinite = "apply"
    SETTINGS = {"nonfinite": one_of(NONFINITE)}     # checked when set (npbert/settings.py)

    # What a training loop asks an optimizer (npbert.training.Trainer asks every one the same):
    # whether its step applies a learning-rate schedule of its own (the loop's scheduler must then
    # leave "lr" alone) and whether it clips the gradients itself (the loop must not clip first).
    schedules_itself = False
    clips_itself = False

    @classmethod
    def for_training(cls, params, lr, betas, eps, max_grad_norm, num_warmup_steps, num_training_steps,
                     lr_scheduler_type):
        """The optimizer a training loop builds from transformers' arguments (TrainingArguments'
        learning_rate, (adam_beta1, adam_beta2), adam_epsilon, max_grad_norm, the warmup and
        total steps, lr_scheduler_type); the weight decay is in the groups `params`.  Here
        cls(params, lr, betas, eps): the schedule and the clipping are the loop's."""
        return cls(params, lr=lr, betas=betas, eps=eps)

    def __setattr__(self, name, value):
        if name in self.SETTINGS:
            value = checked(self, name, value)
        object.__setattr__(self, name, value)

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        self._params = {}                 # name -> the model's array (a plain view, updated in place)
        self._objects = {}                # name -> the Parameter object whose .grad step() reads (None: a plain array)
        self._scratch = {}                # dtype -> one buffer the size of the largest parameter
        if not isinstance(params, (list, tuple, dict, np.ndarray)) and not hasattr(params, "named_parameters"):
            params = list(params)                             # a generator: model.parameters()
        if isinstance(params, (list, tuple)) and params and isinstance(params[0], dict):
            groups = params
        else:
            groups = [{"params": params}]
        for group in groups:
            self.add_param_group(group)
        if not self._params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")

    def add_param_group(self, param_group):
        group = param_group
        where = f"{type(self).__name__} group {len(self.param_groups)}"
        if "params" not in group:
            raise KeyError(f"{where}: a parameter group needs a 'params' entry")
        unknown = set(group) - set(self.defaults) - {"params", "initial_lr"}
        if unknown:
            raise KeyError(f"{where}: unknown options {sorted(unknown)}; {type(self).__name__} takes "
                           f"{sorted(self.defaults)}")
        entries = _entries(group["params"], where)
        names, frozen = [], []
        for name, array, obj in entries:
            if name in self._params:
                if self._objects.get(name) is not obj or obj is None and self._params[name] is not array:
                    raise ValueError(f"{where}: two different parameters are named {name!r} (of two models?): "
                                     "give (name, parameter) pairs with distinct names")
                raise ValueError(f"{where}: parameter {name!r} appears more than once (in more than one group?)")
            self._params[name] = array
            self._objects[name] = obj
            names.append(name)
            if obj is not None and not obj.requires_grad:
                frozen.append(name)
        if frozen:
            warnings.warn(f"{where}: {len(frozen)} parameter(s) are frozen (requires_grad=False), e.g. {frozen[:3]}: "
                          "they get no gradient, so this optimizer will not change them", stacklevel=3)
        options = {k: v for k, v in group.items() if k != "params"}
        new_group = {"params": names, **self.defaults, **options}
        self._check_group(new_group, where)
        self.param_groups.append(new_group)

    def _check_group(self, group, where):
        lr = group["lr"]
        if not (isinstance(lr, (int, float)) and lr >= 0):
            raise ValueError(f"{where}: Invalid learning rate: {lr}")

    # ---- the step -------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Every parameter's `.grad` to None (torch's default), or to zeros with set_to_none=False.
        (The dict form needs nothing: model.backward() returns fresh gradients.)"""
        for obj in self._objects.values():
            if obj is None:
                continue
            if set_to_none:
                obj.grad = None
            elif obj.grad is not None:
                obj.grad[...] = 0

    def _grads_from_parameters(self):
        """{name: p.grad} for every parameter that has one: what step() reads without a dict."""
        plain = [name for name, obj in self._objects.items() if obj is None]
        if plain:
            raise TypeError(f"{type(self).__name__}.step() without arguments reads each parameter's .grad, but "
                            f"{plain[:3]} were given as plain arrays: build the optimizer from model.parameters() "
                            "(or named_parameters()), or pass the gradients, step(model.backward())")
        where = f"{type(self).__name__}.step()"
        grads = {}
        for name, obj in self._objects.items():
            obj._owner(where)                     # a freed model or a replaced parameter: an error naming it
            if obj.grad is not None:
                grads[name] = obj.grad
        return grads

    def _warn_without_gradients(self, grads):
        """A group none of whose parameters has a gradient is not updated: say so (torch is silent)."""
        idle = [i for i, g in enumerate(self.param_groups) if not any(grads.get(n) is not None for n in g["params"])]
        if not idle:
            return
        if len(idle) == len(self.param_groups):
            what = "no parameter has a gradient (every .grad is None)"
        else:
            what = "; ".join(f"group {i} ({len(self.param_groups[i]['params'])} parameters, e.g. "
                             f"{self.param_groups[i]['params'][0]!r}) has no gradient" for i in idle)
        warnings.warn(f"{type(self).__name__}.step(): {what}, so those parameters were not updated; call "
                      "loss.backward() (or pass model.backward()'s gradients) before step()", stacklevel=3)

    def step(self, grads=None, closure=None):
        """Update every parameter that has a gradient, in place: from `grads` ({name: array}, what
        model.backward() returns), or with no argument from each parameter's `.grad` (filled by
        loss.backward()), as torch.  A callable is torch's closure: it is called first (it runs the
        forward and loss.backward()) and its result returned."""
        result = None
        if closure is not None:            # step(closure=closure), as torch
            if not callable(closure):
                raise TypeError(f"{type(self).__name__}.step(closure=): a closure is a function, got "
                                f"{type(closure).__name__}")
            grads = closure
        if callable(grads):
            result, grads = grads(), None
        if grads is None:
            grads = self._grads_from_parameters()
        if not isinstance(grads, dict):
            raise TypeError(f"{type(self).__name__}.step(grads): grads must be the dict model.backward() "
                            f"returns (or nothing: then each parameter's .grad), got {type(grads).__name__}")
        self._warn_without_gradients(grads)
        unknown = [k for k in grads if k not in self._params]
        if unknown:
            raise KeyError(f"{type(self).__name__}.step: gradients for parameters this optimizer does not hold: "
                           f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
        if self.nonfinite not in NONFINITE:
            raise ValueError(f"{type(self).__name__}.nonfinite must be one of {NONFINITE}, got {self.nonfinite!r}")
        if self.nonfinite != "apply" and not self._all_finite(grads):
            return result                      # refused ("raise" raised) or skipped: nothing changed
        fast = get_path() == "fast"            # read at each step: a run may switch path between steps
        nonfinite = []
        for group in self.param_groups:
            for name in group["params"]:
                g = grads.get(name)
                if g is None:          # as torch skips p.grad is None
                    continue
                p = self._params[name]
                if not isinstance(g, np.ndarray) or g.shape != p.shape:
                    raise ValueError(f"{type(self).__name__}.step: gradient of {name!r} has shape "
                                     f"{getattr(g, 'shape', None)}, the parameter {p.shape}")
                if g.dtype != p.dtype:
                    raise TypeError(f"{type(self).__name__}.step: gradient of {name!r} is {g.dtype}, "
                                    f"the parameter {p.dtype}")
                state = self.state.setdefault(name, {})
                # invalid: inf / inf and 0 * inf come only from a non-finite gradient, which is
                # reported below by name (the threaded kernel quiets its own threads)
                with np.errstate(invalid="ignore"):
                    if fast:
                        finite = self._update(name, p, g, group, state)
                    else:
                        finite = bool(np.isfinite(g).all())
                        self._update_reference(name, p, g, group, state)
                if not finite:
                    nonfinite.append(name)
        if nonfinite:
            self._warn_nonfinite(nonfinite)
        return result

    def _all_finite(self, grads):
        """Before any update, with nonfinite "raise" or "skip": True when every gradient this step
        would use is finite; else a ValueError ("raise") or a warning ("skip") naming the
        parameters, and False.  One read of each gradient (all_finite)."""
        names = [name for group in self.param_groups for name in group["params"]
                 if isinstance(grads.get(name), np.ndarray) and not all_finite(grads[name])]
        if not names:
            return True
        listed = ", ".join(map(repr, names[:4])) + (" ..." if len(names) > 4 else "")
        what = (f"{type(self).__name__}.step(): the gradient of {len(names)} parameter(s) holds nan or inf "
                f"({listed})")
        if self.nonfinite == "raise":
            raise ValueError(f"{what}; the step was refused and nothing changed (nonfinite='raise'). Check the loss "
                             "and the inputs of this step; set opt.nonfinite = 'skip' to skip such steps with a "
                             "warning, or 'apply' to apply them as torch.optim does")
        warnings.warn(f"{what}; the step was skipped: no parameter and no optimizer state changed "
                      "(nonfinite='skip')", RuntimeWarning, stacklevel=3)
        return False

    def _warn_nonfinite(self, names):
        """A nan or inf in a gradient: the step is applied as torch.optim applies it (the
        parameter and its moments become nan/inf), and said, naming the parameters."""
        warnings.warn(f"{type(self).__name__}.step(): the gradient of {len(names)} parameter(s) holds nan or inf, "
                      f"first {names[0]!r}{' (also ' + ', '.join(map(repr, names[1:4])) + (' ...' if len(names) > 4 else '') + ')' if len(names) > 1 else ''}; "
                      "the update was applied as torch.optim applies it, so those parameters now hold nan/inf. "
                      "Check the loss and the inputs of this step; to refuse such a step instead, call "
                      "clip_grad_norm_(..., error_if_nonfinite=True) before step()", RuntimeWarning, stacklevel=3)

    def _scratch_like(self, p, index=0):
        """A view shaped like p into a preallocated buffer (one per dtype and index): the
        update's temporaries live there instead of in fresh arrays."""
        key = (p.dtype.str, index)
        buf = self._scratch.get(key)
        if buf is None or buf.size < p.size:
            largest = max(a.size for a in self._params.values() if a.dtype == p.dtype)
            buf = self._scratch[key] = np.empty(largest, dtype=p.dtype)
        return buf[:p.size].reshape(p.shape)

    # ---- state_dict -----------------------------------------------------------------
    def state_dict(self):
        """{"state": {name: {key: array or number}}, "param_groups": [{options..., "params": [names]}]}:
        plain numbers, strings and arrays (copies), so a checkpoint can store them without pickle."""
        state = {name: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
                 for name, s in self.state.items()}
        groups = [{k: (list(v) if k == "params" else v) for k, v in g.items()} for g in self.param_groups]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore what state_dict() returned.  The groups must hold the same parameter names."""
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if groups is None or "state" not in state_dict:
            raise KeyError(f"{type(self).__name__}.load_state_dict: expected a dict with 'state' and "
                           f"'param_groups', got {sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict)}")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the saved state has {len(groups)} parameter "
                             f"groups, this optimizer {len(self.param_groups)}")
        for i, (saved, group) in enumerate(zip(groups, self.param_groups)):
            if list(saved["params"]) != group["params"]:
                raise ValueError(f"{type(self).__name__}.load_state_dict: group {i} holds other parameters than "
                                 f"the saved one (first difference: "
                                 f"{next((a, b) for a, b in zip(list(saved['params']) + [None], group['params'] + [None]) if a != b)})")
        for saved, group in zip(groups, self.param_groups):
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for name, s in state_dict["state"].items():
            if name not in self._params:
                raise KeyError(f"{type(self).__name__}.load_state_dict: state for unknown parameter {name!r}")
            p = self._params[name]
            restored = {}
            for k, v in s.items():
                if isinstance(v, np.ndarray) and v.ndim > 0:
                    if v.shape != p.shape:
                        raise ValueError(f"{type(self).__name__}.load_state_dict: {name}.{k} has shape {v.shape}, "
                                         f"the parameter {p.shape}")
                    v = np.array(v, dtype=p.dtype, copy=True)
                elif isinstance(v, np.ndarray):
                    v = v.item()
                restored[k] = v
            self.state[name] = restored

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
            lines.append(f"    params: {len(g['params'])} arrays")
        return "\n".join(lines + [")"])
