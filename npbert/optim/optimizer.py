"""The Optimizer base: parameter groups, per-parameter state, state_dict, as torch.optim.Optimizer.

npbert has no tensors with a `.grad`: a model's `backward()` returns a dict
`{name: gradient}`, and `opt.step(grads)` takes that dict.  The optimizer keeps references
to the model's own arrays (the values of `model.named_parameters()`) and updates them in
place, so the model sees every step without being told.

    params       (name, array) pairs, a {name: array} dict, or a list of groups
                 {"params": pairs, "lr": ..., "weight_decay": ...} whose keys override
                 the optimizer's defaults (torch's per-group options)
    param_groups list of dicts: "params" (the names, in order) and the options; a
                 scheduler writes "lr" here
    state        {name: {"step": int, "exp_avg": array, ...}}, filled on the first step
"""
import numpy as np


def _pairs(params, where):
    """(name, array) pairs from a dict, a model, or an iterable of pairs."""
    if hasattr(params, "named_parameters"):
        params = params.named_parameters()
    if isinstance(params, dict):
        params = params.items()
    pairs = []
    for item in params:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"{where}: params must be (name, array) pairs as model.named_parameters() gives, "
                            f"got an item of type {type(item).__name__}")
        name, array = item
        if not isinstance(array, np.ndarray) or not np.issubdtype(array.dtype, np.floating):
            raise TypeError(f"{where}: parameter {name!r} must be a floating-point numpy array, "
                            f"got {type(array).__name__}{'' if not hasattr(array, 'dtype') else ' ' + str(array.dtype)}")
        pairs.append((name, array))
    return pairs


class Optimizer:
    """Base class.  A subclass sets `defaults` and implements `_update(name, p, g, group, state)`."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        self._params = {}                 # name -> the model's array (a reference, updated in place)
        self._scratch = {}                # dtype -> one buffer the size of the largest parameter
        if isinstance(params, (list, tuple)) and params and isinstance(params[0], dict):
            groups = params
        else:
            groups = [{"params": params}]
        for group in groups:
            self.add_param_group(group)
        if not self._params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")

    def add_param_group(self, group):
        where = f"{type(self).__name__} group {len(self.param_groups)}"
        if "params" not in group:
            raise KeyError(f"{where}: a parameter group needs a 'params' entry")
        unknown = set(group) - set(self.defaults) - {"params", "initial_lr"}
        if unknown:
            raise KeyError(f"{where}: unknown options {sorted(unknown)}; {type(self).__name__} takes "
                           f"{sorted(self.defaults)}")
        pairs = _pairs(group["params"], where)
        names = []
        for name, array in pairs:
            if name in self._params:
                raise ValueError(f"{where}: parameter {name!r} appears in more than one group")
            self._params[name] = array
            names.append(name)
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
        """Nothing to do: npbert's backward returns fresh gradients.  Kept so torch loops read the same."""

    def step(self, grads):
        """Update every parameter that has an entry in `grads` ({name: array}), in place."""
        if not isinstance(grads, dict):
            raise TypeError(f"{type(self).__name__}.step(grads): grads must be the dict model.backward() "
                            f"returns, got {type(grads).__name__}")
        unknown = [k for k in grads if k not in self._params]
        if unknown:
            raise KeyError(f"{type(self).__name__}.step: gradients for parameters this optimizer does not hold: "
                           f"{unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
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
                self._update(name, p, g, group, self.state.setdefault(name, {}))

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
