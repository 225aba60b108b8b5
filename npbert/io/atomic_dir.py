"""Whole-directory saves, and the leftovers of writers that were killed.

`atomic_directory(directory)` yields a temporary directory to write files into; when the
body returns, the files appear in `directory` together:

- `directory` does not exist yet: the temporary directory is a sibling
  (`.tmp-<name>-<pid>`) renamed to `directory` in one step.  A reader sees nothing, or all.
- `directory` exists (an output directory holding other files): the temporary directory is
  `directory/.tmp-save-<pid>`.  Once every file in it is written and fsync'ed, a `COMMITTED`
  note (the list of file names) is written, then each file is renamed into place, then the
  temporary directory is removed.  A kill before the note leaves the old files untouched; a
  kill after it leaves a save that is complete but only partly moved in:
  `finish_interrupted_saves(directory)` moves the rest (roll forward), and
  `interrupted_saves(directory)` lets a loader refuse the mixed directory meanwhile.

Leftovers (`find_leftovers`, `remove_dead_leftovers`): every temporary name written here or by
`atomic_write` / the checkpoint writer carries the writer's pid; a leftover whose pid is not a
running process is litter from a killed run and is removed when a run starts.
"""
import contextlib
import json
import os
import re
import shutil

from npbert.io._atomic import _fsync_directory, fsync_file

COMMITTED = "COMMITTED"
_SAVE_RE = re.compile(r"^\.tmp-save-(\d+)$")
# (pattern, kind) of the temporary names npbert writers use, each with the writer's pid
LEFTOVER_PATTERNS = [
    (re.compile(r"^\.tmp-checkpoint-(\d+)-(\d+)$"), "tmp-checkpoint"),     # checkpoint being written
    (re.compile(r"^\.old-checkpoint-(\d+)-(\d+)$"), "old-checkpoint"),     # checkpoint being replaced
    (re.compile(r"^()\.tmp-save-(\d+)$"), "tmp-save"),                     # save_pretrained into an existing dir
    (re.compile(r"^()\..+\.(\d+)\.[A-Za-z0-9_]+\.tmp$"), "tmp-file"),     # atomic_write
    (re.compile(r"^()\.tmp-.+-(\d+)$"), "tmp-dir"),                      # save_pretrained into a new dir
]


def pid_alive(pid):
    """True when `pid` is a running process on this machine (a zombie counts as dead)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True            # exists, owned by someone else (or no way to tell: assume alive)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _write_committed(tmp, names):
    path = os.path.join(tmp, COMMITTED)
    with open(path, "w") as f:
        json.dump(names, f)
    fsync_file(path)
    _fsync_directory(tmp)


@contextlib.contextmanager
def atomic_directory(directory):
    """``with atomic_directory(d) as tmp: write files into tmp``; see the module docstring."""
    directory = os.path.abspath(os.fspath(directory))
    parent, name = os.path.split(directory)
    if not os.path.isdir(directory):
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".tmp-{name}-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            yield tmp
            try:
                os.rename(tmp, directory)
                _fsync_directory(parent)
                return
            except OSError:                     # someone created `directory` meanwhile: move the files in
                if not os.path.isdir(directory):
                    raise
            _move_in(tmp, directory)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return
    tmp = os.path.join(directory, f".tmp-save-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _move_in(tmp, directory)


def _move_in(tmp, directory):
    names = sorted(n for n in os.listdir(tmp) if n != COMMITTED)
    _write_committed(tmp, names)
    _finish(tmp, directory)


def _finish(tmp, directory):
    """Move every file named in tmp/COMMITTED into directory, then remove tmp."""
    with open(os.path.join(tmp, COMMITTED)) as f:
        names = json.load(f)
    for n in names:
        src = os.path.join(tmp, n)
        if os.path.exists(src):                 # already moved by an earlier, interrupted pass
            os.replace(src, os.path.join(directory, n))
    _fsync_directory(directory)
    os.unlink(os.path.join(tmp, COMMITTED))
    shutil.rmtree(tmp, ignore_errors=True)


def interrupted_saves(directory):
    """The `.tmp-save-<pid>` directories in `directory` holding a complete save whose files
    were not all moved in (their writer died, or is moving them right now)."""
    if not os.path.isdir(directory):
        return []
    return [os.path.join(directory, n) for n in sorted(os.listdir(directory))
            if _SAVE_RE.match(n) and os.path.isfile(os.path.join(directory, n, COMMITTED))]


def finish_interrupted_saves(directory):
    """Roll forward the complete saves a killed writer left in `directory` (dead pids only).
    Returns the paths finished."""
    done = []
    for tmp in interrupted_saves(directory):
        if not pid_alive(int(_SAVE_RE.match(os.path.basename(tmp)).group(1))):
            _finish(tmp, directory)
            done.append(tmp)
    return done


def find_leftovers(directory):
    """[(path, kind, step or None, pid)] for the temporary names in `directory`."""
    found = []
    if not os.path.isdir(directory):
        return found
    for n in sorted(os.listdir(directory)):
        for pattern, kind in LEFTOVER_PATTERNS:
            m = pattern.match(n)
            if m:
                step = int(m.group(1)) if m.group(1) else None
                found.append((os.path.join(directory, n), kind, step, int(m.group(2))))
                break
    return found


def remove_path(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)
