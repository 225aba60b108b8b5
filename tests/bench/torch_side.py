"""What the torch side of the fine-tuning benchmarks shares: the optimizer npbert's Trainer uses.

torch.optim.AdamW over npbert.optim.optimizer_grouped_parameters of the torch model itself (the
same names, so the same groups: weight decay on every weight but biases and LayerNorm weights),
eps 1e-8 as npbert's AdamW.
"""


def torch_adamw(model, lr, weight_decay=0.01):
    import torch
    from npbert.optim import optimizer_grouped_parameters
    groups = optimizer_grouped_parameters(model, weight_decay=weight_decay)          # params: (name, tensor)
    return torch.optim.AdamW([{**g, "params": [p for _, p in g["params"]]} for g in groups], lr=lr, eps=1e-8)
