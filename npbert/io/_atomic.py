"""Atomic file replacement: an interrupted save never destroys the old file.

The new content goes to a temporary file in the target's own directory (so
that the final rename stays on one filesystem), is flushed and fsync'ed, and
only then renamed over the target with ``os.replace``, which POSIX makes
atomic: a reader sees either the whole old file or the whole new one.

Temporary names carry the writer's process id (``.<name>.<pid>.<random>.tmp``),
so that a later run can tell the leftovers of a killed writer (dead pid) from
the files of one still writing (see `npbert.io.leftovers`).
"""
import contextlib
import os
import tempfile


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """``with atomic_write(path) as f: f.write(...)``; the rename happens on exit.

    If the body raises, the temporary file is removed and ``path`` is
    untouched.
    """
    with atomic_path(path) as tmp:
        with open(tmp, mode) as f:
            yield f


@contextlib.contextmanager
def atomic_path(path):
    """Like ``atomic_write`` but yields the temporary *path*, for writers
    (h5py) that open files themselves."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.{os.getpid()}.",
                               suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        fsync_file(tmp)
        os.chmod(tmp, 0o666 & ~_current_umask())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp):
            e.filename = path               # name the file being saved, not its temporary name
        raise
    _fsync_directory(directory)


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory):
    # Makes the rename itself durable; not possible on every OS/filesystem.
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
