"""from_pretrained and save_pretrained: what BertPreTrainedModel inherits to read and write
checkpoint directories (the formats themselves are npbert/io)."""
import contextlib
import inspect
import os
import sys
import warnings

import numpy as np

from npbert import io
from npbert.config import CONFIG_FIELDS, BertConfig, find_config_file, read_config_dict
from npbert.io.atomic_dir import atomic_directory
from npbert.io.checks import check_loaded, check_no_interrupted_save, check_saved_weights
from npbert.io.hub import hub_name_message, pop_hub_keywords

from .fast_attention import share_qkv_memory

_SKIP_INIT = [False]   # set by from_pretrained: do not draw weights that are about to be loaded


@contextlib.contextmanager
def _no_init():
    _SKIP_INIT[0] = True
    try:
        yield
    finally:
        _SKIP_INIT[0] = False


_NPBERT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_stacklevel():
    """warnings.warn's stacklevel for the caller's first frame outside npbert, so that a loading
    warning names the user's line also when an Auto class or the Trainer called from_pretrained."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_NPBERT_DIR):
        frame, level = frame.f_back, level + 1
    return level


class CheckpointMixin:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, dtype=np.float32, config=None, from_tf=False,
                        output_loading_info=False, ignore_mismatched_sizes=False, **kwargs):
        """Load `path`: a directory holding a config and one weights file, or a weights file.

        Formats: model.safetensors, pytorch_model.bin, tf_model.h5, Google's bert_model.ckpt,
        npbert .h5; `from_tf=True` reads the directory's TensorFlow checkpoint (tf_model.h5 or
        bert_model.ckpt) even when it holds another format too.  `config`: a BertConfig to use
        instead of the stored one.  Other keywords are config fields (`num_labels=3`,
        `output_attentions=True`, ...) that override the loaded config, or options of the class's
        constructor (`add_pooling_layer=False`); the keywords that only concern a model hub
        (`cache_dir`, `revision`, `local_files_only`, `force_download`, `proxies`, `token`,
        `trust_remote_code`, ...: npbert/io/hub.py) are accepted and do nothing (npbert reads local
        files only); any other keyword is an error, and a config whose `model_type` is not "bert"
        a warning.  Keys the class does not use are named in a warning; a missing task head (or
        pooler) is initialised fresh with a warning naming its keys; any other missing key, or a
        shape that does not fit, is an error naming the key (with ignore_mismatched_sizes=True, as
        transformers, a weight whose shape does not fit is drawn fresh, with a warning naming it).  `output_loading_info=True` returns
        (model, {"missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"}) as transformers.
        """
        pop_hub_keywords(kwargs)
        if "torch_dtype" in kwargs:          # transformers' old name of dtype (renamed in 4.56)
            warnings.warn("`torch_dtype` is deprecated! Use `dtype` instead!", FutureWarning,
                          stacklevel=_user_stacklevel())
            dtype = _numpy_dtype(kwargs.pop("torch_dtype"))
        path = os.fspath(pretrained_model_name_or_path)
        if not os.path.exists(path) and not os.path.exists(path + ".index"):
            raise io.CheckpointError(f"{cls.__name__}.from_pretrained: '{path}' is not a directory or a weights file."
                                     + hub_name_message(path, "models", "AutoModel"))
        if os.path.isdir(path):
            check_no_interrupted_save(path)
        weights_file = io.find_weights_file(path, from_tf=from_tf)
        if config is not None:
            if not isinstance(config, BertConfig):
                raise TypeError(f"from_pretrained: config must be a BertConfig, got {type(config).__name__}")
            config_source, stored = "the given config", config.to_dict()
        elif io.detect_format(weights_file) == io.NPBERT_H5:
            config_source = f"the config stored in {weights_file}"
            stored = io.read_npbert_h5_config(weights_file)
        else:
            config_source = find_config_file(weights_file)
            stored = read_config_dict(config_source)
        model_kwargs, config_overrides = _split_kwargs(cls, kwargs, stored)
        if stored.get("model_type", "bert") != "bert":
            warnings.warn(f"{config_source} has model_type={stored['model_type']!r}: you are using a model of "
                          f"that type to instantiate {cls.__name__} (BERT); this is not supported for all "
                          "configurations and can yield errors", stacklevel=_user_stacklevel())
        try:
            if config is None:
                config = BertConfig.from_dict(stored, **config_overrides)
            elif config_overrides:
                config = BertConfig.from_dict(config.to_dict(), **config_overrides)
            config.validate(dtype)                 # before reading or allocating anything
        except (ValueError, TypeError) as e:
            raise ValueError(f"{config_source}: {e}") from None
        checkpoint = io.read_state_dict(weights_file)
        check_loaded(checkpoint, config, weights_file, config_source)   # layer count, finite weights
        if os.path.isdir(path):
            check_saved_weights(path, weights_file)     # its manifest.json, if any: a bit flip, swapped names
        with _no_init():
            model = cls(config, dtype=dtype, **model_kwargs)
        expected = {name: p.shape for name, p in model.state.params.items()}
        result = io.match_state_dict(checkpoint, expected, base_model_prefix=cls.base_model_prefix)
        resized = []
        if result.mismatched and ignore_mismatched_sizes:    # as transformers: drawn fresh, with a warning
            resized = [k for k, _, _ in result.mismatched]
            warnings.warn(f"Some weights of {cls.__name__} were not initialized from {weights_file} and are newly "
                          "initialized because the shapes did not match: " + "; ".join(
                              f"{k}: found shape {tuple(c)} in the checkpoint and {tuple(m)} in the model"
                              for k, c, m in result.mismatched), stacklevel=_user_stacklevel())
        elif result.mismatched:
            shown = 5
            lines = [f"  {k}: checkpoint {tuple(c)}, model {tuple(m)}" for k, c, m in result.mismatched[:shown]]
            if len(result.mismatched) > shown:
                lines.append(f"  ... and {len(result.mismatched) - shown} more tensors")
            raise ValueError(f"{weights_file}: shapes do not fit {cls.__name__} built from {config_source}"
                             f"{' with overrides ' + str(config_overrides) if config_overrides else ''} "
                             f"({len(result.mismatched)} tensors differ):\n" + "\n".join(lines))
        fresh = [k for k in result.missing if model._may_start_fresh(k)]
        missing = [k for k in result.missing if not model._may_start_fresh(k)]
        if missing:
            raise ValueError(f"{weights_file}: {cls.__name__} needs {len(missing)} weights the checkpoint "
                             f"does not have: {missing}")
        if result.unexpected:
            warnings.warn(f"Some weights of {weights_file} were not used when initializing {cls.__name__}: "
                          f"{result.unexpected}", stacklevel=_user_stacklevel())
        if fresh:
            warnings.warn(f"Some weights of {cls.__name__} were not in {weights_file} and are newly "
                          f"initialized: {fresh}", stacklevel=_user_stacklevel())
        model._init_weights(fresh + resized)
        dtype = model.state.dtype
        for name, value in result.state_dict.items():
            model.state.params[name] = np.array(value, dtype=dtype, copy=True)
        share_qkv_memory(model.state)     # Q, K, V as blocks of one array (npbert/modeling/fast_attention.py)
        model.eval()                 # as transformers' from_pretrained
        if output_loading_info:
            return model, {"missing_keys": fresh, "unexpected_keys": list(result.unexpected),
                           "mismatched_keys": list(result.mismatched),
                           "error_msgs": []}
        return model

    def save_pretrained(self, save_directory, format="safetensors", manifest=True, safe_serialization=True):
        """Write config.json and model.safetensors (or npbert_model.h5 with format="h5"),
        loadable by transformers' `from_pretrained` (safetensors).  Both files are written into
        a temporary directory and moved into place together (npbert.io.atomic_dir): a kill or a
        full disk never leaves the weights of one save beside the config of another.  A
        manifest.json with the weights' size and SHA-256 goes with them; from_pretrained checks it
        (manifest=False: none, for a writer that lists the whole directory itself, last, as the
        Trainer's checkpoints do: there a manifest means the directory is complete)."""
        directory = save_directory
        if safe_serialization is not True:       # transformers 4's keyword: True is safetensors, what npbert writes
            raise ValueError("save_pretrained(safe_serialization=False): npbert writes model.safetensors (or its own "
                             ".h5 with format='h5'), not pytorch_model.bin; leave safe_serialization=True")
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise NotADirectoryError(f"save_pretrained({directory!r}): that path is an existing file; "
                                     "save_pretrained writes a directory (config.json and the weights)")
        if format not in ("safetensors", "h5"):
            raise ValueError(f"save_pretrained: format must be 'safetensors' or 'h5', got {format!r}")
        config = BertConfig.from_dict(self.config.to_dict(), architectures=[type(self).__name__])
        # One copy per parameter: a tied weight is saved under its own name only, as
        # transformers' save_pretrained does; loading re-ties it.
        tensors = {k: np.ascontiguousarray(v) for k, v in self.state.params.items()}
        with atomic_directory(directory) as tmp:
            weights = "model.safetensors" if format == "safetensors" else "npbert_model.h5"
            if format == "safetensors":
                io.write_safetensors(os.path.join(tmp, weights), tensors, {"format": "pt"})
            else:
                io.write_npbert_h5(os.path.join(tmp, weights), tensors, config.to_dict())
            config.to_json_file(os.path.join(tmp, "config.json"))
            # the weights' SHA-256, which from_pretrained checks (npbert/io/manifest.py)
            if manifest:
                io.write_manifest(tmp, names=[weights], keep_from=directory if os.path.isdir(directory) else None)


def _numpy_dtype(dtype):
    """torch.float32 / torch.float64 (or their names) as NumPy's; others are left to the model's check."""
    name = str(dtype).replace("torch.", "")
    return {"float32": np.float32, "float": np.float32, "float64": np.float64, "double": np.float64}.get(name, dtype)


def _split_kwargs(cls, kwargs, stored):
    """from_pretrained's keywords -> (options of cls.__init__, config overrides); a keyword that
    is neither (nor a field of the stored config) is a TypeError, as a typo must not pass silently."""
    init_options = [n for n, p in inspect.signature(cls.__init__).parameters.items()
                    if n not in ("self", "config", "seed", "dtype") and not n.startswith("_")
                    and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    model_kwargs = {k: v for k, v in kwargs.items() if k in init_options}
    overrides = {k: v for k, v in kwargs.items() if k not in model_kwargs}
    unknown = [k for k in overrides if k not in CONFIG_FIELDS and k not in stored]
    if unknown:
        raise TypeError(f"{cls.__name__}.from_pretrained() got unknown keyword(s) {unknown}: a keyword must be a "
                        f"config field (e.g. num_labels, output_attentions, hidden_dropout_prob), a loader "
                        f"option (dtype, config) or an option of {cls.__name__}({', '.join(init_options) or ''})")
    return model_kwargs, overrides
