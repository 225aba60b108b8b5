"""optimizer_grouped_parameters: the parameter groups the tutorials build by hand.

    no_decay = ["bias", "LayerNorm.weight"]
    groups = [{"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
               "weight_decay": 0.0}]

and, on top, two per-layer learning rates:

    layerwise_lr_decay = xi (Sun et al. 2019):   encoder.layer.i   lr * xi^(L - 1 - i)
                                                  embeddings        lr * xi^L
                                                  top layer, pooler, task head   lr
    head_lr:   every parameter outside the base model (`bert.`), i.e. the task head

Each group holds one (lr, weight_decay) pair, in the order its first parameter appears in
named_parameters().  Frozen parameters (model.freeze) are left out.
"""
import re


def optimizer_grouped_parameters(model, weight_decay=0.0, no_decay=("bias", "LayerNorm.weight"), lr=None,
                                 layerwise_lr_decay=None, head_lr=None):
    if layerwise_lr_decay is not None:
        if lr is None:
            raise ValueError("optimizer_grouped_parameters: layerwise_lr_decay needs the base learning rate lr")
        if not 0.0 < layerwise_lr_decay <= 1.0:
            raise ValueError(f"optimizer_grouped_parameters: layerwise_lr_decay must be in (0, 1], "
                             f"got {layerwise_lr_decay}")
    num_layers = model.config.num_hidden_layers
    base = getattr(model, "base_model_prefix", "bert") + "."
    has_head = any(name.startswith(base) for name, _ in model.named_parameters())
    is_trainable = getattr(model, "is_trainable", lambda name: True)

    def rate(name):
        inner = name[len(base):] if has_head and name.startswith(base) else name
        is_head = has_head and not name.startswith(base)
        if is_head and head_lr is not None:
            return head_lr
        if layerwise_lr_decay is None or is_head:
            return lr
        m = re.match(r"encoder\.layer\.(\d+)\.", inner)
        if m:
            return lr * layerwise_lr_decay ** (num_layers - 1 - int(m.group(1)))
        if inner.startswith("embeddings."):
            return lr * layerwise_lr_decay ** num_layers
        return lr                                     # pooler

    groups = {}
    for name, array in model.named_parameters():
        if not is_trainable(name):
            continue
        decay = 0.0 if any(nd in name for nd in no_decay) else weight_decay
        key = (rate(name), decay)
        if key not in groups:
            groups[key] = {"params": [], "weight_decay": decay}
            if key[0] is not None:
                groups[key]["lr"] = key[0]
        groups[key]["params"].append((name, array))
    return list(groups.values())
