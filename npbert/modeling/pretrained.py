"""BertPreTrainedModel: what every top-level model shares.

It owns the flat parameter dict (keyed as transformers' `state_dict()`), initialises it as
transformers' `_init_weights`, loads and saves checkpoints, switches train/eval, and runs
`__call__` / `backward`:

    out = model(input_ids=..., ...)        # forward; the caches are kept on the model
    grads = model.backward(logits=dL)      # d sum(out.logits * dL) / d every parameter

A subclass builds its HF-named submodules in `__init__`, then calls `self.post_init()`,
and implements `forward(**inputs) -> (output, cache)` and
`_backward(cache, **upstream) -> (grads, d_inputs_embeds)`.

torch's way works too: the loss of a forward given labels has `loss.backward()`
(npbert/modeling/loss.py), which runs this model's backward and adds each gradient into its
parameter's `.grad` (npbert/modeling/parameter.py); `model.zero_grad()` clears them.
"""
import contextlib
import inspect
import threading
from collections import namedtuple

import numpy as np

from npbert.config import BertConfig
from npbert.paths import get_path

from . import fast  # noqa: F401 (its twin classes register in module.FAST_TWINS: ModelState.module_class)
from .fast_attention import share_qkv_memory
from .loading import _SKIP_INIT, CheckpointMixin, _no_init  # noqa: F401 (_no_init: weights_tools, tests)
from .loss import remember_outputs
from .loss_terms import HeadDeclaration
from .model_path import ModelPath
from .module import ModelState, Module
from .torch_api import TorchModuleAPI

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

_grad_mode = threading.local()


_OWNER_LOCK = threading.Lock()     # a forward call's activations, loss and thread set together


def is_grad_enabled():
    return getattr(_grad_mode, "enabled", True)


@contextlib.contextmanager
def no_grad():
    """As torch.no_grad(): forward calls inside keep no activations for a backward, so a
    forward's peak memory is one layer's worth.  A backward after such a forward is an error."""
    before = is_grad_enabled()
    _grad_mode.enabled = False
    try:
        yield
    finally:
        _grad_mode.enabled = before


def _check_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"npbert models compute in float32 or float64, not {dtype}")
    return dtype.type


class BertPreTrainedModel(HeadDeclaration, ModelPath, CheckpointMixin, TorchModuleAPI, Module):
    base_model_prefix = "bert"
    # Parameters under these prefixes may be missing from a checkpoint: they are then
    # initialised fresh with a warning (a task head, or the pooler), as transformers does.
    # Any other missing parameter is an error.
    _fresh_prefixes = ("pooler.", "bert.pooler.")
    # state_dict() names that are a second name of a parameter (tied weights): alias -> parameter.
    _tied_aliases = {}

    def __init__(self, config, seed=0, dtype=np.float32, *, _parent=None, _prefix=""):
        if not isinstance(config, BertConfig):
            raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
        if _parent is None:
            config.validate(dtype)
            init_seed, dropout_seed = np.random.SeedSequence(seed).spawn(2)
            state = ModelState(config, _check_dtype(dtype), np.random.default_rng(dropout_seed))
            state.training = True    # as a freshly built torch module; from_pretrained returns eval()
            self._init_rng = np.random.default_rng(init_seed)
        else:  # a submodule such as `self.bert` of a head: share the head's state
            state = _parent.state
        super().__init__(state, _prefix)
        self._is_root = _parent is None
        self._path_chosen_under = get_path()  # the path in force when the model's path was chosen (model_path.py)
        self._cache = None
        self._forward_id = 0                 # counts forward calls: a loss knows which one it came from
        self.head_loss = None                # the last forward's HeadLoss (loss_terms.py), None without labels
        self.inputs_embeds_grad = None

    def _may_start_fresh(self, name):
        """True when parameter `name` may be missing from a checkpoint and be initialised fresh (with
        a warning, as transformers): the pooler, a task head's own layers (`_fresh_prefixes`), and
        in a model with a `bert` inside (a head of your own), every parameter outside it."""
        if name.startswith(self._fresh_prefixes):
            return True
        base = getattr(self, self.base_model_prefix, None)
        return isinstance(base, Module) and base is not self and not name.startswith(self.base_model_prefix + ".")

    @property
    def dtype(self):
        return self.state.dtype

    # ---- initialisation -------------------------------------------------------------
    def post_init(self):
        """Create (and, unless loading, draw) every registered parameter, as HF's post_init."""
        if not self._is_root:
            return
        self._init_weights(None if _SKIP_INIT[0] else list(self.state.inits))
        share_qkv_memory(self.state)        # Q, K, V as blocks of one array (npbert/modeling/fast_attention.py)

    def _init_weights(self, names):
        """transformers' `_init_weights`: Linear and Embedding weights ~ N(0, initializer_range),
        biases 0, the embedding's padding row 0, LayerNorm weight 1 and bias 0.

        Weights are drawn in float64 and rounded to the model's dtype, so one seed gives the
        same model in float32 and float64.  `names=None` only allocates (zeros)."""
        std = self.config.initializer_range
        dtype = self.state.dtype
        draw = set(names or ())
        for name, (shape, init) in self.state.inits.items():
            if name not in draw:
                if name not in self.state.params:
                    self.state.params[name] = np.zeros(shape, dtype=dtype)
                continue
            if init == "zeros":
                value = np.zeros(shape, dtype=dtype)
            elif init == "ones":
                value = np.ones(shape, dtype=dtype)
            else:  # "normal" or ("embedding", padding_idx)
                value = self._init_rng.normal(0.0, std, size=shape).astype(dtype)
                if isinstance(init, tuple) and init[1] is not None:
                    value[init[1]] = 0
            self.state.params[name] = value

    # ---- parameters -----------------------------------------------------------------
    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, Parameter) in transformers' `named_parameters()` order, a tied weight once; the
        Parameters are the model's own arrays (npbert/modeling/parameter.py).  On a submodel
        (`model.bert`) the names are relative to it, as torch's."""
        if self._is_root and prefix == "" and recurse and remove_duplicate:
            return iter(self.state.params.items())
        return Module.named_parameters(self, prefix, recurse, remove_duplicate)

    def state_dict(self):
        """A flat dict keyed as transformers' `state_dict()` of the same class (buffers aside).

        The arrays are the model's own (no copy); a tied weight appears under both names.  On a
        submodel (`model.bert`) the keys are relative to it, as torch's."""
        if not self._is_root:
            return dict(self.named_parameters(remove_duplicate=False))
        d = dict(self.state.params)
        for alias, name in self._tied_aliases.items():
            d[alias] = self.state.params[name]
        return d

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays into the model (cast to its dtype).  With strict, missing or unexpected
        keys are an error; a shape that does not fit always is.  Returns (missing, unexpected)."""
        params = self.state.params
        unexpected = [k for k in state_dict if k not in params and k not in self._tied_aliases]
        missing = [k for k in params if k not in state_dict]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict for {type(self).__name__}: missing keys {missing}, "
                           f"unexpected keys {unexpected}")
        for name, value in state_dict.items():
            if name in self._tied_aliases:
                continue
            if name not in params:
                continue
            value = np.asarray(value)
            if value.shape != params[name].shape:
                raise ValueError(f"load_state_dict: {name} has shape {value.shape} in the given dict, "
                                 f"the model expects {params[name].shape}")
            if not (np.issubdtype(value.dtype, np.floating)):
                raise TypeError(f"load_state_dict: {name} has dtype {value.dtype}, expected floating point")
            params[name][...] = value          # in place: an optimizer holding the array sees the new values
        return IncompatibleKeys(missing, unexpected)

    @contextlib.contextmanager
    def batch_offset(self, first_row):
        """`with model.batch_offset(a): out = model(**batch)`: this batch is rows [a, a + B) of a
        larger, global batch (data parallelism: each process runs its share of the rows).  Row r
        then gets the dropout masks the global batch's row a + r gets (npbert/ops/dropout.py), so
        the shares together compute exactly what one process computes with the global batch,
        provided every process draws the same step seeds: give each the same generator state
        (`model.state.rng`), and one forward per step.  Outside the block rows count from 0."""
        first_row = int(first_row)
        if first_row < 0:
            raise ValueError(f"batch_offset: the first row's global index must be >= 0, got {first_row}")
        with self.state.call.setting(batch_offset=first_row):
            yield self

    # ---- train / eval ---------------------------------------------------------------
    def train(self, mode=True):
        """Dropout on (`mode=True`) or off."""
        self.state.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    @property
    def training(self):
        return self.state.training

    # ---- forward / backward ---------------------------------------------------------
    def __call__(self, *args, return_dict=None, output_intermediates=False, **kwargs):
        """Run forward and keep its caches for backward(), as transformers' forward call:
        positional arguments in forward's order (`model(input_ids)`, `model(input_ids, mask)`);
        `output_attentions` / `output_hidden_states` not given (or None) default to the config's
        fields of those names; `return_dict` (default: the config's, True) False returns the
        tuple transformers returns: the output's fields that are not None, in order
        (loss first when labels were given).

        `output_intermediates=True` (npbert's own): also keep every layer's queries, keys, values,
        attention scores and probabilities, context, FFN activation and hidden states, as
        `output.intermediates` (an Intermediates, npbert/modeling/outputs.py; last in the tuple
        when return_dict is False).  Nothing of it is kept otherwise."""
        kwargs = self._forward_kwargs(args, kwargs)
        if return_dict is None:
            return_dict = getattr(self.config, "return_dict", True)
        with _OWNER_LOCK:                   # (a model shared by threads: _check_own_forward)
            self._cache = None              # free the last forward's activations before making new ones
            self.head_loss = None
            self._forward_id += 1
            self._forward_thread = threading.get_ident()
        keep = is_grad_enabled()
        self._warn_if_other_path()
        self.state.new_step()               # in training: this forward's dropout seed (modeling/module.py)
        kept = [] if output_intermediates else None          # BertModel.forward appends its Intermediates
        with self.state.call.setting(keep_caches=keep, intermediates=kept):
            output, cache = self.forward(**kwargs)
        intermediates = kept[-1] if kept else None
        with _OWNER_LOCK:                   # what the backward reads, from one forward call
            self._cache = cache if keep else None
            self._forward_without_grad = not keep
            self._forward_thread = threading.get_ident()
            output = self._with_loss(output, kwargs, keep)
        if keep:                                             # a loss computed from them can be differentiated
            remember_outputs(self, self._forward_id, output)
        if output_intermediates:
            output.intermediates = intermediates
        if return_dict:
            return output
        return output.to_tuple() + ((intermediates,) if output_intermediates else ())

    def _forward_kwargs(self, args, kwargs):
        """Positional arguments bound to forward's parameter names; the output flags left
        unset take the config's values (transformers: `output_attentions if output_attentions
        is not None else self.config.output_attentions`)."""
        names = [n for n, p in inspect.signature(self.forward).parameters.items()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes at most {len(names)} positional arguments "
                            f"({', '.join(names)}), got {len(args)}")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
            kwargs[name] = value
        for flag in ("output_attentions", "output_hidden_states"):
            if flag in names and kwargs.get(flag) is None:
                kwargs[flag] = bool(getattr(self.config, flag, False))
        return kwargs

    def backward(self, cache=None, /, retain_graph=False, return_intermediate_grads=False, loss_scales=None,
                 **upstream):
        """Gradients of the last forward call, keyed as transformers' `named_parameters()`.

        Given a cache (a model inside a head of your own, called as a module: docs/custom_heads.md),
        `grads, dinputs_embeds = self.bert.backward(bert_cache, last_hidden_state=dh)` is the
        module pair's backward of `outputs, bert_cache = self.bert.forward(...)`: the gradients of
        that forward's parameters, keyed by their full names, and that of its input embeddings.

        After a forward given labels, `backward()` differentiates the loss.  Otherwise pass
        the upstream gradient of any subset of the outputs by name (e.g.
        `last_hidden_state=dH, pooler_output=dP`); the result is the gradient of
        sum(output * upstream) over the outputs given.  The gradient with respect to the
        input embeddings (the word embeddings looked up, or `inputs_embeds` when given),
        shaped (B, T, H), is left in `model.inputs_embeds_grad`.

        Frozen parameters (`model.freeze(...)`) are left out of the result and their gradients
        are not computed; when everything below some layer is frozen the backward stops there
        and `inputs_embeds_grad` is None (set `model.state.need_inputs_embeds_grad = True` to
        have it computed anyway).

        As torch's `backward()`, this frees the forward's activations layer by layer as it
        goes (so the peak memory of a training step stays low); pass `retain_graph=True`
        to keep them for another backward of the same forward.

        This returns the gradients and leaves the parameters' `.grad` alone; `outputs.loss.backward()`
        is the torch way, which adds them into `.grad` instead.

        `return_intermediate_grads=True` (npbert's own): return `(grads, intermediate_grads)`, the
        second an IntermediateGrads (npbert/modeling/outputs.py): the gradient of the same target
        with respect to every hidden state, every layer's attention probabilities and every
        head's head-mask value.  The backward then runs down to the embeddings whatever is frozen.

        `loss_scales={term: a}` (npbert's own, for data-parallel training): the gradient of
        sum over the loss's terms of a_term * weight_term * mean_term, the terms as the model's
        `loss_terms(batch)` names them (npbert/modeling/loss_terms.py); with one scale for
        every term it is `backward(loss=a)`.
        """
        if cache is not None:                      # called as a module, from the backward of its owner
            if retain_graph or return_intermediate_grads or loss_scales is not None or "loss" in upstream:
                raise TypeError(f"{type(self).__name__}.backward(cache, ...) as a module takes the upstream "
                                "gradients by output name only")
            return self._backward(cache, **upstream)
        self._check_own_forward()
        if loss_scales is not None:
            if upstream.get("loss") is not None:
                raise TypeError("backward(): give loss= (one scale) or loss_scales= (one per term), not both")
            upstream["loss"] = dict(loss_scales)
        if all(v is None for v in upstream.values()):
            if self.head_loss is None and self._cache is not None:      # (no forward at all: _run_backward says so)
                names = self._upstream_names()
                if not self._computes_a_loss():
                    raise ValueError(f"{type(self).__name__} computes no loss: backward() needs the upstream gradient "
                                     f"of at least one output by name, e.g. backward({names[0]}=...) (it takes "
                                     f"{', '.join(names)})")
                raise RuntimeError(
                    f"{type(self).__name__}.backward() without an upstream gradient differentiates the loss, but the "
                    f"last forward call computed no loss ({self._label_hint()}). Pass the labels to the forward, or "
                    f"pass the upstream gradient of an output by name, e.g. backward({names[0]}=...) "
                    f"(it takes {', '.join(names + ['loss'])})")
            upstream["loss"] = 1.0
        grads, intermediate_grads = self._run_backward(retain_graph, upstream, return_intermediate_grads)
        # transformers' named_parameters() order, every trainable parameter present (zeros if
        # unused); frozen parameters (model.freeze) are left out.
        frozen = self.state.frozen
        grads = {name: grads[name] if name in grads else np.zeros(p.shape, dtype=p.dtype)
                 for name, p in self.state.params.items() if name not in frozen}
        return (grads, intermediate_grads) if return_intermediate_grads else grads

    def _check_own_forward(self):
        """One model in several threads: forward calls work side by side (each call's options are
        its own: npbert/modeling/call.py), but the model keeps one forward's activations, the last
        one's, as torch's graph hangs on one output.  A backward after another thread's forward
        is refused, instead of differentiating that other forward."""
        other = getattr(self, "_forward_thread", None)
        if other is not None and other != threading.get_ident():
            raise RuntimeError(
                f"{type(self).__name__}.backward(): the last forward call of this model ran in another thread, so the "
                "activations it keeps are that call's, not this thread's.  A model keeps one forward's activations: "
                "give each thread that trains or differentiates a model of its own (built the same way, then "
                "model.load_state_dict(other.state_dict())), or run forward and backward under one lock")

    def _run_backward(self, retain_graph, upstream, return_intermediate_grads=False):
        """(the gradients of the last forward that the backward computed, {name: array};
        the IntermediateGrads when asked, else None)."""
        if self._cache is None and getattr(self, "_forward_without_grad", False):
            raise RuntimeError(f"{type(self).__name__}.backward(): the last forward ran under npbert.no_grad(), "
                               "which keeps no activations; run the forward outside it")
        if self._cache is None:
            raise RuntimeError(f"{type(self).__name__}.backward() called before any forward call, or a second "
                               "time after one forward: pass retain_graph=True to the first backward to keep "
                               "the forward's activations")
        # Bad upstream gradients are rejected before any layer's cache is released, so a
        # backward that raises leaves the forward usable.
        upstream = {k: v for k, v in upstream.items() if v is not None}
        dloss = upstream.pop("loss", None)
        accepted = self._upstream_names()
        takes_any = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(self._backward).parameters.values())
        unknown = [n for n in upstream if n not in accepted]
        if unknown and not takes_any:
            raise TypeError(f"{type(self).__name__}.backward() got unexpected keyword(s) {unknown}: it takes the "
                            f"upstream gradient of an output by name, one of {accepted + ['loss']} (and retain_graph)")
        if dloss is not None:                      # the loss's upstream -> its outputs' (loss_terms.py)
            if self.head_loss is None:
                raise ValueError(f"{type(self).__name__}.backward(): a gradient for loss was given, but the last "
                                 f"forward computed no loss ({self._label_hint()})")
            for name, d in self.head_loss.backward(dloss).items():
                if name not in accepted and not takes_any:
                    raise TypeError(f"{type(self).__name__}: its loss term differentiates {name!r}, which its "
                                    f"_backward does not take (it takes {accepted})")
                upstream[name] = d if upstream.get(name) is None else np.asarray(upstream[name]) + d
        kept = [] if return_intermediate_grads else None     # BertModel._backward appends its IntermediateGrads
        with self.state.call.setting(release_caches=not retain_graph, intermediate_grads=kept):
            grads, dembeds = self._backward(self._cache, **upstream)
        intermediate_grads = kept[-1] if kept else None
        if not retain_graph:
            self._cache = None
            if self.head_loss is not None:
                self.head_loss.release()
        self.inputs_embeds_grad = dembeds
        return grads, intermediate_grads
