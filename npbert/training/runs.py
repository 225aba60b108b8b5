"""One run per output directory: the lock, the check of what the directory holds, the leftovers.

    with RunLock(output_dir):                   # refused while another process holds it
        prepare_output_dir(output_dir, overwrite_output_dir, resume_from_checkpoint)
        ... train, save ...

RunLock: `output_dir/.npbert-run.lock`, an exclusive `flock` held for the life of the run and
holding the holder's pid, host, command and start time, so that a second run into the same
directory is refused with a message naming the first.  The kernel drops the flock when its
process dies, however it dies, so a lock file left behind by a killed run (a dead pid) is
simply taken over.  Re-entrant within one process (the `npbert finetune` command holds it,
and the Trainer it runs takes it again).  Under an MPI launcher only rank 0 takes it (only
rank 0 writes).

prepare_output_dir: a directory holding another run's checkpoints or model is refused unless
the run resumes (`resume_from_checkpoint`) or starts over (`overwrite_output_dir`, which
removes the old `checkpoint-*` directories so that a later resume cannot pick one of them up);
this is transformers' example scripts' rule, made stricter: they resume silently.  The
leftovers of killed writers (temporary names whose pid is dead) are cleaned up first, and a
checkpoint caught between its two renames is put back (`checkpoint.recover_interrupted_saves`).
"""
import contextlib
import datetime
import errno
import json
import os
import socket
import sys

from npbert.io.atomic_dir import find_leftovers, finish_interrupted_saves, pid_alive, remove_path
from npbert.io.errors import RunError

from . import checkpoint as ckpt

LOCK_NAME = ".npbert-run.lock"
# A run's model at the top of its output directory (with checkpoint-* directories, what a new run
# would mix with).  A lone trainer_state.json (a run that saved nothing else) is replaced, as
# transformers' Trainer replaces it.
RUN_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "tf_model.h5",
             "npbert_model.h5", "config.json")
_RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")
_held = {}          # realpath of the directory -> [fd, count, lock path]


def is_main_process(environ=None):
    """False in the ranks > 0 of an MPI launch (they neither lock nor write)."""
    env = os.environ if environ is None else environ
    for name in _RANK_VARIABLES:
        if env.get(name, "").strip().isdigit():
            return int(env[name]) == 0
    return True


def _log(message):
    print(message, file=sys.stderr, flush=True)


def _describe(info):
    if not isinstance(info, dict) or "pid" not in info:
        return "a process that left no details"
    parts = [f"pid {info['pid']}" + (f" on {info['host']}" if info.get("host") else "")]
    if info.get("command"):
        parts.append(f"`{info['command']}`")
    if info.get("started"):
        parts.append(f"started {info['started']}")
    return ", ".join(parts)


def _read_info(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.loads(f.read() or "null")
    except (OSError, ValueError):
        return None


class RunLock:
    """Exclusive use of `directory` by this process (see the module docstring).

    `acquire()` raises RunError naming the other run's process when the lock is taken."""

    def __init__(self, directory, command=None):
        self.directory = os.fspath(directory)
        self.command = command if command is not None else " ".join(sys.argv)
        self.path = os.path.join(self.directory, LOCK_NAME)
        self._key = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

    def acquire(self):
        if self._key is not None or not is_main_process():
            return self
        os.makedirs(self.directory, exist_ok=True)
        key = os.path.realpath(self.directory)
        if key in _held:
            _held[key][1] += 1
            self._key = key
            return self
        fd, previous = self._lock()
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                "started": datetime.datetime.now().isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        if isinstance(previous, dict) and previous.get("pid") not in (None, os.getpid()):
            _log(f"note: {self.path} was left by a run that is no longer running ({_describe(previous)}); "
                 "taken over")
        _held[key] = [fd, 1, self.path]
        self._key = key
        return self

    def _lock(self):
        try:
            import fcntl
        except ImportError:                     # no flock (Windows): an exclusive create, pid checked
            return self._lock_by_create()
        for _ in range(10):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise RunError(self._taken_message(_read_info(self.path))) from None
                if e.errno == errno.ENOLCK:     # a filesystem without flock
                    return self._lock_by_create()
                raise
            # The holder we waited for may have unlinked the file after we opened it: then we
            # hold a lock on a deleted file, and must lock the one now at the path instead.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd, _read_info(self.path)
            os.close(fd)
        raise RunError(f"{self.path}: could not take the lock (it keeps being replaced by another process)")

    def _lock_by_create(self):
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                return fd, None
            except FileExistsError:
                info = _read_info(self.path)
                pid = info.get("pid") if isinstance(info, dict) else None
                if isinstance(pid, int) and info.get("host") == socket.gethostname() and not pid_alive(pid):
                    _log(f"note: removing the stale lock {self.path} ({_describe(info)}: not running)")
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path)
                    continue
                raise RunError(self._taken_message(info)) from None
        raise RunError(f"{self.path}: could not take the lock")

    def _taken_message(self, info):
        return (f"{self.directory}: another run is using this output directory ({_describe(info)}); wait for it "
                f"to finish or choose another --output_dir (the lock {self.path} is released when that process ends)")

    def release(self):
        key, self._key = self._key, None
        if key is None or key not in _held:
            return
        held = _held[key]
        held[1] -= 1
        if held[1] > 0:
            return
        del _held[key]
        fd, _, path = held
        with contextlib.suppress(OSError):
            os.unlink(path)                     # while still locked: see _lock
        os.close(fd)


def run_files(directory):
    """The checkpoints and model files of a run in `directory` (names, sorted)."""
    if not os.path.isdir(directory):
        return []
    names = [os.path.basename(p) for p in ckpt.sorted_checkpoints(directory)]
    return names + [n for n in RUN_FILES if os.path.isfile(os.path.join(directory, n))]


def clean_leftovers(output_dir, log=_log):
    """Remove the temporary files and directories of killed writers in `output_dir` (dead pids
    only), after putting back a checkpoint caught between its two renames and finishing a
    model save caught while moving its files in.  Returns the paths removed."""
    for path in ckpt.recover_interrupted_saves(output_dir, log):
        log(f"note: {path}: recovered a checkpoint whose save was interrupted between its two renames")
    for path in finish_interrupted_saves(output_dir):
        log(f"note: finished moving the files of an interrupted save ({path}) into {output_dir}")
    removed = []
    for path, kind, step, pid in find_leftovers(output_dir):
        if not pid_alive(pid):
            remove_path(path)
            removed.append(path)
    if removed:
        log(f"note: removed {len(removed)} leftover(s) of killed runs in {output_dir}: "
            + ", ".join(os.path.basename(p) for p in removed[:5]) + (" ..." if len(removed) > 5 else ""))
    return removed


def prepare_output_dir(output_dir, overwrite_output_dir=False, resume_from_checkpoint=None, log=_log):
    """Check `output_dir` before a run writes into it (see the module docstring); call it with
    the RunLock held.  Raises RunError when it holds another run's files and neither flag says
    what to do with them.  Ranks > 0 of an MPI launch leave the directory to rank 0."""
    if not is_main_process():
        return []
    clean_leftovers(output_dir, log)
    found = run_files(output_dir)
    if not found or resume_from_checkpoint:
        return found
    if not overwrite_output_dir:
        shown = ", ".join(found[:6]) + (" ..." if len(found) > 6 else "")
        raise RunError(f"{output_dir} already holds another run's files ({shown}): a new run would mix its "
                       "checkpoints and model with them. Pass --overwrite_output_dir (TrainingArguments."
                       "overwrite_output_dir=True) to start over (the old checkpoints are removed), "
                       "--resume_from_checkpoint to continue that run, or choose another --output_dir")
    old = ckpt.sorted_checkpoints(output_dir)
    for path in old:
        remove_path(path)
    if old:
        log(f"--overwrite_output_dir: removed the {len(old)} checkpoint(s) of the previous run in {output_dir}")
    return found
