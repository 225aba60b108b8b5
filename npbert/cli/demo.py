"""`npbert demo`: pre-train a tiny BERT on Shakespeare in about a minute, on a CPU.

    npbert demo [--output_dir npbert_demo] [--max_steps 400] [--seed 42]

1. the bundled tinyshakespeare.txt becomes documents (8 speeches each, one sentence a line;
   npbert/data/corpus.py); the last documents are held out;
2. a WordPiece vocabulary is learned from the training documents (npbert/data/vocab.py);
3. Google's pre-training instances are made (npbert/data/pretraining.py): [CLS] A [SEP] B [SEP],
   15 % of the tokens masked, B the real next text or a random one;
4. a tiny BertForPreTraining (2 layers, hidden 128) is trained with AdamW, a progress line on stderr;
5. MLM and NSP accuracy on the held-out instances before and after, beside the accuracy of always
   answering the most frequent masked token / NSP class; fill-mask on held-out lines before and
   after; training_curves.png and attention.png (layer x head) in the output directory.
"""
import os
import sys
import time

from npbert.cli.common import CliError, non_negative_int

FILL_MASK_LINES = 4


def add_parser(subparsers):
    p = subparsers.add_parser("demo", help="pre-train a tiny BERT on Shakespeare in about a minute",
                              description=__doc__.split("\n\n", 1)[1],
                              formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--output_dir", default="npbert_demo", help="where the vocabulary, model and pictures go")
    p.add_argument("--max_steps", type=int, default=300,
                   help="optimizer steps (default 300, fewer if they would take more than --train_seconds)")
    p.add_argument("--train_seconds", type=float, default=100.0,
                   help="time budget of the training: max_steps is lowered to fit it on a slow or busy machine "
                        "(measured on 3 steps; 0: no limit)")
    p.add_argument("--vocab_size", type=int, default=1000)
    p.add_argument("--max_seq_length", type=int, default=32)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=3e-3)
    p.add_argument("--model_size", default="tiny", help="tiny|mini|small|medium|base (default tiny: L=2, H=128)")
    p.add_argument("--config", help="config.json of the model instead of --model_size")
    p.add_argument("--documents", type=int, default=None, help="use only the first N documents (a quicker run)")
    p.add_argument("--seed", type=non_negative_int, default=42)
    p.set_defaults(run=run)
    return p


def demo_args(a):
    """The `npbert pretrain` arguments of the demo."""
    import argparse
    return argparse.Namespace(
        output_dir=a.output_dir, do_lower_case=True, do_whole_word_mask=False, max_seq_length=a.max_seq_length,
        max_predictions_per_seq=max(2, round(a.max_seq_length * 0.15)), random_seed=a.seed, dupe_factor=2,
        masked_lm_prob=0.15, short_seq_prob=0.1, model_size=a.model_size, config=a.config, masking="static",
        full_mlm_logits=False, learning_rate=a.learning_rate, weight_decay=0.01, warmup_ratio=0.1,
        num_train_epochs=1.0, max_steps=a.max_steps, per_device_train_batch_size=a.batch_size,
        per_device_eval_batch_size=128, logging_steps=max(1, a.max_steps // 20), eval_steps=None,
        save_steps=max(a.max_steps, 1), save_total_limit=1, seed=a.seed, dtype="float32")


def prepare(a, say):
    """documents -> vocabulary -> (tokenizer, train and held-out datasets, held-out sentences)."""
    from npbert.cli.pretrain import make_instances
    from npbert.data.corpus import corpus_path, shakespeare_documents, write_documents
    from npbert.data.features import PretrainingDataset, instances_to_features
    from npbert.data.vocab import build_vocab, write_vocab
    from npbert.tokenization import BertTokenizer
    args = demo_args(a)
    with open(corpus_path(), encoding="utf-8") as f:
        documents = shakespeare_documents(f.read(), speeches_per_document=8)
    if a.documents:
        documents = documents[:a.documents]
    n_eval = max(2, len(documents) // 25)
    if len(documents) - n_eval < 2:
        raise CliError(f"--documents {a.documents}: too few documents to hold some out")
    train_docs, eval_docs = documents[:-n_eval], documents[-n_eval:]
    write_documents(train_docs, os.path.join(a.output_dir, "train_documents.txt"))
    write_documents(eval_docs, os.path.join(a.output_dir, "heldout_documents.txt"))
    t = time.perf_counter()
    vocab = build_vocab([s for d in train_docs for s in d], a.vocab_size)
    vocab_file = write_vocab(vocab, os.path.join(a.output_dir, "vocab.txt"))
    tokenizer = BertTokenizer(vocab_file)
    say(f"[1/4] {len(documents)} documents ({sum(map(len, documents))} sentences; {n_eval} held out); "
        f"vocabulary of {len(vocab)} WordPieces learned in {time.perf_counter() - t:.1f} s -> {vocab_file}")
    t = time.perf_counter()
    datasets = []
    for docs, seed, dupe in ((train_docs, args.random_seed, args.dupe_factor), (eval_docs, args.random_seed + 1, 1)):
        tokenized = [[toks for toks in (tokenizer.tokenize(s) for s in d) if toks] for d in docs]
        instances = make_instances(tokenizer, args, tokenized, seed, dupe)
        features = instances_to_features(instances, tokenizer.vocab, args.max_seq_length,
                                         args.max_predictions_per_seq)
        datasets.append(PretrainingDataset(features))
    say(f"[2/4] {len(datasets[0])} training / {len(datasets[1])} held-out instances (T={args.max_seq_length}, "
        f"15 % masked, 50 % random next) in {time.perf_counter() - t:.1f} s")
    return args, tokenizer, datasets[0], datasets[1], eval_docs


def pick_fill_mask_lines(eval_docs, tokenizer, train, n=FILL_MASK_LINES):
    """Held-out sentences of 6-14 words with one word masked: of the words that are one whole
    token (not punctuation), the one seen most often as a masked label in training."""
    import numpy as np
    counts = np.bincount(np.concatenate([train[i]["labels"][train[i]["labels"] >= 0] for i in range(len(train))]),
                         minlength=len(tokenizer))
    lines = []
    for doc in eval_docs:
        for s in doc:
            words = s.split()
            if not 6 <= len(words) <= 14:
                continue
            best = None
            for j, w in enumerate(words):
                bare = w.strip(".,;:!?'\"-").lower()
                if bare and bare.isalpha() and bare == w.lower() and bare in tokenizer.vocab:
                    c = counts[tokenizer.vocab[bare]]
                    if best is None or c > best[0]:
                        best = (c, j, bare)
            if best:
                words[best[1]] = tokenizer.mask_token
                lines.append((" ".join(words), best[2]))
            if len(lines) == n * 3:
                break
        if len(lines) == n * 3:
            break
    return lines[::3][:n]


def attention_figure(model, tokenizer, sentence, path):
    """A layer x head grid of the attention probabilities of one sentence; None without matplotlib."""
    import numpy as np

    import npbert
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    enc = tokenizer(sentence, return_tensors="np")
    model.eval()
    with npbert.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    L, N = len(out["attentions"]), out["attentions"][0].shape[1]
    fig, axes = plt.subplots(L, N, figsize=(2.6 * N, 2.6 * L), squeeze=False)
    for layer in range(L):
        for head in range(N):
            ax = axes[layer][head]
            ax.imshow(np.asarray(out["attentions"][layer][0, head]), cmap="viridis", vmin=0.0, vmax=1.0)
            ax.set_title(f"layer {layer} head {head}", fontsize=8)
            ax.set_xticks(range(len(tokens)))
            ax.set_yticks(range(len(tokens)))
            ax.set_xticklabels(tokens if layer == L - 1 else [], rotation=90, fontsize=6)
            ax.set_yticklabels(tokens if head == 0 else [], fontsize=6)
    fig.suptitle(f"attention probabilities (query rows, key columns): {sentence}", fontsize=9)
    fig.tight_layout()
    from npbert.io._atomic import atomic_path
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def fit_steps(model, train, args, seconds):
    """How many of the demo's steps fit in `seconds`: 3 forward+backward passes of a batch
    timed (plus 15 % for the optimizer and the batching).  `model` is a scratch copy."""
    import numpy as np
    batch = {k: np.stack([train[i][k] for i in range(args.per_device_train_batch_size)]) for k in train[0]}
    model.train()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        model(**batch)
        model.backward()
        times.append(time.perf_counter() - t)
    model.eval()
    return max(20, min(args.max_steps, int(seconds / (1.15 * min(times)))))


def run(a):
    from npbert.cli.pretrain import build_model, make_trainer
    from npbert.data.fill_mask import fill_mask
    from npbert.data.pretrain_task import baselines

    def say(text):
        print(text, flush=True)

    t_start = time.perf_counter()
    os.makedirs(a.output_dir, exist_ok=True)
    args, tokenizer, train, dev, eval_docs = prepare(a, say)
    model = build_model(args, len(tokenizer), args.max_seq_length)
    before = build_model(args, len(tokenizer), args.max_seq_length)      # the same seed: the untrained model
    if a.train_seconds:
        steps = fit_steps(before, train, args, a.train_seconds)
        if steps < args.max_steps:
            say(f"      (this machine is slow or busy: {steps} steps instead of {args.max_steps} to stay within "
                f"--train_seconds {a.train_seconds:.0f})")
            args.max_steps = steps
            args.logging_steps = max(1, steps // 20)
    trainer = make_trainer(model, args, train, dev, tokenizer)
    trainer.args.save_strategy = "no"
    m0 = trainer.evaluate()
    base = baselines(train, dev)
    L, H = model.config.num_hidden_layers, model.config.hidden_size
    say(f"[3/4] pre-training BertForPreTraining (L={L}, H={H}, {model.num_parameters():,} parameters), "
        f"{args.max_steps} steps of {args.per_device_train_batch_size} (progress on stderr)")
    result = trainer.train()
    m1 = trainer.evaluate()
    trainer.save_model(os.path.join(a.output_dir, "model"))
    most = tokenizer.convert_ids_to_tokens([base["mlm_most_frequent_token"]])[0]
    say(f"[4/4] trained in {result.metrics['train_runtime']:.0f} s; held-out accuracy:")
    say(f"      {'':<5}{'before':>8}{'after':>8}   baseline (always the most frequent answer)")
    say(f"      {'MLM':<5}{m0['eval_mlm_accuracy']:>8.3f}{m1['eval_mlm_accuracy']:>8.3f}   "
        f"{base['mlm_accuracy']:.3f} (always {most!r})")
    say(f"      {'NSP':<5}{m0['eval_nsp_accuracy']:>8.3f}{m1['eval_nsp_accuracy']:>8.3f}   {base['nsp_accuracy']:.3f}")
    say(f"      loss {m0['eval_loss']:.3f} -> {m1['eval_loss']:.3f}")
    say("\nfill-mask on held-out lines (top 3: before training | after):")
    for text, answer in pick_fill_mask_lines(eval_docs, tokenizer, train):
        say(f"  {text}    (the answer: {answer!r})")
        for r0, r1 in zip(fill_mask(before, tokenizer, text, 3), fill_mask(model, tokenizer, text, 3)):
            say(f"      {r0['token_str']:>12} {r0['score']:.3f}   |  {r1['token_str']:>12} {r1['score']:.3f}")
    curves = os.path.join(a.output_dir, "training_curves.png")
    attention = attention_figure(model, tokenizer, "to be, or not to be, that is the question.",
                                 os.path.join(a.output_dir, "attention.png"))
    if attention is None:
        say("\n(no pictures: matplotlib is not installed; `pip install matplotlib` or `pip install npbert[plot]`)")
    else:
        say(f"\npictures: {curves if os.path.exists(curves) else '(no training curves)'}, {attention}")
    say(f"model, vocabulary and documents in {a.output_dir}/ (try: npbert fill-mask --model "
        f"{os.path.join(a.output_dir, 'model')} \"to be or not to [MASK]\"); {time.perf_counter() - t_start:.0f} s in all")
    print("", file=sys.stderr, end="")
    return 0
