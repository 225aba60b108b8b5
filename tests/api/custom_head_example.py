"""The two examples of docs/custom_heads.md, taken from the page itself (so the tests run what a
reader copies), their datasets and a small Trainer run of each; also run as an MPI worker:

    mpiexec -n N python tests/api/custom_head_example.py OUTDIR P EXAMPLE    rank 0 writes OUTDIR/params.npz

EXAMPLE: "regression" (BertForMeanPooledRegression) or "tags" (BertForSentenceAndTags).
"""
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(ROOT, "docs", "custom_heads.md")
TINY = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)
CLASSES = {"regression": "BertForMeanPooledRegression", "tags": "BertForSentenceAndTags"}
T = 8                 # every example is padded to 8 tokens
NUM_TAGS = 3


def page_code():
    """The page's python blocks that define classes, in order, as one module's source."""
    text = open(PAGE, encoding="utf-8").read()
    return "\n".join(code for code in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
                     if re.search(r"^class ", code, re.M))


def page_namespace():
    """The page's class blocks executed in one namespace."""
    namespace = {"__name__": "custom_head_example_page"}
    exec(compile(page_code(), PAGE, "exec"), namespace)
    return namespace


def page_module(directory):
    """The page's class blocks written to directory/custom_heads_page.py and imported, so that
    inspect finds their source lines (as it does for a head in a user's own file)."""
    import importlib.util
    path = os.path.join(directory, "custom_heads_page.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page_code())
    spec = importlib.util.spec_from_file_location("custom_heads_page", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_heads_page"] = module
    spec.loader.exec_module(module)
    return module


def example_class(example="regression"):
    """The page's class for `example`."""
    namespace = page_namespace()
    name = CLASSES[example]
    if name not in namespace:
        raise AssertionError(f"{PAGE} has no python block defining {name}")
    return namespace[name]


def dataset(example="regression", n=13, seed=0):
    """n examples of ragged length (padding at the end).  regression: a float label each; tags: a
    class label each and a tag for some of the real tokens, how many drawn per example (1 to all),
    -100 on the others, so that two halves of a batch hold different numbers of tags."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(3, T))
        ids = np.zeros(T, np.int64)
        ids[:length] = [2, *rng.integers(5, 30, length - 2), 3]
        example_ = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64)}
        if example == "regression":
            example_["labels"] = float(rng.normal())
        else:
            tags = np.full(T, -100, np.int64)
            tagged = rng.choice(np.arange(1, length - 1), size=int(rng.integers(1, length - 1)), replace=False)
            tags[tagged] = rng.integers(0, NUM_TAGS, len(tagged))
            example_["labels"] = int(rng.integers(0, 2))
            example_["tags"] = tags
        out.append(example_)
    return out


def make_model(example="regression", dropout=0.1, seed=3):
    import npbert
    config = npbert.BertConfig(**TINY, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return example_class(example)(config, dtype=np.float64, seed=seed)


def make_trainer(output_dir, per_device, max_steps=3, dropout=0.1, example="regression", **kwargs):
    """The example model (float64, dropout on) and a Trainer over dataset(example); AdamW, lr 1e-2."""
    from npbert.training import Trainer, TrainingArguments
    model = make_model(example, dropout)
    args = TrainingArguments(output_dir, max_steps=max_steps, per_device_train_batch_size=per_device,
                             learning_rate=1e-2, plot=False, **{"save_strategy": "no", **kwargs})
    return Trainer(model, args, train_dataset=dataset(example))


if __name__ == "__main__":
    outdir, per_device = sys.argv[1], int(sys.argv[2])
    example = sys.argv[3] if len(sys.argv) > 3 else "regression"
    trainer = make_trainer(os.path.join(outdir, "run"), per_device, example=example)
    result = trainer.train()
    if trainer.world.is_main_process:
        np.savez(os.path.join(outdir, "params.npz"), training_loss=result.training_loss,
                 **{k: np.asarray(v) for k, v in trainer.model.state_dict().items()})
