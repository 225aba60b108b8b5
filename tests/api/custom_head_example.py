"""The example of docs/custom_heads.md, taken from the page itself (so the tests run what a
reader copies), and a small Trainer run of it; also run as an MPI worker:

    mpiexec -n N python tests/api/custom_head_example.py OUTDIR P     rank 0 writes OUTDIR/params.npz
"""
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "custom_heads.md")
TINY = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)


def example_class():
    """BertForMeanPooledRegression, executed from the first ```python block of the page that defines it."""
    text = open(PAGE, encoding="utf-8").read()
    for code in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M):
        if "class BertForMeanPooledRegression" in code:
            namespace = {"__name__": "custom_head_example_page"}
            exec(compile(code, PAGE, "exec"), namespace)
            return namespace["BertForMeanPooledRegression"]
    raise AssertionError(f"{PAGE} has no python block defining BertForMeanPooledRegression")


def dataset(n=13, seed=0):
    """n examples of ragged length (padding at the end), float labels."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(3, 8))
        ids = np.zeros(8, np.int64)
        ids[:length] = [2, *rng.integers(5, 30, length - 2), 3]
        out.append({"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64), "labels": float(rng.normal())})
    return out


def make_trainer(output_dir, per_device, max_steps=3, dropout=0.1, **kwargs):
    """The example model (float64, dropout on) and a Trainer over dataset(); AdamW, lr 1e-2."""
    import npbert
    from npbert.training import Trainer, TrainingArguments
    cls = example_class()
    config = npbert.BertConfig(**TINY, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    model = cls(config, dtype=np.float64, seed=3)
    args = TrainingArguments(output_dir, max_steps=max_steps, per_device_train_batch_size=per_device,
                             learning_rate=1e-2, plot=False, **{"save_strategy": "no", **kwargs})
    return Trainer(model, args, train_dataset=dataset())


if __name__ == "__main__":
    outdir, per_device = sys.argv[1], int(sys.argv[2])
    trainer = make_trainer(os.path.join(outdir, "run"), per_device)
    result = trainer.train()
    if trainer.world.is_main_process:
        np.savez(os.path.join(outdir, "params.npz"), training_loss=result.training_loss,
                 **{k: np.asarray(v) for k, v in trainer.model.state_dict().items()})
