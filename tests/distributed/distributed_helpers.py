"""What the data-parallel tests share: tiny models of every head, global batches whose shares
hold uneven numbers of loss items, the one-process step and the manual data-parallel step
(public APIs only), and `run_mpi`, which starts a worker under mpiexec with a timeout.

The MPI worker (mpi_worker.py) and the pytest side import this same file, so the two sides
build the same models and batches from the same seeds."""
import os
import shutil
import signal
import subprocess
import sys

import numpy as np

import npbert
from npbert import distributed as dist
from npbert import optim

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The tiny BERT of tests/heads (vocab 29, hidden 8, 2 layers), dropout set per test.
TINY = dict(vocab_size=29, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
            max_position_embeddings=16, type_vocab_size=2, initializer_range=0.3, pad_token_id=0)
T = 8                 # sequence length
CHOICES = 3           # multiple choice
P = 2                 # per_device_train_batch_size
A = 2                 # gradient_accumulation_steps: a global batch is W * P * A examples
DROPOUT = 0.1         # the suite's dropout: masks keyed by the global row (rows_of_global_batch)

# kind -> (class name, config overrides)
HEADS = {
    "pretraining": ("BertForPreTraining", {}),
    "masked_lm": ("BertForMaskedLM", {}),
    "causal_lm": ("BertLMHeadModel", {"is_decoder": True}),
    "next_sentence": ("BertForNextSentencePrediction", {}),
    "classification": ("BertForSequenceClassification", {"num_labels": 3}),
    "regression": ("BertForSequenceClassification", {"num_labels": 1}),
    "multi_label": ("BertForSequenceClassification", {"num_labels": 3, "problem_type": "multi_label_classification"}),
    "token_classification": ("BertForTokenClassification", {"num_labels": 4}),
    "multiple_choice": ("BertForMultipleChoice", {}),
    "question_answering": ("BertForQuestionAnswering", {}),
}


def build_model(kind, seed=0, dropout=0.0, dtype=np.float64):
    """A tiny model of head `kind` with random weights everywhere (LayerNorm weights near 1,
    no zero bias hiding a gradient path), in training mode."""
    cls_name, overrides = HEADS[kind]
    config = npbert.BertConfig(**{**TINY, "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout,
                                  **overrides})
    model = getattr(npbert, cls_name)(config, seed=seed, dtype=dtype)
    rng = np.random.default_rng(1000 + seed)
    for name, p in model.named_parameters():
        base = 1.0 if name.endswith("LayerNorm.weight") else 0.0
        p[...] = base + rng.normal(0.0, 0.5, size=p.shape)
    return model.train()


def global_batch(kind, G, seed):
    """G examples of head `kind`, T tokens each, ragged (padding at the end).  Later rows hold
    more loss items (masked tokens, labelled tokens) than earlier ones, so contiguous shares
    of the batch hold very different counts: a per-rank mean would weigh them wrongly."""
    rng = np.random.default_rng(seed)
    V = TINY["vocab_size"]
    lengths = rng.integers(T // 2, T + 1, size=G)
    lengths[-1] = T
    shape = (G, CHOICES, T) if kind == "multiple_choice" else (G, T)
    valid = np.arange(T) < (lengths[:, None, None] if kind == "multiple_choice" else lengths[:, None])
    valid = np.broadcast_to(valid, shape)
    ids = np.where(valid, rng.integers(5, V, size=shape), 0).astype(np.int64)
    ids[..., 0] = 2                                                        # [CLS]
    batch = {"input_ids": ids, "attention_mask": valid.astype(np.int64),
             "token_type_ids": np.zeros(shape, dtype=np.int64)}
    rows = np.arange(G)
    if kind in ("pretraining", "masked_lm"):
        labels = np.full((G, T), -100, dtype=np.int64)
        for i in rows:
            k = min(1 + (5 * i) // max(G - 1, 1), lengths[i] - 1)           # 1 masked token in row 0 .. 6 in the last
            pos = rng.choice(np.arange(1, lengths[i]), size=k, replace=False)
            labels[i, pos] = rng.integers(5, V, size=k)
        batch["labels"] = labels
        if kind == "pretraining":
            batch["next_sentence_label"] = rng.integers(0, 2, size=G)
    elif kind == "causal_lm":
        labels = np.where(valid, ids, -100)
        labels[rows < G // 2, 2:] = -100                                   # early rows: few predicted tokens
        batch["labels"] = labels
    elif kind == "next_sentence":
        batch["labels"] = rng.integers(0, 2, size=G)
    elif kind == "classification":
        labels = rng.integers(0, 3, size=G)
        labels[min(1, G - 1)] = -100                                       # one example without a label
        batch["labels"] = labels
    elif kind == "regression":
        batch["labels"] = rng.normal(size=G)
    elif kind == "multi_label":
        batch["labels"] = (rng.random((G, 3)) < 0.5).astype(np.float64)
    elif kind == "token_classification":
        keep = valid & (rng.random((G, T)) < (0.2 + 0.8 * rows / max(G - 1, 1))[:, None])
        batch["labels"] = np.where(keep, rng.integers(0, 4, size=(G, T)), -100)
    elif kind == "multiple_choice":
        batch["labels"] = rng.integers(0, CHOICES, size=G)
    elif kind == "question_answering":
        start = rng.integers(0, T, size=G)
        end = np.minimum(start + rng.integers(0, 3, size=G), T - 1)
        start[min(2, G - 1)] = T + 5                   # outside the window: clamped to T, ignored
        end[0] = T + 1                                 # another share: its start and end counts differ
        batch["start_positions"], batch["end_positions"] = start, end
    return batch


def slice_batch(batch, rows):
    return {k: v[rows] for k, v in batch.items()}


def step_sizes(world_size):
    """The global batch of each optimizer step the tests run: a full one (W * P * A) and a short
    one whose last micro-step leaves a rank without any row."""
    G = world_size * P * A
    return [G, G - world_size - 1]


def make_optimizer(model):
    """AdamW with eps=1e-4.  A gradient that is zero in exact arithmetic (attention key biases,
    QA's qa_outputs.bias) is round-off noise of ~1e-17 on both sides, a different noise on each;
    Adam turns any nonzero noise g into a step of lr * g / (|g| + eps), which with torch's
    eps=1e-8 would be a step of order lr, different on the two sides.  With eps=1e-4 such a step
    is ~1e-13 * lr; the real gradients here are 1e-3..1, far above eps."""
    groups = optim.optimizer_grouped_parameters(model, weight_decay=0.01)
    return optim.AdamW(groups, lr=1e-2, eps=1e-4)


# ---- the one-process step and the manual data-parallel step -------------------------------------
def reference_step(model, opt, batch):
    """One process, the whole global batch: forward, backward of the mean loss, clip, AdamW.
    Returns (the gradients before clipping, the loss)."""
    out = model(**batch)
    grads = model.backward()
    before = {k: v.copy() for k, v in grads.items()}
    optim.clip_grad_norm_(grads, 1.0)
    opt.step(grads)
    return before, float(out["loss"])


def rows_of_global_batch(model, start, stop, dropout, step_rng=None):
    """The forward of rows [start, stop) of a global batch that one process runs in ONE forward
    (reference_step): `model.batch_offset(start)` keys the dropout masks by the global row, and
    `step_rng` (the dropout generator's state at the start of the step) is put back first, so
    that each of this rank's micro-forwards draws the step seed that one forward draws.  With
    dropout off nothing depends on either."""
    if dropout and step_rng is not None:
        model.state.rng.bit_generator.state = step_rng
    return model.batch_offset(start)


def dp_step(model, opt, world, batch, per_device=P, normalisation="global", dropout=0.0):
    """One data-parallel optimizer step written with public APIs: this rank's rows of every
    micro-step, forward, backward with the global normalisation, the bucketed all-reduce,
    clip, AdamW.  normalisation="per_rank_mean" is the usual bug instead: each rank's
    micro-batch mean, averaged (backward(loss=1 / (ranks x micro-steps))).
    Returns (the all-reduced gradients before clipping, the global loss)."""
    G = len(next(iter(batch.values())))
    shares = dist.shard_global_batch(np.arange(G), per_device, world.world_size, world.rank)
    mine = [(s, slice_batch(batch, s.indices)) for s in shares if len(s.indices)]
    local = [dist.count_loss_items(model, b) for _, b in mine]
    totals = world.sum_dict(dist.add_counts(local))
    grads, share = None, 0.0
    step_rng = model.state.rng.bit_generator.state
    with world.guard("dp_step"):
        for (s, b), n in zip(mine, local):
            with rows_of_global_batch(model, s.start, s.start + len(s.indices), dropout, step_rng):
                out = model(**b)
            if normalisation == "global":
                g = dist.backward_global_mean(model, out, b, totals, local=n)
                share += dist.loss_share(model, out, b, totals, local=n)
            else:
                g = model.backward(loss=1.0 / (world.world_size * len(shares)))
            grads = g if grads is None else {k: grads[k] + g[k] for k in grads}
    model.state.rng.bit_generator.state = step_rng            # one seed drawn per step, as reference_step
    model.state.rng.bit_generator.random_raw()
    grads = dist.allreduce_gradients(grads, model, world, bucket_bytes=4096)
    before = {k: v.copy() for k, v in grads.items()}
    optim.clip_grad_norm_(grads, 1.0)
    opt.step(grads)
    return before, world.all_sum(share)


def params(model):
    return {name: np.array(p) for name, p in model.named_parameters()}


# ---- running a worker under mpiexec -------------------------------------------------------------
def mpiexec():
    """The mpiexec next to this Python (the venv's, from the `mpi` extra), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def run_mpi(n, args, timeout=120, env=None, tag_output=True, script="mpi_worker.py", prefix=(), options=None):
    """Run `python tests/distributed/<script> *args` on n ranks (script "-m npbert": the command
    line); returns CompletedProcess (stdout, stderr as text).  `options` are mpiexec's placement
    options (default: every rank on this machine, --oversubscribe); `prefix` runs mpiexec under
    another command (test_two_hosts: inside a network namespace).  The job runs in its own process
    group, which is killed whole when the timeout expires (then AssertionError: a hang is a failure)."""
    cmd = [*prefix, mpiexec(), "-n", str(n), *(["--oversubscribe"] if options is None else options)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if tag_output:
        cmd += ["--output", "tag"]                       # each line: [job,rank]<stdout|stderr>: ...
    program = ["-m", "npbert"] if script == "-m npbert" else [os.path.join(HERE, script)]
    cmd += [sys.executable, *program, *map(str, args)]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "PRTE_"))}
    full_env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE])
    if options is None:
        full_env.update({"OMPI_MCA_rmaps_base_oversubscribe": "1",
                         "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"})
    full_env.pop("NPBERT_NUM_THREADS", None)
    full_env.update(env or {})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
                            cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"mpiexec -n {n} {' '.join(map(str, args))} did not finish in {timeout} s (killed)\n"
                             f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def rank_lines(text, rank, stream="stderr"):
    """The lines rank `rank` wrote to `stream`, from mpiexec's --output tag prefixes."""
    marker = f",{rank}]<{stream}>:"
    return [line.split(marker, 1)[1] for line in text.splitlines() if marker in line]
