"""How many threads each rank computes with.

The ranks on one machine share its cores.  Left alone, every rank would start one npbert thread
and one OpenBLAS thread per core, and L ranks would run L times more threads than cores,
each waiting for the others.  So each rank takes its share:

    cores_r = the cores rank r may run on (os.sched_getaffinity: mpiexec's binding, if any)
    pool    = the cores of all the machine's ranks together (the union of their cores_r)
    threads = max(1, min(len(cores_r), len(pool) // L))        L = ranks on this machine

for npbert's own loops (npbert.fast.set_num_threads) and for OpenBLAS (set at run time through
its openblas_set_num_threads, found the way npbert.fast.parallel finds it; the environment
variables are read only when numpy loads, which is before any npbert code runs).  Examples:
2 ranks on 2 cores, unbound or bound to a core each: 1 thread each; 4 ranks bound to a
socket of 8 cores each on 16 cores: 4 each; 3 ranks oversubscribing 2 cores: 1 each.

Overrides, first match wins:
- `init(threads=k)`: k npbert threads and k BLAS threads;
- NPBERT_NUM_THREADS in the environment: npbert's threads are left to it;
- OPENBLAS_NUM_THREADS or OMP_NUM_THREADS in the environment: OpenBLAS keeps what it read
  (e.g. `mpiexec -n 2 -x OMP_NUM_THREADS=2 ...` to give each rank 2 BLAS threads).
A single process (no launcher) is not touched: npbert's defaults apply.
"""
import os

from npbert.fast import parallel


def usable_cores():
    """The cores this process may run on (its affinity), or every core where that is unknown."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def threads_per_rank(my_cores, local_cores):
    """max(1, min(len(my_cores), len(union of local_cores) // L)); local_cores holds the core
    lists of the L ranks on this machine (this one included)."""
    pool = set()
    for cores in local_cores:
        pool.update(cores)
    return max(1, min(len(my_cores), len(pool) // max(1, len(local_cores))))


def configure_threads(world, threads=None, environ=None):
    """Set this rank's npbert and OpenBLAS thread counts (see the module docstring) and return
    what was decided: {"npbert": n, "blas": n or None, "cores": [...], "host_cores": the pool's size,
    "local_ranks": L, "how": what overrode the share, or ""}.  Collective over the machine's ranks
    (they exchange their core lists)."""
    env = os.environ if environ is None else environ
    mine = usable_cores()
    local = world.local_comm.allgather(mine) if getattr(world, "local_comm", None) is not None else [mine]
    share = threads_per_rank(mine, local)
    pool = set().union(*map(set, local))
    how = []
    if threads is not None:
        threads = int(threads)
        if threads < 1:
            raise ValueError(f"threads per rank must be >= 1, got {threads}")
        n_npbert = n_blas = threads
        how.append(f"threads={threads} given")
    else:
        n_npbert = n_blas = share
        if env.get("NPBERT_NUM_THREADS"):
            n_npbert = None
            how.append("npbert threads from NPBERT_NUM_THREADS")
        blas_var = next((v for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if env.get(v)), None)
        if blas_var:
            n_blas = None
            how.append(f"BLAS threads from {blas_var}")
    if n_npbert is not None:
        parallel.set_num_threads(n_npbert)
    if n_blas is not None and not parallel.set_blas_num_threads(n_blas):
        how.append("no OpenBLAS whose thread count can be set is loaded: set OMP_NUM_THREADS for the BLAS numpy uses")
    blas_now = parallel.get_blas_num_threads()
    return {"npbert": parallel.get_num_threads(), "blas": blas_now, "cores": mine, "host_cores": len(pool),
            "local_ranks": len(local), "how": "; ".join(how)}
