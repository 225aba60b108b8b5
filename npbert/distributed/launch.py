"""Starting the world: is this process one rank of an MPI job, and if so, MPI's world.

    world = init()           # mpiexec / srun detected from the environment: MPI; else one process

mpi4py is imported only when a launcher is detected (or NPBERT_DISTRIBUTED=1 asks for it):
`import npbert.distributed` alone never imports it.
"""
import os
import socket
import sys

from .threads import configure_threads
from .world import DistributedError, MPIWorld, SingleProcess

# Variables only an MPI launcher puts in its processes' environment, in the order they are looked for.
LAUNCHER_VARIABLES = (
    ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpiexec"),
    ("PMI_SIZE", "MPICH's or Intel MPI's mpiexec (Hydra), or srun --mpi=pmi2"),
    ("PMIX_RANK", "a PMIx launcher (prterun, srun --mpi=pmix)"),
    ("MV2_COMM_WORLD_SIZE", "MVAPICH2's mpirun"),
)
# The world size a launcher announces, where it does: checked against MPI's own count.
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
EXTRA_HINT = 'pip install "npbert[mpi]" (mpi4py and Open MPI from PyPI)'


# ---- detection -------------------------------------------------------------------------------
def detect_launcher(environ=None):
    """Which MPI launcher started this process (a description), or None for a plain process.

    NPBERT_DISTRIBUTED=0 says "one process" whatever the environment; NPBERT_DISTRIBUTED=1
    says "MPI" without a launcher (a singleton MPI world of one rank).  Slurm counts only for
    a step of more than one task (an `sbatch` script itself is one process)."""
    env = os.environ if environ is None else environ
    forced = env.get("NPBERT_DISTRIBUTED", "").strip().lower()
    if forced in ("0", "no", "false", "off"):
        return None
    if forced in ("1", "yes", "true", "on", "mpi"):
        return "NPBERT_DISTRIBUTED=1"
    if forced:
        raise ValueError(f"NPBERT_DISTRIBUTED={env['NPBERT_DISTRIBUTED']!r}: 1 (use MPI) or 0 (one process)")
    for var, name in LAUNCHER_VARIABLES:
        if env.get(var):
            return f"{name} ({var} is set)"
    if _int(env.get("SLURM_STEP_NUM_TASKS")) > 1:
        return "Slurm's srun (SLURM_STEP_NUM_TASKS > 1)"
    return None


def launcher_world_size(environ=None):
    """The number of processes the launcher says it started, or None when it does not say."""
    env = os.environ if environ is None else environ
    for var in SIZE_VARIABLES:
        if _int(env.get(var)) > 0:
            return _int(env[var])
    return None


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


def _import_mpi(launcher):
    """mpi4py's MPI module (initialising MPI), or an ImportError that names the extra."""
    try:
        import mpi4py
    except ImportError:
        raise ImportError(f"this process was started by {launcher}, which asks for data-parallel training over "
                          f"MPI, but mpi4py is not installed: {EXTRA_HINT}. To run one plain process instead, "
                          f"start it without mpiexec/srun or set NPBERT_DISTRIBUTED=0.") from None
    if "mpi4py.MPI" not in sys.modules:
        # Only the main thread ever calls MPI (npbert's worker threads compute, never communicate).
        mpi4py.rc.thread_level = "funneled"
    from mpi4py import MPI
    return MPI


# ---- init ----------------------------------------------------------------------------------------
_world = None


def init(threads=None, abort_on_uncaught=True, environ=None):
    """The world of this process, created on the first call (later calls return it).

    Under an MPI launcher (see detect_launcher) it imports mpi4py, checks that MPI sees as many
    ranks as the launcher started, sets each rank's threads (npbert.distributed.threads:
    cores / ranks on the machine unless `threads` or the environment says otherwise), and with
    `abort_on_uncaught` installs a sys.excepthook that turns an exception no guard caught into
    MPI_Abort after printing it, so that the other ranks do not wait for this one forever.
    Otherwise: a SingleProcess, and nothing else changes."""
    global _world
    if _world is not None:
        return _world
    launcher = detect_launcher(environ)
    if launcher is None:
        _world = SingleProcess()
        return _world
    MPI = _import_mpi(launcher)
    world = MPIWorld(MPI, launcher)
    announced = launcher_world_size(environ)
    if announced is not None and announced != world.world_size:
        message = (f"{launcher} started {announced} processes, but MPI sees a world of {world.world_size}: the "
                   f"launcher and mpi4py's MPI library do not talk to each other (with Slurm: srun --mpi=pmix; "
                   f"otherwise use the mpiexec of the MPI library mpi4py was built with: {MPI.Get_library_version().splitlines()[0]})")
        raise RuntimeError(message)         # (every rank sees the same sizes, so every rank stops here)
    world.threads = configure_threads(world, threads, environ)
    if abort_on_uncaught:
        _install_excepthook(world)
    _world = world
    return world


def get_world():
    """The world initialised by init(), initialising it now if nothing has."""
    return _world if _world is not None else init()


def _install_excepthook(world):
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        if isinstance(value, DistributedError):
            # every rank raised it together: rank 0 tells the story, the others say they stopped
            if world.is_main_process:
                previous(kind, value, tb)
            else:
                print(f"npbert rank {world.rank}: stopped ({kind.__name__}; rank 0 prints the error)",
                      file=sys.stderr, flush=True)
            return
        previous(kind, value, tb)
        world.abort(f"npbert rank {world.rank} of {world.world_size}: {kind.__name__} outside a guarded step "
                    f"(see above); aborting every rank so that none waits for this one")

    sys.excepthook = excepthook


# ---- what a data-parallel run says when it starts -------------------------------------------------
def describe_world(world, per_device_train_batch_size, gradient_accumulation_steps=1):
    """The line rank 0 prints when a data-parallel run starts (the Trainer prints it; every rank
    must call this: one all-gather of each rank's threads, hostname and its host's cores):

        data parallel: 2 ranks (Open MPI's mpiexec) on 2 hosts, 1 rank each; per-device batch 4 x 2
        ranks x 2 accumulation steps = global batch 16 examples per optimizer step; 2 npbert threads
        and 2 BLAS threads per rank (2 cores for 1 rank on each host)

    A host is a hostname: ranks that report the same one share a machine.  The global batch is
    what one process would need as per_device_train_batch_size (with the same accumulation) to
    compute the same steps (docs/data_parallel.md)."""
    threads = world.threads or {}
    ranks = world.all_gather_object((threads.get("npbert"), threads.get("blas"), socket.gethostname(),
                                     threads.get("host_cores")))
    W, P, A = world.world_size, int(per_device_train_batch_size), int(gradient_accumulation_steps)
    launcher = (world.launcher or "MPI").split(" (")[0]
    hosts = {}                                          # hostname -> [ranks, cores], in rank order
    for _, _, host, cores in ranks:
        hosts.setdefault(host, [0, cores])[0] += 1

    def per_rank(values, what):
        known = sorted({v for v in values if v is not None})
        if not known:
            return f"{what} threads as the environment sets them"
        count = f"{known[0]}" if len(known) == 1 else f"{known[0]}..{known[-1]}"
        return f"{count} {what} thread{'s' if known[-1] > 1 else ''}"
    accumulation = f" x {_count(A, 'accumulation step')}" if A > 1 else ""
    how = "; ".join(filter(None, [_cores_per_host(hosts), threads.get("how")]))
    return (f"data parallel: {_count(W, 'rank')} ({launcher}) on {_hosts(hosts)}; per-device batch {P} x "
            f"{_count(W, 'rank')}{accumulation} = global batch {_count(P * W * A, 'example')} per optimizer "
            f"step; {per_rank([r[0] for r in ranks], 'npbert')} and {per_rank([r[1] for r in ranks], 'BLAS')} "
            f"per rank{f' ({how})' if how else ''}")


def _count(n, word):
    """'1 rank', '2 ranks'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def _hosts(hosts):
    """'1 host', '2 hosts, 1 rank each', '3 hosts, 1 to 4 ranks each'."""
    counts = sorted({r for r, _ in hosts.values()})
    if len(hosts) == 1:
        return "1 host"
    each = _count(counts[0], "rank") if len(counts) == 1 else f"{counts[0]} to {counts[-1]} ranks"
    return f"{_count(len(hosts), 'host')}, {each} each"


def _cores_per_host(hosts):
    """'2 cores shared by 2 ranks on the host', '8 cores for 1 rank on each host', or per group of
    alike hosts: '8 cores shared by 3 ranks on each of 2 hosts; 4 cores for 1 rank on 1 host'.
    Empty when a host's cores are unknown."""
    if any(cores is None for _, cores in hosts.values()):
        return ""
    groups = {}                                         # (cores, ranks) -> hosts, first seen first
    for ranks, cores in hosts.values():
        groups[cores, ranks] = groups.get((cores, ranks), 0) + 1
    parts = []
    for (cores, ranks), n in groups.items():
        if len(groups) == 1:
            where = "the host" if n == 1 else "each host"
        else:
            where = "1 host" if n == 1 else f"each of {n} hosts"
        parts.append(f"{_count(cores, 'core')} {'shared by' if ranks > 1 else 'for'} {_count(ranks, 'rank')} on {where}")
    return "; ".join(parts)
