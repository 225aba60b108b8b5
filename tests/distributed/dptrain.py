"""The Trainer on N ranks against one process (tests/distributed/test_trainer_mpi.py).

Imported by pytest (the one-process reference runs in the test process) and run under
`mpiexec -n N` as a worker:

    dptrain.py all OUTDIR      every Trainer check on N ranks; rank r writes OUTDIR/rank<r>.json and
                               OUTDIR/<name>_rank<r>.npz, the Trainers write under OUTDIR/<name>/rank<r>
    dptrain.py fail-alone ...  `npbert ...` (the CLI's main) with rank 1 raising alone before training
    dptrain.py other-file ...  `npbert ...` with rank 1 reading another copy of --train_file
"""
import json
import os
import signal
import sys

import numpy as np

import distributed_helpers as h

P, A = 2, 2                    # per_device_train_batch_size, gradient_accumulation_steps (a step: W x P x A)
N_TRAIN = 13                   # micro-steps of W x P rows and a short last one (1 row: rank 0 has none on 2 ranks)
N_EVAL = 7
KINDS = ("pretraining", "token_classification")
DROPOUT = 0.1


def dataset(kind, n, seed):
    """n examples (dicts of 1-d arrays, the default collator stacks them) of h.global_batch's
    ragged rows, so that the ranks' shares hold different numbers of loss items."""
    batch = h.global_batch(kind, n, seed)
    return [{k: v[i] for k, v in batch.items()} for i in range(n)]


def token_accuracy(p):
    pred = np.argmax(p.predictions, axis=-1)
    keep = p.label_ids != -100
    return {"accuracy": float(np.mean(pred[keep] == p.label_ids[keep]))}


class SignalAt:
    """A collator that sends SIGTERM to its own process when called for the `at`-th time on
    rank `rank` (every rank collates every micro-step, so calls count micro-steps)."""

    def __init__(self, at, rank, my_rank):
        from npbert.training import default_data_collator
        self.collate, self.at, self.fire, self.calls = default_data_collator, at, rank == my_rank, 0

    def __call__(self, examples):
        self.calls += 1
        if self.fire and self.calls == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return self.collate(examples)


class NanAt(SignalAt):
    """A collator whose `at`-th batch on rank `rank` has NaN regression labels."""

    def __call__(self, examples):
        self.calls += 1
        batch = self.collate(examples)
        if self.fire and self.calls >= self.at:
            batch["labels"] = np.full(len(batch["labels"]), np.nan)
        return batch


def make_trainer(kind, output_dir, per_device=P, collator=None, dtype=np.float64, **overrides):
    """A float64 (or `dtype`) Trainer with dropout 0.1 on `kind` (2 epochs of N_TRAIN examples; the
    token classifier evaluates every 3 steps with a metric).  adam_epsilon 1e-4: see distributed_helpers.make_optimizer."""
    from npbert.training import Trainer, TrainingArguments
    model = h.build_model(kind, seed=0, dropout=DROPOUT, dtype=dtype)
    evaluating = kind == "token_classification"
    args = dict(per_device_train_batch_size=per_device, gradient_accumulation_steps=A, num_train_epochs=2,
                learning_rate=1e-2, adam_epsilon=1e-4, weight_decay=0.01, logging_steps=1, save_steps=2,
                plot=False, seed=5, per_device_eval_batch_size=3,
                eval_strategy="steps" if evaluating else "no", eval_steps=3)
    args.update(overrides)
    return Trainer(model, TrainingArguments(str(output_dir), **args), train_dataset=dataset(kind, N_TRAIN, 1),
                   eval_dataset=dataset(kind, N_EVAL, 2) if evaluating else None, data_collator=collator,
                   compute_metrics=token_accuracy if evaluating else None)


def params(model):
    return {name: np.array(p) for name, p in model.named_parameters()}


def log_losses(trainer):
    return [e["loss"] for e in trainer.state.log_history if "loss" in e]


# ---- the worker ------------------------------------------------------------------------------------
def run_all(outdir):
    from npbert import distributed as dist
    from npbert.training import TrainingInterrupted
    world = dist.init()
    r, W = world.rank, world.world_size
    res = {"rank": r, "world_size": W}

    def save(name, arrays):
        np.savez(os.path.join(outdir, f"{name}_rank{r}.npz"), **arrays)

    # 1. uninterrupted runs of both kinds; every rank's own output_dir (only rank 0's gets files)
    for kind in KINDS:
        t = make_trainer(kind, os.path.join(outdir, kind, f"rank{r}"))
        out = t.train()
        save(kind, params(t.model))
        res[kind] = {"global_step": out.global_step, "training_loss": out.training_loss,
                     "losses": log_losses(t), "grad_norms": [e["grad_norm"] for e in t.state.log_history
                                                            if "grad_norm" in e],
                     "evals": [{k: v for k, v in e.items() if k in ("eval_loss", "eval_accuracy", "step")}
                               for e in t.state.log_history if "eval_loss" in e]}
        if kind == "token_classification":
            pred = t.predict(dataset(kind, N_EVAL, 2))
            save("predict", {"predictions": pred.predictions, "label_ids": pred.label_ids})
            res["predict_metrics"] = {k: v for k, v in pred.metrics.items() if k in ("test_loss", "test_accuracy")}

    # float32: the same run, where round-off is 2^-24 instead of 2^-53
    t = make_trainer("pretraining", os.path.join(outdir, "float32", f"rank{r}"), dtype=np.float32)
    t.train()
    save("float32", params(t.model))

    # 2. SIGTERM on the last rank only, during step 3: every rank stops after step 3, rank 0 saves
    #    checkpoint-3; a new Trainer resumes from it and finishes
    kind = "pretraining"
    where = os.path.join(outdir, "interrupted", f"rank{r}")
    t = make_trainer(kind, where, collator=SignalAt(at=2 * A + 1, rank=W - 1, my_rank=r))
    try:
        t.train()
        res["interrupted"] = None
    except TrainingInterrupted as e:
        res["interrupted"] = {"step": e.step, "checkpoint": e.checkpoint, "signum": e.signum, "message": str(e)}
    t = make_trainer(kind, where)
    t.train(resume_from_checkpoint=os.path.join(outdir, "interrupted", "rank0", "checkpoint-3"))
    save("resumed", params(t.model))

    # rank 0's output_dir holds that run's checkpoints: rank 0 refuses, every rank stops with its message
    try:
        make_trainer(kind, os.path.join(outdir, kind, f"rank{r}")).train()
        res["taken"] = None
    except dist.DistributedError as e:
        res["taken"] = str(e)

    # 3. NaN regression labels on the last rank in step 2: every rank stops with its message
    t = make_trainer("regression", os.path.join(outdir, "nan", f"rank{r}"), collator=NanAt(at=A + 1, rank=W - 1,
                                                                                              my_rank=r))
    try:
        t.train()
        res["nan"] = None
    except dist.DistributedError as e:
        res["nan"] = {"message": str(e), "ranks": sorted(e.errors), "step": t.state.global_step}
    with open(os.path.join(outdir, f"rank{r}.json"), "w") as f:
        json.dump(res, f)


def fail_alone(argv):
    """The CLI's main with rank 1 raising alone, once the world is up (the others go on into
    training and wait in its first collective)."""
    from npbert import cli
    from npbert.cli import finetune
    original = finetune._run

    def _run(args, *do):
        from npbert.distributed import get_world
        if get_world().rank == 1:
            raise RuntimeError("rank 1 cannot read its copy of the data (on purpose)")
        return original(args, *do)
    finetune._run = _run
    sys.exit(cli.main(argv))


def other_file(argv):
    """The CLI's main where rank 1 reads another copy of --train_file: one line more."""
    from npbert import cli
    from npbert.distributed import launch
    if launch._int(os.environ.get("OMPI_COMM_WORLD_RANK")) == 1:
        i = argv.index("--train_file") + 1
        copy = argv[i] + ".rank1"
        with open(argv[i]) as f, open(copy, "w") as g:
            g.write(f.read() + "the king speaks,1\n")
        argv[i] = copy
    sys.exit(cli.main(argv))


if __name__ == "__main__":
    if sys.argv[1] == "all":
        run_all(sys.argv[2])
    elif sys.argv[1] == "fail-alone":
        fail_alone(sys.argv[2:])
    elif sys.argv[1] == "other-file":
        other_file(sys.argv[2:])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")
