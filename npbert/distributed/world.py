"""The world of a data-parallel run: which rank this process is, how many there are, and the
few collectives npbert needs: over MPI (MPIWorld, mpi4py), or as a single-process stand-in with
the same methods (SingleProcess) where every collective returns its input.

    world = npbert.distributed.init()       # (launch.py) the world this process was started in
    world.rank, world.world_size, world.is_main_process
    world.all_sum(x)         # numbers or arrays, summed over the ranks, every rank gets the sum
    world.global_mean(total, count)         # sum of sums / sum of counts (never a mean of means)
    with world.guard("step 12"): ...        # a rank that raises stops every rank, with its message
    world.run_on_main(write, path)          # rank 0 writes; the others wait and learn if it failed
    world.check_same({"train_file": fingerprint_file(f), "args": vars(args)})
"""
import contextlib
import hashlib
import json
import os
import sys
import time

import numpy as np

class DistributedError(RuntimeError):
    """An error every rank raises together: a rank failed, or the ranks disagree.

    `errors` maps each failing rank to its message; the str is the same on every rank."""

    def __init__(self, message, errors=None):
        super().__init__(message)
        self.errors = dict(errors or {})


# ---- the single-process world (and everything built on the primitives) ------------------------
class SingleProcess:
    """A world of one rank: every collective returns its input.  The MPI world below
    overrides the primitives (the first block) and inherits the rest."""

    launcher = None
    comm = None

    def __init__(self):
        self.rank, self.world_size = 0, 1
        self.local_rank, self.local_world_size = 0, 1
        self.threads = None                 # what configure_threads decided (npbert.distributed.threads)
        self.gradient_buckets = {}          # allreduce_gradients' plan, per model (npbert.distributed.gradients)

    @property
    def is_main_process(self):
        """Rank 0: the one rank that writes logs, checkpoints and the final model."""
        return self.rank == 0

    def __repr__(self):
        where = f", {self.launcher}" if self.launcher else ""
        return f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size}{where})"

    # -- primitives -----------------------------------------------------------------------------
    def barrier(self):
        """Return when every rank has called it."""

    def allreduce_(self, buffer, op="sum"):
        """Reduce a contiguous array over the ranks, in place (op "sum", "max" or "min"); returns it."""
        _check_buffer(buffer)
        return buffer

    def broadcast_(self, buffer, root=0):
        """Overwrite `buffer` (contiguous, the same shape and dtype on every rank) with root's, in place."""
        _check_buffer(buffer)
        return buffer

    def broadcast_object(self, obj, root=0):
        """root's `obj` (any picklable value) on every rank."""
        return obj

    def gather_object(self, obj, root=0):
        """[obj of rank 0, obj of rank 1, ...] on root, None elsewhere."""
        return [obj]

    def all_gather_object(self, obj):
        """[obj of rank 0, obj of rank 1, ...] on every rank."""
        return [obj]

    def abort(self, message, exit_code=1):
        """Print `message` and end every rank now (MPI_Abort); no cleanup runs."""
        print(message, file=sys.stderr, flush=True)
        os._exit(exit_code)

    def all_failed(self, timeout=5.0):
        """Called by a rank that failed outside any guard (the command line's error path): True
        when every rank calls it within `timeout` seconds (they all failed alike, e.g. the same bad
        flag, and may simply exit), False when some rank does not come (it runs on, or waits in a
        collective for this one: the job must be aborted).  A non-blocking barrier on a
        communicator of its own, so it never matches a collective of the training loop."""
        return True

    # -- reductions for logging and counting ---------------------------------------------------
    def all_sum(self, value):
        """The sum over ranks of a number or an array, on every rank.  Python and NumPy integers
        (and bools) are summed exactly as int64, other numbers as float64; an array keeps its
        dtype.  The input is not modified."""
        a = np.array(value)
        if a.ndim == 0:
            a = a.astype(np.int64 if a.dtype == bool or np.issubdtype(a.dtype, np.integer) else np.float64)
            out = self.allreduce_(a.reshape(1))[0]
            return out.item()
        return self.allreduce_(np.ascontiguousarray(a))

    def all_max(self, value):
        """The largest value over ranks of a number (float), on every rank."""
        return self.allreduce_(np.array([value], dtype=np.float64), op="max")[0].item()

    def any_rank(self, flag):
        """True on every rank when `flag` is true on at least one (a stop requested by a signal
        on one rank, checked at a step boundary so that every rank stops at the same step)."""
        return bool(self.allreduce_(np.array([1 if flag else 0], dtype=np.int64), op="max")[0])

    def global_mean(self, total, count):
        """(sum over ranks of `total`) / (sum over ranks of `count`): the mean over every item of
        every rank, from each rank's sum and number of items (a per-token loss: the sum of the
        token losses and the number of tokens).  Not the mean of the ranks' means, which weighs
        a rank with 3 tokens as much as one with 300.  NaN when there is no item at all."""
        s, n = self.allreduce_(np.array([total, count], dtype=np.float64))
        return float(s / n) if n else float("nan")

    def sum_dict(self, values):
        """{key: sum over ranks} for a dict of numbers (counts: ints stay exact ints), on every
        rank.  A key missing on a rank counts as 0 there, so a rank with no example this step
        can pass {}.  Summed in rank order, so every rank gets the same bits."""
        total = {}
        for part in self.all_gather_object({str(k): v for k, v in values.items()}):
            for k in sorted(part):
                total[k] = total.get(k, 0) + part[k]
        return total

    # -- agreement ----------------------------------------------------------------------------------
    def check_same(self, fields, what="this run"):
        """Raise DistributedError on every rank unless every rank passed equal `fields`, a dict
        name -> value (JSON-able values, bytes, arrays, or fingerprint_file() results).  The
        message names each field that differs and what each rank holds (or its SHA-256)."""
        if self.world_size == 1:
            return
        mine = {str(k): _describe(v) for k, v in fields.items()}
        everyone = self.all_gather_object(mine)
        problems = []
        for key in sorted(set().union(*everyone)):
            held = [e.get(key) for e in everyone]
            if all(h is not None and h[0] == held[0][0] for h in held):
                continue
            groups = {}
            for rank, h in enumerate(held):
                groups.setdefault("(missing)" if h is None else h[1], []).append(rank)
            shown = "; ".join(f"rank{'s' if len(r) > 1 else ''} {_ranks(r)}: {v}" for v, r in groups.items())
            problems.append(f"{key} differs between the ranks ({shown})")
        if problems:
            raise DistributedError(f"the {self.world_size} ranks do not agree on {what}: " + " | ".join(problems))

    # -- errors -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def guard(self, where):
        """Run a block that every rank runs, with no collective inside it (a training step's
        collation, forward and backward).  When it raises on any rank, every rank raises
        DistributedError at the end of the block, naming the failing ranks and their messages
        (the original exception is its __cause__ on the rank that failed); no rank is left
        waiting in the next collective.  On one process the original exception passes through."""
        try:
            yield
        except Exception as e:                       # noqa: BLE001 (every error is reported to every rank)
            if self.world_size == 1:
                raise
            self._settle(where, e)
            raise                                    # (not reached: _settle raises)
        else:
            if self.world_size > 1:
                self._settle(where, None)

    def _settle(self, where, error):
        failed = self.allreduce_(np.array([0 if error is None else 1], dtype=np.int64), op="max")[0]
        if not failed:
            return
        mine = None if error is None else f"{type(error).__name__}: {error}"
        messages = {r: m for r, m in enumerate(self.all_gather_object(mine)) if m is not None}
        lines = [f"rank {r}: {m}" for r, m in messages.items()]
        raise DistributedError(f"{where}: {len(messages)} of {self.world_size} ranks failed; every rank stops. "
                               + " | ".join(lines), messages) from error

    def run_on_main(self, fn, *args, what=None, **kwargs):
        """fn(*args, **kwargs) on rank 0 only (writing a checkpoint, a log, the final model); the
        other ranks wait for it.  Returns fn's result on rank 0 and None elsewhere.  If fn raises
        (a full disk), every rank raises DistributedError with rank 0's message."""
        result, error, exc = None, None, None
        if self.is_main_process:
            try:
                result = fn(*args, **kwargs)
            except Exception as e:                   # noqa: BLE001
                error, exc = f"{type(e).__name__}: {e}", e
        if self.world_size == 1:
            if exc is not None:
                raise exc
            return result
        error = self.broadcast_object(error)
        if error is not None:
            label = what or getattr(fn, "__name__", "a task")
            raise DistributedError(f"rank 0 failed {label}: {error}; every rank stops", {0: error}) from exc
        return result


def _check_buffer(buffer):
    if not isinstance(buffer, np.ndarray) or not buffer.flags.c_contiguous or not buffer.flags.writeable:
        raise TypeError(f"a collective needs a writeable C-contiguous NumPy array, got "
                        f"{type(buffer).__name__}{'' if not isinstance(buffer, np.ndarray) else ' ' + str(buffer.flags)}")


def _ranks(ranks):
    return ", ".join(str(r) for r in ranks)


def _describe(value):
    """(digest, what a person reads) of a value, for check_same."""
    if isinstance(value, np.ndarray):
        data = value.dtype.str.encode() + repr(value.shape).encode() + np.ascontiguousarray(value).tobytes()
        digest = hashlib.sha256(data).hexdigest()
        return digest, f"array {value.dtype}{list(value.shape)} sha256 {digest[:12]}"
    if isinstance(value, bytes):
        digest = hashlib.sha256(value).hexdigest()
        return digest, f"{len(value)} bytes sha256 {digest[:12]}"
    if isinstance(value, dict) and set(value) == {"path", "size", "sha256"}:      # fingerprint_file()
        # the content decides (size and digest), not the name the file has on this machine
        return f"{value['size']}:{value['sha256']}", \
            f"{value['path']}: {value['size']} bytes, sha256 {value['sha256'][:12]}"
    text = json.dumps(value, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return digest, (text if len(text) <= 120 else f"{text[:60]}... sha256 {digest[:12]}")


def fingerprint_file(path, chunk_bytes=1 << 22):
    """{"path": basename, "size": bytes, "sha256": hex} of a file's content, for check_same: two
    ranks reading different copies of a data file see it as a difference in size or digest.
    (The full path is left out: ranks on different machines may keep the same file in
    different places.)"""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(chunk_bytes)
            if not block:
                break
            h.update(block)
            size += len(block)
    return {"path": os.path.basename(path), "size": size, "sha256": h.hexdigest()}


# ---- the MPI world -----------------------------------------------------------------------------
_OPS = ("sum", "max", "min")
ABORT_GRACE_SECONDS = 1.0      # MPIWorld.abort: time for the launcher to forward the last lines


class MPIWorld(SingleProcess):
    """The ranks of an MPI job (mpi4py), on a duplicate of COMM_WORLD that only npbert uses."""

    def __init__(self, MPI, launcher, comm=None):
        super().__init__()
        self.MPI = MPI
        self.launcher = launcher
        self.comm = (comm or MPI.COMM_WORLD).Dup()
        self.rank, self.world_size = self.comm.Get_rank(), self.comm.Get_size()
        # the ranks on this machine (they share its cores: see npbert.distributed.threads)
        self.local_comm = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_world_size = self.local_comm.Get_rank(), self.local_comm.Get_size()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
        self._error_comm = self.comm.Dup()          # all_failed's barrier, apart from every other collective

    def barrier(self):
        self.comm.Barrier()

    def allreduce_(self, buffer, op="sum"):
        _check_buffer(buffer)
        if op not in self._ops:
            raise ValueError(f"allreduce op must be one of {_OPS}, got {op!r}")
        self.comm.Allreduce(self.MPI.IN_PLACE, buffer, op=self._ops[op])
        return buffer

    def broadcast_(self, buffer, root=0):
        _check_buffer(buffer)
        self.comm.Bcast(buffer, root=root)
        return buffer

    def broadcast_object(self, obj, root=0):
        return self.comm.bcast(obj, root=root)

    def gather_object(self, obj, root=0):
        return self.comm.gather(obj, root=root)

    def all_gather_object(self, obj):
        return self.comm.allgather(obj)

    def abort(self, message, exit_code=1):
        print(message, file=sys.stderr, flush=True)
        sys.stdout.flush()
        # The launcher forwards what this rank printed from a pipe, and stops reading it when
        # MPI_Abort kills the job: a moment first, or the message (and the traceback above
        # it) can be lost (seen once in CI on a loaded machine).
        time.sleep(ABORT_GRACE_SECONDS)
        self.MPI.COMM_WORLD.Abort(exit_code)

    def all_failed(self, timeout=5.0):
        request = self._error_comm.Ibarrier()
        deadline = time.monotonic() + timeout
        while not request.Test():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True
