"""torch.nn's names for the modules a head of your own is built from (docs/custom_heads.md):

    from npbert import nn
    self.dropout = nn.Dropout(config.hidden_dropout_prob)
    self.regressor = nn.Linear(config.hidden_size, 1)

And torch's loss modules, on a model's outputs (npbert/nn/functional.py for the formulas):

    loss = nn.CrossEntropyLoss()(outputs.logits, labels)
    (loss / accumulation_steps).backward()        # the model's backward, .grad as torch

A module made this way joins the model it is assigned to (npbert/modeling/module.py).  Every
module has the pair `out, cache = m.forward(x)` / `dx, grads = m.backward(dout, cache)`, and
`m(x)` returns the forward's output alone, as torch.
"""
from npbert.modeling.module import Module, ModuleList
from npbert.modeling.leaf_modules import Dropout, Embedding, LayerNorm, Linear

from . import functional


class CrossEntropyLoss:
    """torch.nn.CrossEntropyLoss(weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        self.weight, self.ignore_index, self.reduction = weight, ignore_index, reduction
        self.label_smoothing = label_smoothing

    def __call__(self, input, target):
        return functional.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                                        self.label_smoothing)


class MSELoss:
    """torch.nn.MSELoss(reduction="mean")."""

    def __init__(self, reduction="mean"):
        self.reduction = reduction

    def __call__(self, input, target):
        return functional.mse_loss(input, target, self.reduction)


class BCEWithLogitsLoss:
    """torch.nn.BCEWithLogitsLoss(weight=None, reduction="mean", pos_weight=None)."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        self.weight, self.reduction, self.pos_weight = weight, reduction, pos_weight

    def __call__(self, input, target):
        return functional.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                           self.pos_weight)


__all__ = ["Module", "ModuleList", "Linear", "Dropout", "LayerNorm", "Embedding", "CrossEntropyLoss", "MSELoss",
           "BCEWithLogitsLoss", "functional"]
