"""The reference optimizer steps: each update rule as its formula, one parameter at a time.

These are what `opt.step()` runs on npbert's reference path (`npbert.set_path("reference")`,
`NPBERT_PATH=reference`, or `with npbert.using_path("reference"): opt.step()`), as torch keeps
`_single_tensor_adam` beside its multi-tensor kernel.  The fast path (the default) computes the
same rule in place, in cache-sized pieces on npbert's threads (`adam.py`, `adam_weight_decay.py`,
`bert_adam.py`); tests/optim/test_reference_step.py checks that the two agree.

Every array below has the parameter's shape (written (*) ) and dtype; the scalars are Python
floats.  p, m and v are the model's parameter and the optimizer's state arrays: each function
writes their new values into them (`x[...] = ...`), so the model and `opt.state` see the step.
Nothing else is kept: the temporaries are fresh arrays, as the formulas read.
"""
import numpy as np


def adam_step(p, g, m, v, t, lr, beta1, beta2, eps, weight_decay, decoupled):
    """One step of Adam (decoupled=False, torch.optim.Adam) or AdamW (decoupled=True,
    torch.optim.AdamW) for parameter p (*) with gradient g (*), at step t = 1, 2, ...
    (Kingma & Ba 2015, Algorithm 1; Loshchilov & Hutter 2019, Algorithm 2)."""
    if weight_decay != 0 and decoupled:
        p[...] = p * (1 - lr * weight_decay)                 # (*) AdamW: the decay bypasses the moments
    if weight_decay != 0 and not decoupled:
        g = g + weight_decay * p                             # (*) Adam: L2, the decay goes through the moments
    m[...] = beta1 * m + (1 - beta1) * g                     # (*) first moment
    v[...] = beta2 * v + (1 - beta2) * g ** 2                # (*) second moment
    m_hat = m / (1 - beta1 ** t)                             # (*) bias-corrected first moment
    v_hat = v / (1 - beta2 ** t)                             # (*) bias-corrected second moment
    p[...] = p - lr * m_hat / (np.sqrt(v_hat) + eps)         # (*)


def adam_weight_decay_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay):
    """One step of google-research/bert's AdamWeightDecayOptimizer for p (*) with gradient g (*):
    no bias correction, no step count.  weight_decay is 0 for the names the optimizer excludes."""
    m[...] = beta1 * m + (1 - beta1) * g                     # (*) first moment
    v[...] = beta2 * v + (1 - beta2) * g ** 2                # (*) second moment
    update = m / (np.sqrt(v) + eps)                          # (*)
    if weight_decay != 0:
        update = update + weight_decay * p                   # (*) decoupled decay, inside the update
    p[...] = p - lr * update                                 # (*)


def bert_adam_step(p, g, m, v, lr, b1, b2, e, weight_decay, max_grad_norm):
    """One step of pytorch-pretrained-bert's BertAdam for p (*) with gradient g (*).  lr is the
    scheduled rate, the group's lr times the schedule at this step (bert_adam.py)."""
    if max_grad_norm > 0:
        grad_norm = float(np.linalg.norm(g))                 # ||g||_2 of this parameter alone
        g = g * min(max_grad_norm / (grad_norm + 1e-6), 1.0)  # (*) clipped per parameter
    m[...] = b1 * m + (1 - b1) * g                           # (*) first moment
    v[...] = b2 * v + (1 - b2) * g ** 2                      # (*) second moment
    update = m / (np.sqrt(v) + e)                            # (*) no bias correction
    if weight_decay > 0:
        update = update + weight_decay * p                   # (*) decoupled decay, inside the update
    p[...] = p - lr * update                                 # (*)
