"""What the fine-tuning benchmarks share: the torch side's optimizer (the one npbert's Trainer
uses), and taking turns between the two sides.

torch.optim.AdamW over npbert.optim.optimizer_grouped_parameters of the torch model itself (the
same names, so the same groups: weight decay on every weight but biases and LayerNorm weights),
eps 1e-8 as npbert's AdamW.
"""


def torch_adamw(model, lr, weight_decay=0.01):
    import torch
    from npbert.optim import optimizer_grouped_parameters
    groups = optimizer_grouped_parameters(model, weight_decay=weight_decay)          # params: (name, tensor)
    return torch.optim.AdamW([{**g, "params": [p for _, p in g["params"]]} for g in groups], lr=lr, eps=1e-8)


def take_turn(run, seconds, name):
    """Run the generator `run` up to its next yield, adding the time taken to seconds[name].
    Returns (True, its return value) once it has finished, else (False, None)."""
    import time
    t0 = time.perf_counter()
    try:
        next(run)
        return False, None
    except StopIteration as done:
        return True, done.value
    finally:
        seconds[name] += time.perf_counter() - t0
