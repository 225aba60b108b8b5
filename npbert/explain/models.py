"""The models the page computes with: a model object in float64 (the backward and the gradient
checks), the BertModel inside a head as a model of its own (the forward walk), and the small random
model of the built-in vocabulary."""
import numpy as np

from npbert.config import BertConfig
from npbert.modeling import BertModel

from .tokens import TINY_CONFIG


def random_model(seed=0, dtype=np.float32):
    """A random 2-layer BertModel (hidden 64) over the built-in vocabulary, in eval mode."""
    return BertModel(BertConfig(**TINY_CONFIG), seed=seed, dtype=dtype).eval()


def describe(model):
    return f"a {type(model).__name__} (a model object)"


def base_model(model):
    """The BertModel a model runs: the model itself, or a head's `bert` (its base_model_prefix)."""
    return getattr(model, model.base_model_prefix, model)


def has_head(model):
    """Whether `model` is a head around a BertModel (rather than the BertModel itself)."""
    return base_model(model) is not model


def standalone_bert(model, dtype):
    """The BertModel of `model` (a head's, or the model itself) as a model of its own in `dtype`,
    with the same weights, in eval mode."""
    bert = base_model(model)
    if not has_head(model) and bert.dtype == dtype:
        return bert.eval()
    own = BertModel(model.config, dtype=dtype, add_pooling_layer=bert.pooler is not None)
    own.load_state_dict(bert.state_dict())
    return own.eval()


def as_float64(model):
    """The same model in float64 (itself when it is), in eval mode: float32 weights are exact in float64."""
    if model.dtype == np.float64:
        return model.eval()
    if not has_head(model):
        return standalone_bert(model, np.float64)
    copy = type(model)(model.config, dtype=np.float64)
    copy.load_state_dict(model.state_dict())
    return copy.eval()
