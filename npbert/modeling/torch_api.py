"""torch.nn.Module / transformers idioms on a whole npbert model: what a tutorial reader types.

    model.parameters()                 the model's Parameter objects (npbert/modeling/parameter.py)
    outputs.loss.backward()            every gradient added into its parameter's .grad (_backward_into_grads)
    model.zero_grad()                  every .grad back to None (npbert/modeling/module.py, as every module)
    print(model), named_modules()      torch's tree, every nn.Linear / LayerNorm / Dropout included
    model.get_input_embeddings()       bert.embeddings.word_embeddings, an Embedding module
    model.get_output_embeddings()      cls.predictions.decoder (its weight IS the word embeddings'), or None
    model.tie_weights()                transformers' tie: here a check, the two are one Parameter
    model.resize_token_embeddings(n)   V -> n rows (and the MLM bias), config.vocab_size = n
    model.to("cpu"), model.cpu()       the model itself (npbert runs on the CPU); "cuda" is an error
    model.to(np.float64), .double()    every parameter converted (.float(): float32)

npbert's parameters live in the model's one dict `model.state.params`; `resize_token_embeddings`
puts a NEW (n, H) Parameter there (as torch's makes a new nn.Embedding): an optimizer built
before holds the old one and says so when stepped (build it again after resizing).
"""
import numpy as np

from npbert import unsupported
from npbert.config import BertConfig

from .fast_attention import share_qkv_memory
from .torch_refused import REFUSED_METHODS

_CPU_ONLY = ("npbert runs on the CPU only (NumPy, no GPU): model.to({what!r}) is not possible. Tutorials that "
             "pick `device = 'cuda' if torch.cuda.is_available() else 'cpu'` run unchanged (with no GPU they take "
             "'cpu'); or write model.to('cpu'), which returns the model as it is")


def _device_type(device):
    """"cpu", "cuda", ... of a device given as torch accepts it: "cuda:0", torch.device("cpu"), 0."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        return "cuda"                                   # torch: an int is a CUDA device index
    text = str(getattr(device, "type", device))
    return text.split(":")[0].strip().lower()


def _as_float_dtype(dtype):
    """np.float32 / np.float64 from a NumPy dtype, its name, or torch.float32 / torch.float64; others
    (float16, bfloat16, integers) are an error: npbert computes in float32 or float64."""
    name = str(dtype).replace("torch.", "")
    name = {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)
    try:
        dt = np.dtype(name if str(dtype).startswith("torch.") else dtype)
    except TypeError:
        raise TypeError(f"to(): {dtype!r} is not a dtype npbert knows; npbert computes in float32 or float64") from None
    if dt not in (np.float32, np.float64):
        raise TypeError(f"to(): npbert models compute in float32 or float64, not {dt}")
    return dt.type


def _is_dtype(x):
    if isinstance(x, (np.dtype, type)):
        return True
    text = str(x)
    return text.startswith("torch.") and not hasattr(x, "shape") or text in (
        "float32", "float64", "float16", "bfloat16", "float", "double", "half")


class TorchModuleAPI:
    """Mixed into BertPreTrainedModel: torch's and transformers' whole-model idioms."""

    # ---- loss.backward() -------------------------------------------------------------------
    def _backward_into_grads(self, upstream, retain_graph, forward_id):
        """What `loss.backward()` runs (npbert/modeling/loss.py): the backward of the forward that
        made the loss, with the upstream gradients {output name: gradient} ({"loss": scale} for the
        model's own loss), each parameter's gradient added into p.grad (None -> it), as torch
        accumulates.  Frozen parameters get none, and neither does a parameter the loss did not
        use (as torch leaves their .grad None)."""
        if forward_id != self._forward_id:
            raise RuntimeError(f"loss.backward(): this loss comes from forward call {forward_id} of the "
                               f"{type(self).__name__}, which has been called again since (call {self._forward_id}); "
                               "only the last call's activations are kept: call backward() on the last loss")
        grads, _ = self._run_backward(retain_graph, dict(upstream))
        params, frozen = self.state.params, self.state.frozen
        for name, g in grads.items():
            if name in frozen:                      # (a Linear computes dW and db together when one is trainable)
                continue
            p = params[name]
            if p.grad is None:
                p.grad = g if g.flags.writeable else g.copy()
            else:
                p.grad += g                         # accumulates until zero_grad(), as torch

    # ---- freezing (torch's `p.requires_grad = False`) ----------------------------------
    def freeze(self, *prefixes):
        """Freeze the parameters named by `prefixes` (all of them when none is given): a prefix
        matches a name equal to it or starting with it followed by "." ("bert.embeddings",
        "bert.encoder.layer.0", "classifier.bias").  A frozen parameter gets no gradient:
        backward() leaves it out of the dict and skips the work that would compute it (and
        stops going down the layers when nothing below needs a gradient); optimizers built
        from optimizer_grouped_parameters leave it out.  Returns the model."""
        self.state.frozen |= set(self._match(prefixes, "freeze"))
        return self

    def unfreeze(self, *prefixes):
        """Undo freeze() for `prefixes` (everything when none is given).  Returns the model."""
        self.state.frozen -= set(self._match(prefixes, "unfreeze"))
        return self

    def is_trainable(self, name):
        """False when the parameter `name` is frozen."""
        if name not in self.state.params:
            raise KeyError(f"{type(self).__name__} has no parameter {name!r}")
        return name not in self.state.frozen

    def _match(self, prefixes, what):
        names = list(self.state.params)
        if not prefixes:
            return names
        matched = []
        for prefix in prefixes:
            prefix = prefix.rstrip(".")
            hits = [n for n in names if n == prefix or n.startswith(prefix + ".")]
            if not hits:
                tops = sorted({".".join(n.split(".")[:2]) for n in names})
                raise KeyError(f"{type(self).__name__}.{what}({prefix!r}): no parameter has that name or prefix; "
                               f"prefixes include {tops[:8]}")
            matched += hits
        return matched

    def num_parameters(self, only_trainable=False, exclude_embeddings=False):
        """The number of parameter values (a tied weight once), as transformers'
        `num_parameters`: only the trainable ones with `only_trainable=True`."""
        return sum(int(np.prod(v.shape)) for n, v in self.named_parameters()
                   if not (only_trainable and self.prefix + n in self.state.frozen)
                   and not (exclude_embeddings and n.endswith("embeddings.weight")))

    @property
    def base_model(self):
        """transformers' base_model: the BertModel inside a head (`model.bert`); a BertModel itself."""
        return getattr(self, self.base_model_prefix, self)

    # ---- input and output embeddings -------------------------------------------------------
    def get_input_embeddings(self):
        """The word embeddings module (V, H), `bert.embeddings.word_embeddings`: `.weight` is the
        model's Parameter."""
        return getattr(self, "bert", self).embeddings.word_embeddings

    def get_output_embeddings(self):
        """The MLM decoder `cls.predictions.decoder` (a Linear H -> V whose weight is the word
        embeddings' Parameter and whose bias is cls.predictions.bias), or None for a model without
        an LM head, as transformers."""
        predictions = getattr(getattr(self, "cls", None), "predictions", None)
        return None if predictions is None else predictions.decoder

    def tie_weights(self, *args, **kwargs):
        """transformers' tie_weights(): the output embeddings (MLM decoder) take the input embeddings'
        weight.  npbert builds them tied: the decoder's weight IS the word embeddings' Parameter
        (one object, two state_dict names), so there is nothing to copy; this checks it.  npbert
        has no untied decoder: `config.tie_word_embeddings=False` is an error here."""
        out = self.get_output_embeddings()
        if out is None:
            return
        if not getattr(self.config, "tie_word_embeddings", True):
            raise NotImplementedError(f"{type(self).__name__}.tie_weights(): config.tie_word_embeddings is False, "
                                      "but npbert's MLM decoder is always the word embedding matrix (tied)")
        if out.weight is not self.get_input_embeddings().weight:
            raise RuntimeError("tie_weights(): the MLM decoder's weight is not the word embeddings' Parameter")

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """Resize the word embeddings (V, H) -> (n, H), as transformers: rows [0, min(V, n)) are
        kept; new rows, with `mean_resizing` (transformers' default), are drawn from a normal
        with the old rows' mean and 1e-9 times their covariance, else from N(0, initializer_range).
        The MLM decoder (tied) follows; its bias (V,) keeps its entries and new ones get the old
        mean (or 0).  `config.vocab_size` becomes n.  Returns get_input_embeddings().

        The model's dict stays the one source of truth: the table (and bias) are NEW arrays in
        it, so an optimizer built before holds the old ones: build the optimizer after resizing."""
        name = self.get_input_embeddings()._own["weight"]
        old = self.state.arrays[name]
        V, H = old.shape
        n = V if new_num_tokens is None else int(new_num_tokens)
        if pad_to_multiple_of is not None:
            n = -(-n // int(pad_to_multiple_of)) * int(pad_to_multiple_of)       # round up
        if n <= 0:
            raise ValueError(f"resize_token_embeddings: new_num_tokens must be positive, got {n}")
        if n == V:
            return self.get_input_embeddings()
        pad = self.config.pad_token_id
        if pad is not None and pad >= n:
            raise ValueError(f"resize_token_embeddings({n}): pad_token_id={pad} would fall outside the table")
        rng = getattr(self, "_init_rng", None) or np.random.default_rng(0)
        new = np.empty((n, H), dtype=old.dtype)
        keep = min(V, n)
        new[:keep] = old[:keep]
        if n > V:
            if mean_resizing:
                x = old.astype(np.float64)
                mean = x.mean(axis=0)                                            # (H,)
                cov = (x - mean).T @ (x - mean) / V                              # (H, H)
                new[V:] = rng.multivariate_normal(mean, 1e-9 * cov, size=n - V, method="eigh")
            else:
                new[V:] = rng.normal(0.0, self.config.initializer_range, size=(n - V, H))
        self.state.params[name] = new                                            # same key: order kept
        self.state.inits[name] = ((n, H), self.state.inits[name][1])
        for bias_name in [k for k in self.state.params if k.endswith("predictions.bias")]:
            b = self.state.arrays[bias_name]
            nb = np.empty((n,), dtype=b.dtype)
            nb[:keep] = b[:keep]
            nb[keep:] = b.mean() if mean_resizing else 0.0
            self.state.params[bias_name] = nb
            self.state.inits[bias_name] = ((n,), self.state.inits[bias_name][1])
        self.config.vocab_size = n
        self._cache = None                     # a forward before the resize cannot be differentiated now
        return self.get_input_embeddings()

    # ---- gradient checkpointing, as transformers' ------------------------------------------
    supports_gradient_checkpointing = True

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        """Each encoder layer keeps only its inputs in a training forward and runs again in the
        backward (npbert/modeling/encoder.py): the same gradients, bit for bit, with one layer's
        activations held at a time instead of all of them, for about one more forward of the
        encoder.  gradient_checkpointing_kwargs (torch.utils.checkpoint's use_reentrant, ...) are
        accepted and have nothing to choose here."""
        self._set_gradient_checkpointing(True)

    def gradient_checkpointing_disable(self):
        self._set_gradient_checkpointing(False)

    @property
    def is_gradient_checkpointing(self):
        return any(getattr(m, "gradient_checkpointing", False) for m in self.modules())

    def _set_gradient_checkpointing(self, on):
        encoders = [m for m in self.modules() if hasattr(m, "gradient_checkpointing")]
        if not encoders:
            raise ValueError(f"{type(self).__name__} has no encoder to checkpoint")
        for m in encoders:
            m.gradient_checkpointing = bool(on)

    # ---- devices and dtypes, as torch's Module.to --------------------------------------------
    def to(self, *args, **kwargs):
        """torch's `model.to(device)`, `model.to(dtype)`, `model.to(device, dtype)`, `model.to(tensor)`
        (its device and dtype) and the keywords device=, dtype=, non_blocking=, copy=, memory_format=.
        The device must be the CPU ("cpu", "cpu:0", torch.device("cpu")): the model is returned as it
        is; any other device is an error that says so.  A dtype (float32 or float64) converts every
        parameter, as `model.to(torch.float64)` does; an optimizer built before holds the old arrays,
        so build it after converting.  Returns the model."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None), kwargs.pop("copy", None), kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword(s) {sorted(kwargs)}")
        for a in args:
            if _is_dtype(a):
                dtype = a
            elif hasattr(a, "dtype") and hasattr(a, "shape"):         # a tensor or an array: its device and dtype
                device = getattr(a, "device", device)
                dtype = a.dtype
            else:
                device = a
        if device is not None and _device_type(device) != "cpu":
            raise RuntimeError(_CPU_ONLY.format(what=str(device)))
        if dtype is not None:
            self._convert(_as_float_dtype(dtype))
        return self

    def cpu(self):
        """The model itself: npbert computes on the CPU."""
        return self

    def cuda(self, device=None):
        raise RuntimeError(_CPU_ONLY.format(what="cuda" if device is None else f"cuda:{device}"))

    def double(self):
        """Every parameter to float64 (torch's Module.double()).  Returns the model."""
        return self.to(np.float64)

    def float(self):
        """Every parameter to float32 (torch's Module.float()).  Returns the model."""
        return self.to(np.float32)

    def half(self):
        raise TypeError("half(): npbert models compute in float32 or float64, not float16")

    @property
    def device(self):
        """"cpu": where every npbert model computes (transformers' model.device)."""
        return "cpu"

    main_input_name = "input_ids"
    config_class = BertConfig

    def get_memory_footprint(self, return_buffers=True):
        """Bytes held by the parameters (npbert keeps no buffers)."""
        return int(sum(a.nbytes for a in self.state.arrays.values()))

    def get_parameter(self, target):
        """The Parameter named `target` ("bert.pooler.dense.weight"), as torch."""
        params = dict(self.named_parameters())
        if target not in params:
            raise AttributeError(f"{type(self).__name__} has no parameter {target!r}")
        return params[target]

    def apply(self, fn):
        """fn(module) for every submodule, children first, then the model itself, as torch.  Returns the model."""
        for module in reversed(list(self.modules())):
            fn(module)
        return self

    # transformers 5's names for gradient checkpointing
    def activation_checkpointing_enable(self, activation_checkpointing_kwargs=None, every_n_layers=None,
                                        offload=None):
        unsupported.refuse_keywords("activation_checkpointing_enable()",
                                    dict(every_n_layers=every_n_layers, offload=offload),
                                    {"every_n_layers": "npbert checkpoints every encoder layer",
                                     "offload": "npbert keeps activations in memory (no device to offload from)"})
        self._set_gradient_checkpointing(True)

    def activation_checkpointing_disable(self):
        self._set_gradient_checkpointing(False)

    @property
    def is_activation_checkpointing(self):
        return self.is_gradient_checkpointing

    def _convert(self, dtype):
        if not self._is_root:
            raise ValueError(f"to({np.dtype(dtype).name}) converts the whole model: call it on the model, not on "
                             f"its submodule {self.prefix!r}")
        state = self.state
        if dtype == state.dtype:
            return
        for name in list(state.params):
            state.params[name] = state.arrays[name].astype(dtype)       # new Parameters (their .grad None)
        state.dtype = dtype
        share_qkv_memory(state)          # Q, K, V as blocks of one array again (npbert/modeling/fast_attention.py)
        self._cache = None               # a forward in the old dtype cannot be differentiated now


unsupported.install(TorchModuleAPI, REFUSED_METHODS)
