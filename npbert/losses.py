"""What a head of your own declares its loss with (docs/custom_heads.md), public and stable.

    LossTerm(name, output, op, target, weight=1.0, **op_kwargs)   one term: weight * op(output, target)
    cross_entropy, mse, bce_with_logits                           the LossOps npbert's heads use
    LossOp(name, forward, backward, count, over_classes=False)    a loss op of your own
    HeadLoss                                                      what a forward built: model.head_loss
    batch_rows(batch), batch_length(batch), has_labels(batch, *keys), IGNORE_INDEX

A head returns its terms from `loss_terms(batch)`; the model's call computes them on the
forward's outputs (npbert/modeling/loss_terms.py has the table of npbert's own heads).  The ops'
forward/backward pairs are also in npbert.functional (cross_entropy_forward, ...).
"""
from npbert.modeling.loss_terms import (IGNORE_INDEX, HeadLoss, LossOp, LossTerm, batch_length, batch_rows,
                                        bce_with_logits, cross_entropy, has_labels, mse)

__all__ = ["LossTerm", "LossOp", "HeadLoss", "cross_entropy", "mse", "bce_with_logits", "batch_rows", "batch_length",
           "has_labels", "IGNORE_INDEX"]
