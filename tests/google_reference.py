"""Google's reference scripts (google-research/bert, PyPI `bert-tensorflow==1.0.4`) without TensorFlow.

`create_pretraining_data.py`, `run_squad.py` and `tokenization.py` import
`tensorflow.compat.v1` at the top, but the data functions the tests compare against only touch
`tf.flags`, `tf.gfile.GFile` and `tf.logging`.  `load(name)` puts a small stand-in for those in
`sys.modules` (only when TensorFlow itself is not installed) while it imports `bert.<name>`, takes
it out again, and marks
absl's flags as parsed, so that e.g. `tokenization.FullTokenizer` can read
`FLAGS.preserve_unused_tokens`.  Anything else of `tf` is an object that raises if it is used:
a test that strays into the model code fails loudly instead of running a fake.

    cpd = google_reference.load("create_pretraining_data")      # skips when bert-tensorflow is absent
    with google_reference.flags(version_2_with_negative=True, null_score_diff_threshold=0.0):
        squad.write_predictions(...)                             # reads FLAGS at call time

Both scripts define flags of the same name (`vocab_file`, `max_seq_length`, ...), which absl
refuses; the stand-in's DEFINE_* keep the first definition.
"""
import contextlib
import importlib
import io
import sys
import types

import pytest


class _Unavailable:
    """What every tf attribute the stand-in does not provide is: unusable."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return _Unavailable(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name} is not available in the TensorFlow stand-in of tests/google_reference.py")


def _flags_module():
    from absl import flags as absl_flags

    def tolerant(define):
        def define_once(name, *args, **kwargs):
            if name in absl_flags.FLAGS:
                return None
            return define(name, *args, **kwargs)
        return define_once

    module = types.SimpleNamespace(FLAGS=absl_flags.FLAGS)
    for attr in dir(absl_flags):
        if attr.startswith("DEFINE"):
            setattr(module, attr, tolerant(getattr(absl_flags, attr)))
    module.mark_flag_as_required = lambda *a, **k: None
    return module


def _gfile_open(path, mode="r"):
    if "b" in mode:
        return open(path, mode)
    return io.open(path, mode, encoding="utf-8")


def _unavailable_attributes(prefix):
    """A module __getattr__: any public name is an _Unavailable; a dunder (__file__, __spec__, ...)
    is missing, as on a real module, so tools that scan sys.modules (hypothesis) are not misled."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unavailable(f"{prefix}.{name}")
    return __getattr__


def _install_stand_in():
    try:
        import tensorflow.compat.v1  # noqa: F401  (the real thing: use it)
        return
    except ImportError:
        pass
    import logging as py_logging

    v1 = types.ModuleType("tensorflow.compat.v1")
    v1.flags = _flags_module()
    v1.gfile = types.SimpleNamespace(GFile=_gfile_open, Open=_gfile_open)
    log = py_logging.getLogger("google_reference")
    v1.logging = types.SimpleNamespace(info=log.info, warning=log.warning, error=log.error,
                                       set_verbosity=lambda *a: None, INFO=py_logging.INFO)
    train = types.ModuleType("tensorflow.compat.v1.train")   # optimization.py subclasses tf.train.Optimizer
    train.Optimizer = object
    train.__getattr__ = _unavailable_attributes("tf.train")
    v1.train = train
    v1.__getattr__ = _unavailable_attributes("tf")
    compat = types.ModuleType("tensorflow.compat")
    compat.v1 = v1
    contrib = types.ModuleType("tensorflow.contrib")      # run_squad -> modeling imports contrib.layers
    contrib.__getattr__ = _unavailable_attributes("tf.contrib")
    tf = types.ModuleType("tensorflow")
    tf.__path__ = []                                      # a package, so `tensorflow.compat` resolves
    tf.compat, tf.contrib = compat, contrib
    tf.__getattr__ = _unavailable_attributes("tf")
    compat.__path__ = []
    installed = []
    for name, module in (("tensorflow", tf), ("tensorflow.compat", compat), ("tensorflow.compat.v1", v1),
                         ("tensorflow.contrib", contrib)):
        if name not in sys.modules:
            sys.modules[name] = module
            installed.append(name)
    return installed


def load(name):
    """`bert.<name>` from bert-tensorflow 1.0.4, importable without TensorFlow.  Skips the
    calling test when bert-tensorflow or absl-py is not installed (CI installs both)."""
    pytest.importorskip("absl")
    pytest.importorskip("six")
    if importlib.util.find_spec("bert") is None or importlib.util.find_spec("bert.tokenization") is None:
        pytest.skip("bert-tensorflow==1.0.4 is not installed (pip install --no-deps bert-tensorflow==1.0.4)")
    installed = _install_stand_in() or []
    try:
        module = importlib.import_module(f"bert.{name}")
    finally:
        # Google's modules keep their own reference to the stand-in; out of sys.modules it cannot
        # make other libraries (torch._dynamo, hypothesis) believe TensorFlow is installed.
        for mod in installed:
            sys.modules.pop(mod, None)
    from absl import flags as absl_flags
    if not absl_flags.FLAGS.is_parsed():
        absl_flags.FLAGS.mark_as_parsed()
    return module


@contextlib.contextmanager
def flags(**values):
    """Set absl FLAGS that Google's functions read at call time; restore them afterwards."""
    from absl import flags as absl_flags
    FLAGS = absl_flags.FLAGS
    before = {k: getattr(FLAGS, k) for k in values}
    try:
        for k, v in values.items():
            setattr(FLAGS, k, v)
        yield FLAGS
    finally:
        for k, v in before.items():
            setattr(FLAGS, k, v)
