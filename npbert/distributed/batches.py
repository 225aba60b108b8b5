"""Which examples each rank computes, in training and in evaluation.

Training, with transformers' definitions: each rank runs forward/backward on
per_device_train_batch_size = P examples at a time, there are W ranks and A accumulation
steps, and one optimizer step consumes a global batch of G = W x P x A examples.  An epoch's
examples are permuted as one process permutes them, np.random.default_rng([seed, epoch]),
and cut into global batches:

    global batch u  = order[u*G : (u+1)*G]                 the last one shorter
    micro-step k    = rows [k*W*P, (k+1)*W*P) of it        the last one shorter
    rank r's share  = rows [s + m*r//W, s + m*(r+1)//W)    of a micro-step of m rows starting at row s

(drop_last leaves out the examples past the last complete micro-step of W x P.)  A full
micro-step gives each rank P contiguous rows (rank r: rows s + r*P ... s + r*P + P - 1,
as accelerate hands batch r of W to process r).  A short one is split as evenly as it goes:
shares differ by at most one row, and may be empty (that rank adds a zero gradient).  Nothing
is dropped or repeated, and with the loss normalised by global counts
(npbert.distributed.loss) every split gives the gradient of the global batch.  With W = 1 the
global batches, micro-steps and their order are those of the one-process Trainer.

Evaluation: each rank evaluates a contiguous run of whole eval batches (the same batches one
process would make, so every prediction and every batch loss is the one-process value) and
rank 0 gathers them back in order.
"""
from collections import namedtuple

import numpy as np

from .world import DistributedError

Share = namedtuple("Share", ["start", "indices", "micro", "offset"])
Share.__doc__ = """One rank's part of one micro-step.

    indices  this rank's dataset indices (int64, maybe empty)
    start    they are rows [start, start + len(indices)) of the global batch (keyed dropout's rows)
    micro    the dataset indices of the whole micro-step (every rank's rows)
    offset   this rank's rows are rows [offset, offset + len(indices)) of `micro`

A collator that draws random numbers (dynamic masking) gives every rank the masks one process
draws when each rank collates the whole `micro` and keeps its rows: the collator's generator
then stays the same on every rank (what a checkpoint saved by rank 0 restores everywhere)."""


def split_evenly(n, parts):
    """[(start, stop)] cutting range(n) into `parts` contiguous runs whose lengths differ by at
    most one (the longer ones last): run i is [n*i//parts, n*(i+1)//parts)."""
    if parts < 1:
        raise ValueError(f"cannot split into {parts} parts")
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]


def epoch_order(n_examples, seed, epoch):
    """The epoch's permutation of range(n_examples): the one-process Trainer's."""
    return np.random.default_rng([seed, epoch]).permutation(n_examples)


def global_batches(n_examples, per_device_batch_size, world_size, gradient_accumulation_steps, seed, epoch,
                   drop_last=False):
    """The epoch's global batches (arrays of dataset indices) of G = world_size x per_device x
    accumulation examples each, the last one shorter.  drop_last leaves out the examples past
    the last complete micro-step (world_size x per_device), as the one-process Trainer leaves
    out the last incomplete batch; the last global batch may then hold fewer micro-steps."""
    micro = per_device_batch_size * world_size
    G = micro * gradient_accumulation_steps
    order = epoch_order(n_examples, seed, epoch)
    if drop_last:
        order = order[:n_examples // micro * micro]
    return [order[s:s + G] for s in range(0, len(order), G)]


def shard_global_batch(batch, per_device_batch_size, world_size, rank):
    """Rank `rank`'s Share of every micro-step of the global batch `batch` (dataset indices):
    one Share per micro-step, the same number on every rank (empty where the rank has no row)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size}")
    batch = np.asarray(batch, dtype=np.int64)
    step = per_device_batch_size * world_size                   # rows of a full micro-step
    shares = []
    for s in range(0, len(batch), step):
        m = min(step, len(batch) - s)
        a, b = split_evenly(m, world_size)[rank]
        shares.append(Share(s + a, batch[s + a:s + b], batch[s:s + m], a))
    return shares


def rows_of_batch(batch, start, stop):
    """Rows [start, stop) of a collated batch (values without that first axis, or of another
    length, are kept as they are).  The number of rows is npbert.losses.batch_rows(batch)."""
    n = None
    for key in ("input_ids", "inputs_embeds"):
        if batch.get(key) is not None:
            n = len(batch[key])
            break
    if n is None:
        raise KeyError(f"the batch has no input_ids / inputs_embeds (fields: {sorted(batch)})")
    return {k: (v[start:stop] if isinstance(v, np.ndarray) and v.ndim and len(v) == n else v)
            for k, v in batch.items()}


def plan_training(n_examples, per_device_train_batch_size, gradient_accumulation_steps, world, drop_last=False):
    """The training plan every rank must share: {"global_batch_size", "updates_per_epoch"}.

    Stops every rank with a message when the dataset cannot give each rank an example, when
    drop_last leaves no global batch, or when the ranks do not hold the same number of examples
    (different data files) or the same batch arguments."""
    W, P, A = world.world_size, per_device_train_batch_size, gradient_accumulation_steps
    if P < 1 or A < 1:
        raise ValueError(f"per_device_train_batch_size ({P}) and gradient_accumulation_steps ({A}) must be >= 1")
    G = W * P * A
    world.check_same({"number of training examples": int(n_examples), "per_device_train_batch_size": P,
                      "gradient_accumulation_steps": A, "dataloader_drop_last": bool(drop_last)},
                     what="the training data")
    if n_examples < W and W > 1:
        raise DistributedError(f"the training set has {n_examples} examples, fewer than the {W} ranks: every rank "
                               f"needs at least one example; use fewer ranks (mpiexec -n {max(n_examples, 1)})")
    used = n_examples // (W * P) * (W * P) if drop_last else n_examples
    updates = -(-used // G)
    if updates == 0 and W == 1:
        raise ValueError(f"the train dataset has {n_examples} examples: not one batch of {P}"
                         f"{' (dataloader_drop_last)' if drop_last else ''}")
    if updates == 0:
        raise DistributedError(f"the training set has {n_examples} examples: not one micro-step of {W * P} = "
                               f"{W} ranks x {P} per device (dataloader_drop_last)")
    return {"global_batch_size": G, "updates_per_epoch": updates}


# ---- evaluation ---------------------------------------------------------------------------------
def eval_batches(n_examples, batch_size, world_size, rank):
    """This rank's eval batches (arrays of dataset indices): batch j of one process is
    range(j*bs, min((j+1)*bs, n)); the nb batches are split into contiguous runs with
    split_evenly(nb, world_size), so rank 0 has the first ones."""
    nb = -(-n_examples // batch_size)
    a, b = split_evenly(nb, world_size)[rank]
    return [np.arange(j * batch_size, min((j + 1) * batch_size, n_examples)) for j in range(a, b)]


def gather_in_order(world, items, root=0):
    """On `root`: the concatenation of every rank's list `items`, rank 0's first (with
    eval_batches, the one-process order of the batches); None on the other ranks."""
    gathered = world.gather_object(list(items), root=root)
    if gathered is None:
        return None
    return [item for part in gathered for item in part]
