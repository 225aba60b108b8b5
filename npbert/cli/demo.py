"""`npbert demo`: pre-train a tiny BERT on Shakespeare on this CPU in about two minutes, and show
the evidence that it learned, the way the field reports it.

    1. learn a WordPiece vocabulary from the bundled corpus        (npbert build-vocab)
    2. cut it into documents and create next-sentence pairs with google-research/bert's
       algorithm; the training masks are drawn anew for every batch (dynamic masking, as
       RoBERTa), the held-out masks once                           (npbert create-pretraining-data)
    3. the baselines on the held-out text (always guessing the most frequent token, the unigram
       entropy, the NSP majority class) and 10 fill-mask prompts chosen by a printed rule
    4. pre-train BERT-tiny (2 layers, hidden 128) with the Trainer  (npbert pretrain)
    5. the held-out numbers after, beside the baselines; the prompts' ranks before and after;
       whether NSP was learned, and if not, a measurement of why
    6. BERT's thesis in small: the pre-trained encoder and the same model from random weights
       fine-tuned on a word-order task made from the corpus, for the same steps
       (npbert/cli/demo_thesis.py)
    results.json, held_out.h5, training_curves.png, attention.png and the model go to the
    output directory.  Data: demo_data.py; what is printed and written: demo_report.py.
"""
import os
import shutil
import time

import npbert
from npbert.cli import demo_report as report
from npbert.cli.common import CliError, UsageError, non_negative_int, positive_int
from npbert.cli.demo_data import N_PROMPTS, demo_data
from npbert.cli.demo_thesis import fine_tune_both
from npbert.data.pretraining_eval import config_for_size, evaluate_pretraining
from npbert.data.prompts import RULE
from npbert.training import Trainer, TrainingArguments, default_data_collator


def add_parser(commands):
    p = commands.add_parser("demo", help="pre-train a tiny BERT on Shakespeare in about two minutes and show what it "
                                         "learned", description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", default="npbert-demo", help="where the model, data, results and pictures go "
                                                                "(default ./npbert-demo; a previous demo there is replaced)")
    p.add_argument("--max_steps", type=positive_int, default=800,
                   help="optimizer steps (default 800; fewer when they would not fit in --train_seconds)")
    p.add_argument("--train_seconds", type=float, default=120.0,
                   help="time budget of the pre-training (default 120): on a slow or busy machine max_steps is "
                        "lowered to fit it, from 3 timed steps; 0 for no limit")
    p.add_argument("--vocab_size", type=positive_int, default=2000, help="WordPiece vocabulary size (default 2000)")
    p.add_argument("--max_seq_length", type=positive_int, default=24,
                   help="tokens per sequence (default 24: about two of Shakespeare's short lines)")
    p.add_argument("--batch_size", type=positive_int, default=86, help="sequences per step (default 86: 2,064 tokens)")
    p.add_argument("--learning_rate", type=float, default=3e-3,
                   help="peak AdamW learning rate, after a linear warmup over 6 %% of the steps (default 3e-3)")
    p.add_argument("--mlm_probability", type=float, default=0.3,
                   help="share of the training tokens masked (default 0.3; the held-out set keeps Google's 0.15)")
    p.add_argument("--static_masking", action="store_true",
                   help="mask each training sequence once, as Google's create_pretraining_data (default: new masks "
                        "every batch)")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="hidden and attention dropout (default 0: a two-minute run underfits, it does not overfit)")
    p.add_argument("--initializer_range", type=float, default=0.05,
                   help="std of the initial weights (default 0.05; transformers' 0.02 suits hidden size 768)")
    p.add_argument("--model_size", choices=("tiny", "mini"), default="tiny",
                   help="Google's BERT-tiny (L2/H128, default) or BERT-mini (L4/H256)")
    p.add_argument("--finetune_steps", type=non_negative_int, default=300,
                   help="step 6: fine-tune the pre-trained model and one from random weights for this many steps on "
                        "a word-order task made from the corpus (default 300; 0 to skip)")
    p.add_argument("--evaluations", type=positive_int, default=6,
                   help="held-out evaluations during training, for the curves (default 6)")
    p.add_argument("--speeches", type=positive_int, default=None, help="use only the first N speeches (faster)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="seed of the weights, the instances, the masks and the batch order (default 0)")
    p.set_defaults(run=run)


def say(text=""):
    print(text, flush=True)


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


def steps_within(config, train, batch_size, seconds, minimum=30, collator=None):
    """How many training steps fit in `seconds`: 3 forward+backward passes of one batch timed on
    a scratch model of the same config (the real one's dropout stream is left alone), the
    median taken, plus 15 % for the optimizer, the batching and the evaluations.  The load of a
    shared machine changes: the demo also stops training at 1.1 x the budget (_Timed)."""
    scratch = npbert.BertForPreTraining(config, seed=1)          # in training mode, as the steps to come
    scratch.config.gather_masked_lm = True                         # as the demo's model
    batch = (collator or default_data_collator)([train[i] for i in range(min(batch_size, len(train)))])
    times = []
    for _ in range(3):
        t = time.perf_counter()
        scratch(**batch)
        scratch.backward()
        times.append(time.perf_counter() - t)
    return max(minimum, int(seconds / (1.15 * sorted(times)[1])))


def run(args):
    try:
        demo(args)
    except OSError as e:              # a directory that cannot be written, a full disk: say where
        raise CliError(f"--output_dir {args.output_dir}: {e}") from None
    return 0


def _prepare_output_dir(out):
    """The output directory, emptied of a previous demo's results (only the files the demo writes)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--output_dir {out}: a file of that name exists")
    os.makedirs(out, exist_ok=True)
    written = ("model", "run", "finetune-pretrained", "finetune-random_init")
    replaced = [name for name in ("results.json",) + written if os.path.exists(os.path.join(out, name))]
    for name in written:
        if os.path.isdir(os.path.join(out, name)):
            shutil.rmtree(os.path.join(out, name))
    return replaced


def demo(args):
    """Run the demo; returns the results dict that it writes to results.json."""

    t_start = time.perf_counter()
    out = args.output_dir
    replaced = _prepare_output_dir(out)
    say(f"npbert demo: pre-training a tiny BERT on Shakespeare, on this CPU; everything goes to {os.path.abspath(out)}"
        + (" (replacing the previous demo there)" if replaced else "") + "\n")

    # 1-2. vocabulary, instances, held-out set, prompts
    data = demo_data(args, out, say)
    tokenizer, train, held = data.tokenizer, data.train, data.held

    # 3. the model and the baselines, before training
    config = config_for_size(args.model_size, len(tokenizer), max_position_embeddings=args.max_seq_length,
                             hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout,
                             initializer_range=args.initializer_range)
    model = npbert.BertForPreTraining(config, seed=args.seed)
    model.config.gather_masked_lm = True      # the MLM head only at the masked positions while training (Google's)
    baselines = report.baselines(data)
    before = evaluate_pretraining(model, held, mask_token_id=tokenizer.mask_token_id)
    say(f"3. BERT-{args.model_size}: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
        f"{config.num_attention_heads} heads, {model.num_parameters():,} parameters, dropout {args.dropout:g}")
    report.say_baselines(say, baselines, before, data)
    rule = RULE.format(n=N_PROMPTS, max_tokens=args.max_seq_length)
    say(f"   fill-mask prompts, chosen before training by a rule: {rule}")
    prompts_before = report.rank_prompts(model, tokenizer, data.prompts)

    # 4. pre-training
    budget = getattr(args, "train_seconds", 0) or 0
    requested = args.max_steps
    if budget > 0:
        steps = steps_within(config, train, args.batch_size, budget, collator=data.collator)
        if steps < args.max_steps:
            say(f"\n   (this machine is slow or busy now: {steps} steps instead of {args.max_steps}, to stay within "
                f"--train_seconds {budget:g})")
            args.max_steps = steps
    say(f"\n4. pre-training: {args.max_steps} steps of {args.batch_size} sequences "
        f"({'masks drawn once' if args.static_masking else 'new masks every batch'}), AdamW lr "
        f"{args.learning_rate:g}, linear warmup over 6 % of the steps and linear decay")
    eval_every = max(1, args.max_steps // args.evaluations)
    targs = TrainingArguments(os.path.join(out, "run"), max_steps=args.max_steps,
                              per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=64,
                              learning_rate=args.learning_rate, weight_decay=0.01, warmup_ratio=0.06,
                              logging_steps=max(1, eval_every // 4), eval_strategy="steps", eval_steps=eval_every,
                              save_strategy="no", seed=args.seed, plot=False)
    trainer = Trainer(model, targs, train_dataset=_Timed(train), eval_dataset=held, data_collator=data.collator,
                      processing_class=tokenizer)
    report.evaluate_during_training(trainer, held, tokenizer.mask_token_id)
    trainer.train_dataset.deadline = trainer.t0 + budget * 1.1 if budget > 0 else None
    try:
        trainer.train()
    except FloatingPointError as e:
        raise CliError(str(e)) from None
    except _OutOfTime:                 # the load grew after the estimate: stop here, keep what was learned
        trainer.progress.close()
        say(f"   (stopped at step {trainer.state.global_step}: --train_seconds {budget:g} used up)")
    train_time = time.perf_counter() - trainer.t0
    steps_done = trainer.state.global_step

    # 5. after
    after = evaluate_pretraining(model, held, mask_token_id=tokenizer.mask_token_id)
    prompts_after = report.rank_prompts(model, tokenizer, data.prompts)
    model_dir = os.path.join(out, "model")
    trainer.save_model(model_dir)
    say(f"\n5. after {steps_done} steps ({train_time:.0f} s of training), on the {len(held)} held-out sequences:")
    cue = report.nsp_shared_words(held.features, data.train_tokens, data.special_ids)
    nsp = report.say_results(say, baselines, before, after, cue)
    fill = report.fill_mask_table(say, data.prompts, prompts_before, prompts_after, rule)
    fine_tuning = None
    if args.finetune_steps:
        fine_tuning = fine_tune_both(model_dir, tokenizer, data.train_lines, data.held_lines, args, out, say)
    pictures = report.pictures(out, trainer.state.log_history, baselines, before, model, tokenizer, data.prompts,
                               args.mlm_probability)
    results = {
        "command": "npbert demo " + " ".join(f"--{k} {v}" if v is not True else f"--{k}"
                                             for k, v in sorted(vars(args).items())
                                             if k not in ("run", "command") and v is not None and v is not False),
        "config": {"model_size": args.model_size, "num_hidden_layers": config.num_hidden_layers,
                   "hidden_size": config.hidden_size, "num_attention_heads": config.num_attention_heads,
                   "parameters": model.num_parameters(), "vocab_size": len(tokenizer),
                   "max_seq_length": args.max_seq_length, "batch_size": args.batch_size,
                   "learning_rate": args.learning_rate, "warmup_ratio": 0.06, "lr_scheduler_type": "linear",
                   "masking": "static" if args.static_masking else "dynamic", "mlm_probability": args.mlm_probability,
                   "dropout": args.dropout, "initializer_range": args.initializer_range, "seed": args.seed},
        "data": data.summary(),
        "baselines": baselines,
        "before": before,
        "after": after,
        "nsp": nsp,
        "fill_mask": fill,
        "curve": report.curve(trainer.state.log_history),
        "fine_tuning": fine_tuning,
        "steps": steps_done,
        "max_steps_requested": requested,
        "max_steps_planned": args.max_steps,
        "train_seconds": round(train_time, 2),
        "total_seconds": None,
        "pictures": pictures,
        "model_dir": model_dir,
        "losses": [e["loss"] for e in trainer.state.log_history if "loss" in e],
    }
    say(f"\nmodel and vocab.txt: {model_dir}   (try: npbert fill-mask --model {model_dir} \"good [MASK] , sweet prince\")")
    if pictures:
        say("pictures: " + ", ".join(pictures.values()))
    else:
        say("pictures: not drawn; pip install matplotlib (or npbert[plot]) to get training_curves.png and attention.png")
    results["total_seconds"] = round(time.perf_counter() - t_start, 2)
    path = report.write_results(out, results)
    say(f"numbers: {path}")
    say(f"done in {results['total_seconds']:.0f} s")
    return results
