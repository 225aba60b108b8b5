"""`mpiexec -n N npbert pretrain ...` / `npbert finetune ...`: the command line on N ranks.

Under an MPI launcher (npbert.distributed.detect_launcher: mpiexec, srun) the training commands
start the world before anything else (the Trainer then runs data-parallel by itself); every
other command runs in one process and refuses more than one.  Ranks > 0 print nothing: their
stdout and stderr go to /dev/null, so the progress, the notes and the one-line error come from
rank 0 alone.

A command that fails on every rank alike (a bad flag, a missing file, a DistributedError that
every rank raised together, a stop after SIGTERM) exits on every rank with its status, rank 0
printing the message.  A rank that fails alone (the others run on, or wait in a collective for
it) prints its own message and aborts the whole job (MPI_Abort), so that no rank hangs:
world.all_failed tells the two apart by waiting a few seconds for the others to fail too.
"""
import atexit
import os
import sys
import time

from npbert.cli.common import UsageError
from npbert.distributed import DistributedError, detect_launcher, fingerprint_file, init, launcher_world_size

GRACE = 3.0               # seconds; see grace()
TRAINING_COMMANDS = ("pretrain", "finetune")
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_real_stderr = None


def _launched():
    return any(os.environ.get(v) for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")) \
        or os.environ.get("NPBERT_DISTRIBUTED", "").strip().lower() in ("1", "yes", "true", "on", "mpi")


def _launch_rank():
    for name in _RANK_VARIABLES:
        if os.environ.get(name, "").strip().isdigit():
            return int(os.environ[name])
    return 0


def quiet_other_ranks():
    """Ranks > 0 of an MPI launch print nothing from here on (before the arguments are parsed,
    so a usage error is printed once).  Returns this process's rank as the launcher tells it."""
    global _real_stderr
    rank = _launch_rank() if _launched() or os.environ.get("SLURM_STEP_NUM_TASKS") else 0
    if rank > 0 and os.environ.get("NPBERT_DISTRIBUTED", "").strip().lower() not in ("0", "no", "false", "off"):
        _real_stderr = sys.stderr
        devnull = open(os.devnull, "w")
        sys.stdout = sys.stderr = devnull
        # closed at exit: a file left open until the interpreter's end is a ResourceWarning, which
        # Python then prints on the real stderr (seen on a rank running 2 threads)
        atexit.register(devnull.close)
    return rank


class Ranks:
    """The world of a data-parallel command (more than one rank)."""

    def __init__(self, world):
        self.world = world


def start(command, args=None, argv=None):
    """None for one process; under a launcher of N > 1 processes: the world (initialised) for
    the training commands, a CliError for the others.  The ranks then check that they were given
    the same command line and read the same input files (size and SHA-256 of each --*_file, and of
    the model directory's config.json and vocab.txt): a copy that differs on one machine stops
    every rank with a message naming the file."""
    launcher = detect_launcher()
    if launcher is None:
        return None
    if command not in TRAINING_COMMANDS:
        n = launcher_world_size()
        if n is not None and n > 1:
            raise UsageError(f"npbert {command} runs in one process, and {launcher} started {n}: only "
                             f"`npbert pretrain` and `npbert finetune` run data-parallel; start it without mpiexec")
        return None
    world = init()
    if world.world_size == 1:
        return None
    # each flag its own field, so that a disagreement names the flag and each rank's value
    fields = {f"--{name}": value for name, value in sorted(vars(args or {}).items())
              if not callable(value) and name not in ("command", "debug")}
    for name, value in sorted(vars(args or {}).items()):
        paths = {}
        if name.endswith("_file") and isinstance(value, str):
            paths = {f"--{name}": value}
        elif name == "model_name_or_path" and isinstance(value, str):
            paths = {f"--{name} {f}": os.path.join(value, f) for f in ("config.json", "vocab.txt")}
        for flag, path in paths.items():
            if os.path.isfile(path):
                fields[flag] = fingerprint_file(path)
    try:
        world.check_same(fields, what="the command line and the input files")
    except DistributedError as e:        # every rank raises it: a usage error, one line, status 2
        raise UsageError(f"{e}; start every rank with the same flags and the same files") from None
    if world.is_main_process and os.environ.get("OMPI_COMM_WORLD_SIZE"):
        print(f"note: {world.world_size} ranks under Open MPI's mpiexec: to stop after the current step and save, "
              f"send it SIGUSR1 (kill -USR1 {os.getppid()}); a SIGTERM or Ctrl-C to mpiexec ends every rank at once, "
              "keeping only the last checkpoint saved", file=sys.stderr, flush=True)
    return Ranks(world)


def grace(status):
    """On a silent rank > 0 ending with an error before any world exists (a usage error, a
    command that refuses N ranks): wait GRACE seconds first.  mpiexec ends the whole job as soon
    as one process exits non-zero without MPI, which would cut rank 0 off before it prints the
    same error."""
    if status and _real_stderr is not None:
        time.sleep(GRACE)


def finish(ranks, status, message, where):
    """After the command ended with a non-zero `status` on this rank (`message` already printed
    if this is rank 0): return the status when every rank failed alike, else abort the job."""
    if ranks is None:
        grace(status)
        return status
    if status == 0:
        return status
    world = ranks.world
    if world.all_failed():
        return status
    if _real_stderr is not None:
        sys.stdout, sys.stderr = sys.__stdout__, _real_stderr
    if not world.is_main_process:
        print(f"{where} (rank {world.rank} of {world.world_size}): error: {message}", file=sys.stderr, flush=True)
    world.abort(f"{where}: rank {world.rank} of {world.world_size} failed while the other ranks did not; aborting "
                f"every rank so that none waits for it", status or 1)
    return status                       # (not reached)
