"""torch.nn's names for the modules a head of your own is built from (docs/custom_heads.md):

    from npbert import nn
    self.dropout = nn.Dropout(config.hidden_dropout_prob)
    self.regressor = nn.Linear(config.hidden_size, 1)

A module made this way joins the model it is assigned to (npbert/modeling/module.py).  Every
module has the pair `out, cache = m.forward(x)` / `dx, grads = m.backward(dout, cache)`, and
`m(x)` returns the forward's output alone, as torch.
"""
from npbert.modeling.module import Module, ModuleList
from npbert.modeling.nn import Dropout, Embedding, LayerNorm, Linear

__all__ = ["Module", "ModuleList", "Linear", "Dropout", "LayerNorm", "Embedding"]
