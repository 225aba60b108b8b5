"""Data-parallel training over MPI: N processes, each with the whole model and a share of every
global batch, computing what one process computes with the global batch (docs/data_parallel.md).

    world = init()                                      # under mpiexec/srun: MPI; else one process
    broadcast_parameters(model, world)                  # every rank starts from rank 0's weights
    for batch in global_batches(n, P, world.world_size, A, seed, epoch):       # one optimizer step each
        shares = [s for s in shard_global_batch(batch, P, world.world_size, world.rank) if len(s.indices)]
        mine = [collate(s.indices) for s in shares]
        local = [count_loss_items(model, b) for b in mine]
        totals = world.sum_dict(add_counts(local))      # masked tokens / examples over every rank
        with world.guard(f"step {step}"):               # a rank that raises stops every rank
            grads = sum over b in mine of backward_global_mean(model, model(**b), b, totals)
        allreduce_gradients(grads, model, world)        # bucketed, in place, SUM
        clip_grad_norm_(grads, 1.0); optimizer.step(grads)          # identical on every rank

That loop normalises by one mean over the whole optimizer step (transformers'
num_items_in_batch).  The Trainer instead takes one process's mean of its micro-batches' means:
it collates each micro-step whole, counts its items N_k over every rank with no collective, and
passes K * N_k (K micro-steps) as the totals of that micro-step (docs/data_parallel.md, "Why the
sum of the ranks' gradients is the gradient of the global mean").

Submodules: launch (detection, init), world (the collectives, errors, agreement checks),
gradients (broadcast, the bucketed all-reduce), batches (who computes which rows), loss (the
global-mean normalisation), threads (threads per rank).  Only `init()` under a launcher imports mpi4py
(the optional extra: pip install "npbert[mpi]").
"""
from .batches import (Share, epoch_order, eval_batches, gather_in_order, global_batches, plan_training, rows_of_batch,
                      shard_global_batch, split_evenly)
from .gradients import (DEFAULT_BUCKET_BYTES, GradientBuckets, allreduce_gradients, broadcast_parameters,
                        check_same_parameters)
from .loss import add_counts, backward_global_mean, count_loss_items, loss_share
from .threads import configure_threads, threads_per_rank
from .launch import describe_world, detect_launcher, get_world, init, launcher_world_size
from .world import DistributedError, MPIWorld, SingleProcess, fingerprint_file

__all__ = ["init", "get_world", "describe_world", "detect_launcher", "launcher_world_size", "SingleProcess", "MPIWorld",
           "DistributedError", "fingerprint_file", "broadcast_parameters", "allreduce_gradients", "GradientBuckets",
           "DEFAULT_BUCKET_BYTES", "check_same_parameters", "count_loss_items", "add_counts", "backward_global_mean",
           "loss_share", "Share", "rows_of_batch", "split_evenly", "epoch_order", "global_batches", "shard_global_batch",
           "plan_training", "eval_batches", "gather_in_order", "configure_threads", "threads_per_rank"]
