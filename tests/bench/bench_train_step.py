"""Benchmark: one training step, npbert vs torch + transformers vs the NumPy GEMM floor.

Two steps (issue 13):
- finetune: a sequence classifier the size of all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads,
  intermediate 1536, vocab 30522), batch 32 x 128, dropout on: forward with labels, backward,
  clip_grad_norm_(1.0), AdamW (weight decay 0.01), linear schedule step.
- pretrain: a tiny BertForPreTraining (2 layers, hidden 128, 2 heads, intermediate 512; vocab
  --vocab, default 4000 as a learned demo vocabulary), batch 32 x 128, MLM labels at 15 % of the
  positions + NSP, the same optimizer step.

`gemm-floor` runs only the step's big GEMMs in NumPy: per layer Q/K/V (stacked), attention
output, intermediate, output, their input and weight gradients, and for pretraining the MLM
transform and decoder (tokens x H x V) forward and backward.  No attention products, softmax,
GELU, LayerNorm, dropout, embeddings, loss or optimizer: any NumPy implementation of the same
step takes at least this long.

All three run in one process, alternating round by round, 2 threads each; the ratios printed are
medians of per-round ratios.

    python tests/bench/bench_train_step.py                        # both steps
    python tests/bench/bench_train_step.py --steps finetune --rounds 3
"""
import argparse
import os
import statistics
import sys
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NPBERT_NUM_THREADS"):
    os.environ.setdefault(var, "2")
# torch's OpenMP threads spin after each op and, alternating in one process, take the cores of
# the next npbert run; passive, they sleep when done (see bench_model.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

STEPS = {
    "finetune": dict(layers=6, hidden=384, heads=12, intermediate=1536, vocab=30522, batch=32, seq=128),
    "pretrain": dict(layers=2, hidden=128, heads=2, intermediate=512, vocab=4000, batch=32, seq=128),
}


GATHER = [True]


def batch(spec, pretraining, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    B, T, V = spec["batch"], spec["seq"], spec["vocab"]
    ids = rng.integers(5, V, (B, T))
    mask = np.ones((B, T), dtype=np.int64)
    mask[::4, T // 2:] = 0                            # a quarter of the rows padded
    types = np.zeros((B, T), dtype=np.int64)
    types[:, T // 2:] = 1
    out = dict(input_ids=ids, attention_mask=mask, token_type_ids=types)
    if pretraining:
        labels = np.full((B, T), -100)
        chosen = rng.random((B, T)) < 0.15
        labels[chosen] = ids[chosen]
        out.update(labels=labels, next_sentence_label=rng.integers(0, 2, B))
    else:
        out.update(labels=rng.integers(0, 2, B))
    return out


def config_kwargs(spec):
    return dict(vocab_size=spec["vocab"], hidden_size=spec["hidden"], num_hidden_layers=spec["layers"],
                num_attention_heads=spec["heads"], intermediate_size=spec["intermediate"],
                max_position_embeddings=512, type_vocab_size=2)


def npbert_runner(spec, pretraining, style="dict"):
    """style "dict": grads = model.backward(); opt.step(grads) (npbert's own form); "torch": the
    tutorials' loss.backward(); clip_grad_norm_(model.parameters()); opt.step(); opt.zero_grad()."""
    import numpy as np
    import npbert
    from npbert import optim
    cls = npbert.BertForPreTraining if pretraining else npbert.BertForSequenceClassification
    extra = {} if pretraining else {"num_labels": 2}
    model = cls(npbert.BertConfig(**config_kwargs(spec), **extra), dtype=np.float32).train()
    model.config.gather_masked_lm = GATHER[0]            # (pretrain) the MLM head at the masked positions only
    opt = optim.AdamW(optim.optimizer_grouped_parameters(model, weight_decay=0.01), lr=1e-4)
    sched = optim.get_linear_schedule_with_warmup(opt, 10, 1000)
    data = batch(spec, pretraining)

    def step():
        model(**data)
        grads = model.backward()
        optim.clip_grad_norm_(grads, 1.0)
        opt.step(grads)
        sched.step()

    def torch_style_step():
        opt.zero_grad(set_to_none=True)
        model(**data).loss.backward()
        optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return torch_style_step if style == "torch" else step


def torch_runner(spec, pretraining):
    import torch
    import transformers
    torch.set_num_threads(2)
    cls = transformers.BertForPreTraining if pretraining else transformers.BertForSequenceClassification
    extra = {} if pretraining else {"num_labels": 2}
    model = cls(transformers.BertConfig(**config_kwargs(spec), **extra, attn_implementation="eager")).train()
    from torch_side import torch_adamw
    opt = torch_adamw(model, lr=1e-4)   # the groups npbert's Trainer builds
    sched = transformers.get_linear_schedule_with_warmup(opt, 10, 1000)
    data = {k: torch.tensor(v) for k, v in batch(spec, pretraining).items()}

    def step():
        opt.zero_grad(set_to_none=True)
        model(**data).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return step


def gemm_floor_runner(spec, pretraining):
    import numpy as np
    rng = np.random.default_rng(1)
    n, h, i, V = spec["batch"] * spec["seq"], spec["hidden"], spec["intermediate"], spec["vocab"]
    shapes = [(3 * h, h), (h, h), (i, h), (h, i)]                 # torch layout (out, in)
    layers = [[rng.standard_normal(s, dtype=np.float32) * 0.02 for s in shapes] for _ in range(spec["layers"])]
    w_t, w_dec = rng.standard_normal((h, h), dtype=np.float32), rng.standard_normal((V, h), dtype=np.float32)
    x0 = rng.standard_normal((n, h), dtype=np.float32)

    def step():
        acts, x = [], x0
        for w_qkv, w_o, w_1, w_2 in layers:
            qkv = x @ w_qkv.T
            a = qkv[:, :h] @ w_o.T
            m = a @ w_1.T
            y = m @ w_2.T
            acts.append((x, qkv, a, m))
            x = y
        dy = x
        if pretraining:                                      # MLM transform + decoder (at the ~15 % masked rows
            rows = x[: max(1, int(0.15 * n))] if GATHER[0] else x    # with npbert's gather, else every row)
            t = rows @ w_t.T
            logits = t @ w_dec.T                             # (n, V)
            _ = logits.T @ t                                 # d decoder weight
            dt = logits @ w_dec                              # d transform output
            _ = dt.T @ rows
            _ = dt @ w_t
        for (x, qkv, a, m), (w_qkv, w_o, w_1, w_2) in zip(reversed(acts), reversed(layers)):
            _ = dy.T @ m
            dm = dy @ w_2
            _ = dm.T @ a
            da = dm @ w_1
            _ = da.T @ qkv[:, :h]
            _ = da @ w_o
            _ = qkv.T @ x
            dy = qkv @ w_qkv
    return step


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", default="finetune,pretrain")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--vocab", type=int, default=STEPS["pretrain"]["vocab"], help="vocabulary of the pretrain step")
    p.add_argument("--impls", default="npbert,torch,gemm-floor")
    p.add_argument("--no-gather", action="store_true", help="npbert's MLM head over every position, as transformers")
    args = p.parse_args()
    GATHER[0] = not args.no_gather
    STEPS["pretrain"]["vocab"] = args.vocab
    makers = {"npbert": npbert_runner, "torch": torch_runner, "gemm-floor": gemm_floor_runner}
    impls = args.impls.split(",")
    for name in args.steps.split(","):
        spec = STEPS[name]
        runners = {impl: makers[impl](spec, name == "pretrain") for impl in impls}
        for run in runners.values():
            run()                                            # warm-up (allocates optimizer state)
        times = {impl: [] for impl in impls}
        for _ in range(args.rounds):
            for impl in impls:
                t0 = time.perf_counter()
                runners[impl]()
                times[impl].append(time.perf_counter() - t0)
        print(f"\n{name}: {spec}, {args.rounds} alternating rounds")
        for impl in impls:
            print(f"  {impl:10s} median {statistics.median(times[impl]):7.3f} s   min {min(times[impl]):7.3f} s")
        if "npbert" in impls:
            for impl in impls:
                if impl != "npbert":
                    r = [a / b for a, b in zip(times["npbert"], times[impl])]
                    print(f"  npbert / {impl:10s} {statistics.median(r):5.2f}x (rounds {min(r):.2f}..{max(r):.2f})")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
