"""`npbert demo`: pre-train a tiny BERT on Shakespeare on this CPU in about a minute, and show
what it learned.

    1. learn a WordPiece vocabulary from the bundled corpus        (npbert build-vocab)
    2. cut it into documents and create masked LM / next-sentence instances with
       google-research/bert's algorithm                             (npbert create-pretraining-data)
    3. pre-train BERT-tiny (2 layers, hidden 128) with the Trainer  (npbert pretrain)
    4. MLM and NSP accuracy on held-out speeches before and after, next to always guessing the
       most frequent token; fill-mask on held-out lines before and after (npbert fill-mask);
       training_curves.png and attention.png in the output directory
"""
import os
import sys
import time

from npbert.cli.common import CliError, non_negative_int, positive_int

HELD_OUT_FRACTION = 0.05
FILL_WORDS = ("lord", "king", "love", "heaven", "death", "father", "heart", "night", "god", "blood", "crown")


def add_parser(commands):
    p = commands.add_parser("demo", help="pre-train a tiny BERT on Shakespeare in about a minute and show what it learned",
                            description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", default="npbert-demo", help="where the model, data and pictures go (default ./npbert-demo)")
    p.add_argument("--max_steps", type=positive_int, default=480,
                   help="optimizer steps (default 480; fewer when they would not fit in --train_seconds)")
    p.add_argument("--train_seconds", type=float, default=150.0,
                   help="time budget of the training (default 150): on a slow or busy machine max_steps is "
                        "lowered to fit it, from 3 timed steps; 0 for no limit")
    p.add_argument("--vocab_size", type=positive_int, default=2000, help="WordPiece vocabulary learned from the corpus")
    p.add_argument("--max_seq_length", type=positive_int, default=64,
                   help="tokens per pre-training instance (also the model's max_position_embeddings)")
    p.add_argument("--batch_size", type=positive_int, default=32, help="instances per training step")
    p.add_argument("--learning_rate", type=float, default=1e-3, help="Adam(W) at 1e-3, as seed 003 trains from scratch")
    p.add_argument("--model_size", choices=("tiny", "mini"), default="tiny",
                   help="Google's sizes: tiny L2/H128, mini L4/H256")
    p.add_argument("--speeches", type=positive_int, default=None, help="use only the first N speeches (faster)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the data, the initial weights, the masks and the dropout")
    p.set_defaults(run=run)


def say(text=""):
    print(text, flush=True)


def _fill_lines(docs, tokenizer, n=3):
    """Held-out lines of 6-14 words holding one of FILL_WORDS as a single vocabulary token, that word masked."""
    out = []
    for doc in docs:
        for line in doc:
            words = line.split()
            if not 6 <= len(words) <= 14:
                continue
            for k, w in enumerate(words):
                bare = w.strip(",.;:!?'").lower()
                if bare in FILL_WORDS and bare in tokenizer.vocab and w.lower().startswith(bare):
                    masked = " ".join(words[:k] + [tokenizer.mask_token + w[len(bare):]] + words[k + 1:])
                    out.append((masked, bare))
                    break
            if len(out) >= n and len({b for _, b in out}) == len(out):
                return out
            if len(out) > len({b for _, b in out}):
                out.pop()                       # one line per word
    return out


def _show_fill(model, tokenizer, lines, title):
    from npbert.data.pretrain import fill_mask
    say(f"  {title}")
    for text, answer in lines:
        top = fill_mask(model, tokenizer, text, top_k=3)
        guesses = ", ".join(f"{r['token_str']} ({r['score']:.2f})" for r in top)
        say(f"    {text}\n      answer: {answer:<8s} top 3: {guesses}")


def attention_picture(model, tokenizer, text, path):
    """A layers x heads grid of the attention probabilities of `text`; None without matplotlib."""
    import npbert
    from npbert.training.plots import plot_attention
    enc = tokenizer(text, return_tensors="np")
    with npbert.no_grad():
        out = model.bert(input_ids=enc["input_ids"], output_attentions=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    return plot_attention(out.attentions, tokens, path, title=text)


class _OutOfTime(Exception):
    """The demo's training budget is used up (raised by _Timed, caught by demo)."""


class _Timed:
    """The training examples, unavailable after `deadline` (time.perf_counter()): the Trainer's
    next batch raises _OutOfTime, which ends the demo's training where it stands."""

    def __init__(self, dataset, deadline=None):
        self.dataset, self.deadline = dataset, deadline

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise _OutOfTime()
        return self.dataset[i]


def steps_within(config, train, batch_size, seconds, minimum=30):
    """How many training steps fit in `seconds`: 3 forward+backward passes of one batch timed on
    a scratch model of the same config (the real one's dropout stream is left alone), the
    median taken, plus 15 % for the optimizer, the batching and the evaluations.  The load of a
    shared machine changes: the demo also stops training at 1.1 x the budget (_Timed)."""
    import npbert
    from npbert.training import default_data_collator
    scratch = npbert.BertForPreTraining(config, seed=1)          # in training mode, as the steps to come
    scratch.config.gather_masked_lm = True                         # as the demo's model
    batch = default_data_collator([train[i] for i in range(min(batch_size, len(train)))])
    times = []
    for _ in range(3):
        t = time.perf_counter()
        scratch(**batch)
        scratch.backward()
        times.append(time.perf_counter() - t)
    return max(minimum, int(seconds / (1.15 * sorted(times)[1])))


def run(args):
    demo(args)
    return 0


def demo(args):
    """Run the demo; returns a summary dict (accuracies before and after, losses, paths)."""
    import random

    import numpy as np

    import npbert
    from npbert.data import PretrainingDataset, build_vocab, create_training_instances, instances_to_features, shakespeare
    from npbert.data.pretrain import (compute_pretraining_metrics, config_for_size, evaluate_pretraining,
                                      frequency_baseline, preprocess_logits_for_metrics)
    from npbert.training import Trainer, TrainingArguments, default_data_collator
    from npbert.training.plots import have_matplotlib

    t_start = time.perf_counter()
    out = args.output_dir
    os.makedirs(out, exist_ok=True)
    say(f"npbert demo: pre-training a tiny BERT on Shakespeare, on this CPU; everything goes to {os.path.abspath(out)}\n")

    # 1. data and vocabulary
    speeches = shakespeare.read_speeches()
    if args.speeches:
        speeches = speeches[:args.speeches]
    n_held = max(8, int(len(speeches) * HELD_OUT_FRACTION))
    train_docs = shakespeare.documents(speeches[:-n_held], speeches_per_document=8)
    held_docs = shakespeare.documents(speeches[-n_held:], speeches_per_document=8)
    train_txt, held_txt = os.path.join(out, "train.txt"), os.path.join(out, "held_out.txt")
    shakespeare.write_documents(train_docs, train_txt)
    shakespeare.write_documents(held_docs, held_txt)
    t = time.perf_counter()
    vocab_file = os.path.join(out, "vocab.txt")
    vocab = build_vocab([train_txt], args.vocab_size, vocab_file)
    tokenizer = npbert.BertTokenizer(vocab_file)
    say(f"1. vocabulary: {len(vocab)} WordPiece tokens learned from {len(speeches) - n_held} speeches "
        f"({time.perf_counter() - t:.1f} s): e.g. {' '.join(vocab[300:310])}")

    # 2. instances (Google's create_pretraining_data algorithm)
    t = time.perf_counter()
    T, P = args.max_seq_length, max(1, round(args.max_seq_length * 0.15))
    try:
        train_inst = create_training_instances([train_txt], tokenizer, T, 1, 0.1, 0.15, P, random.Random(args.seed))
        held_inst = create_training_instances([held_txt], tokenizer, T, 2, 0.1, 0.15, P, random.Random(args.seed + 1))
    except ValueError as e:
        raise CliError(str(e)) from None
    train = PretrainingDataset(instances_to_features(train_inst, tokenizer, T, P))
    held = PretrainingDataset(instances_to_features(held_inst, tokenizer, T, P))
    say(f"2. instances: {len(train)} training and {len(held)} held-out sequences of up to {T} tokens, 15 % masked "
        f"(80 % [MASK], 10 % random, 10 % kept), half with a random next sentence ({time.perf_counter() - t:.1f} s)")
    example = train_inst[0]
    say(f"   e.g. {' '.join(example.tokens[:24])} ...")

    # 3. the model, before
    config = config_for_size(args.model_size, len(tokenizer), max_position_embeddings=T)
    model = npbert.BertForPreTraining(config, seed=args.seed)
    model.config.gather_masked_lm = True      # the MLM head only at the masked positions while training (Google's)
    baseline, top = frequency_baseline(train, held)
    fill_lines = _fill_lines(held_docs, tokenizer)
    mlm0, nsp0 = evaluate_pretraining(model, held)
    say(f"3. BERT-{args.model_size}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, {model.num_parameters():,} parameters")
    say(f"   before training: MLM accuracy {mlm0:.3f}, NSP accuracy {nsp0:.3f} "
        f"(always guessing {tokenizer.convert_ids_to_tokens([top])[0]!r}: MLM {baseline:.3f}; NSP by chance 0.5)")
    _show_fill(model, tokenizer, fill_lines, "fill-mask before training:")

    # 4. pre-training
    budget = getattr(args, "train_seconds", 0) or 0
    if budget > 0:
        steps = steps_within(config, train, args.batch_size, budget)
        if steps < args.max_steps:
            say(f"\n   (this machine is slow or busy now: {steps} steps instead of {args.max_steps}, to stay within "
                f"--train_seconds {budget:g})")
            args.max_steps = steps
    say(f"\n4. pre-training: {args.max_steps} steps of {args.batch_size} sequences, AdamW lr {args.learning_rate:g}, "
        "linear warmup and decay")
    targs = TrainingArguments(os.path.join(out, "run"), max_steps=args.max_steps,
                              per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=64,
                              learning_rate=args.learning_rate, weight_decay=0.01, warmup_ratio=0.06,
                              logging_steps=max(1, args.max_steps // 12), eval_strategy="steps",
                              eval_steps=max(1, args.max_steps // 4), save_strategy="no", seed=args.seed)
    trainer = Trainer(model, targs, train_dataset=_Timed(train), eval_dataset=held,
                      data_collator=default_data_collator, compute_metrics=compute_pretraining_metrics,
                      preprocess_logits_for_metrics=preprocess_logits_for_metrics, processing_class=tokenizer)
    t = time.perf_counter()
    trainer.train_dataset.deadline = t + budget * 1.1 if budget > 0 else None
    try:
        trainer.train()
    except FloatingPointError as e:
        raise CliError(str(e)) from None
    except _OutOfTime:                 # the load grew after the estimate: stop here, keep what was learned
        trainer.progress.close()
        args.max_steps = trainer.state.global_step
        say(f"   (stopped at step {args.max_steps}: --train_seconds {budget:g} used up)")
        from npbert.training import plot_training_curves
        if have_matplotlib():
            plot_training_curves(trainer.state.log_history, os.path.join(targs.output_dir, "training_curves.png"))
    train_time = time.perf_counter() - t

    # 5. after
    mlm1, nsp1 = evaluate_pretraining(model, held)
    say(f"\n5. after {args.max_steps} steps ({train_time:.0f} s): MLM accuracy {mlm0:.3f} -> {mlm1:.3f} "
        f"(frequency baseline {baseline:.3f}), NSP accuracy {nsp0:.3f} -> {nsp1:.3f}")
    _show_fill(model, tokenizer, fill_lines, "fill-mask after training:")
    model_dir = os.path.join(out, "model")
    trainer.save_model(model_dir)
    pictures = []
    curves = os.path.join(targs.output_dir, "training_curves.png")
    if os.path.exists(curves):
        pictures.append(curves)
    text = fill_lines[0][0].replace(tokenizer.mask_token, fill_lines[0][1]) if fill_lines else "to be or not to be"
    att = attention_picture(model, tokenizer, text, os.path.join(out, "attention.png"))
    if att:
        pictures.append(att)
    say(f"\nmodel and vocab.txt: {model_dir}   (try: npbert fill-mask --model {model_dir} \"good [MASK] , sweet prince\")")
    if pictures:
        say("pictures: " + ", ".join(pictures))
    elif not have_matplotlib():
        say("pictures: not drawn; pip install matplotlib (or npbert[plot]) to get training_curves.png and attention.png")
    say(f"done in {time.perf_counter() - t_start:.0f} s")
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return {"mlm_before": mlm0, "mlm_after": mlm1, "nsp_before": nsp0, "nsp_after": nsp1, "baseline": baseline,
            "losses": losses, "model_dir": model_dir, "pictures": pictures, "train_time": train_time}
