"""A model's path (npbert/paths.py): fixed when the model is built, switched by set_path.

    model.path                  "fast" or "reference": the path its modules and ops were built for
    model.set_path("reference") the same parameters, its modules rebuilt as the other path's classes

A model built on the fast path is made of the fast twins (npbert/modeling/fast.py), one built on
the reference path of the reference classes (ModelState.module_class); `npbert.set_path` and
`using_path` choose the path of the models built after them.  A model called while the other
path is on runs its own path and says so once (PathWarning), as transformers' attention
implementation is chosen when a model is built and switched by `set_attn_implementation`.
"""
import warnings

from npbert.paths import PATHS, PathWarning, get_path

from .module import FAST_TWINS, Module, ModuleList


class ModelPath:
    @property
    def path(self):
        """"fast" or "reference": the path this model's modules and ops were built for."""
        return self.state.path

    def set_path(self, path):
        """Rebuild this model's modules for `path` ("fast" or "reference"): each module with a fast
        twin (npbert/modeling/fast.py) is replaced by a module of the other class holding the same
        parameters, and every module computes with that path's ops.  The model's own attributes are
        updated; a submodule object taken out of the model before the switch keeps its old class.
        The last forward's activations are dropped (run a new forward before backward()).  As
        transformers' `model.set_attn_implementation`.  Returns the model."""
        if path not in PATHS:
            raise ValueError(f"set_path: path must be one of {', '.join(map(repr, PATHS))}, got {path!r}")
        if not self._is_root:
            raise ValueError(f"set_path is called on the whole model, not on its submodule {self.prefix!r}")
        state = self.state
        if path == state.path:
            return self
        state.path = path
        for module in self.modules():            # an explicit choice: no PathWarning while this path is on
            if isinstance(module, ModelPath):
                module._path_chosen_under = get_path()
        reference = {twin: cls for cls, twin in FAST_TWINS.items()}
        # children before their parents, so that a replacement copies its children's replacements
        for _, module in reversed(list(self.named_modules())):
            for name, child in list(module.named_children()):
                base = reference.get(type(child), type(child))
                want = state.module_class(base)
                if isinstance(child, Module) and type(child) is not want:
                    replacement = want.__new__(want)
                    replacement.__dict__.update(child.__dict__)
                    if isinstance(module, ModuleList):
                        list.__setitem__(module, int(name), replacement)
                    else:
                        object.__setattr__(module, name, replacement)
        self._cache = None
        return self

    def _warn_if_other_path(self):
        """A model runs on its own path; say so once when the path in force now is another than the
        model's and than the one in force when its path was chosen (built, or set_path)."""
        now = get_path()
        if now not in (self.state.path, self._path_chosen_under) and getattr(self, "_warned_path", None) != now:
            self._warned_path = now
            warnings.warn(f"{type(self).__name__} was built on the {self.state.path} path and runs on it, although "
                          f"the {now} path is on now: npbert.set_path and using_path choose the path of models built "
                          f"after them; call model.set_path({now!r}) to switch this one", PathWarning, stacklevel=3)
