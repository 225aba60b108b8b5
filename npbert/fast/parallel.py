"""Threads for the work NumPy does on one core: element-wise passes and many small GEMMs.
The fast path's scheduling; the reference path never comes here.

NumPy's ufuncs and matmul release the GIL, so splitting an array over a few Python threads
runs them in parallel, as torch's intra-op threads do.  Splits always fall on the same
boundaries for a given size, and each piece is computed exactly as it would be alone, so
results do not depend on the thread count.

Threads: NPBERT_NUM_THREADS, else min(cpu_count, 8); `set_num_threads(n)` changes it.  The pool
starts on the first parallel loop.  Importing npbert runs nothing here: OpenBLAS's idle-thread
spin is shortened on the fast path's first use (`tune_openblas`, below), not at import.
Measured speed stories: docs/performance.md.
"""
import contextlib
import ctypes
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor, wait

from npbert.settings import POSITIVE_INT, check_value

_num_threads = None                    # None: not read from the environment yet
_pool = None
_pool_lock = threading.Lock()
_local = threading.local()             # .inline: this thread runs one of side_by_side's tasks


def set_num_threads(n):
    """Threads npbert's own parallel loops use (BLAS keeps its own setting)."""
    global _num_threads, _pool
    n = check_value("set_num_threads: the number of threads", POSITIVE_INT, n)
    with _pool_lock:
        if _pool is not None and n != _num_threads:
            _pool.shutdown(wait=True)
            _pool = None
        _num_threads = n


def get_num_threads():
    global _num_threads
    if _num_threads is None:
        env = os.environ.get("NPBERT_NUM_THREADS")
        _num_threads = max(1, int(env)) if env else max(1, min(os.cpu_count() or 1, 8))
    return _num_threads


def _get_pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(get_num_threads(), thread_name_prefix="npbert")
        return _pool


def parallel_for(work, n, wrap=None):
    """Run work(start, stop) over [0, n) split into up to get_num_threads() contiguous runs;
    the calling thread takes the first run.  `wrap(fn, *args)`, if given, runs each piece
    in the worker threads (for per-thread state such as np.errstate)."""
    tune_openblas()
    n_threads = 1 if getattr(_local, "inline", False) else min(get_num_threads(), n)
    if n_threads <= 1:
        work(0, n)
        return
    bounds = [n * i // n_threads for i in range(n_threads + 1)]
    pool = _get_pool()
    if wrap is None:
        futures = [pool.submit(work, bounds[i], bounds[i + 1]) for i in range(1, n_threads)]
    else:
        futures = [pool.submit(wrap, work, bounds[i], bounds[i + 1]) for i in range(1, n_threads)]
    work(bounds[0], bounds[1])
    for f in futures:
        f.result()


# ---- OpenBLAS's own thread count -------------------------------------------------------------
# Small GEMMs (attention's 128 x 64 x 128 per head) run slower on two OpenBLAS threads than
# on one; npbert runs them on one BLAS thread each, in its own threads.

def _find_openblas_setter():
    """(set_num_threads, get_num_threads) of the first loaded OpenBLAS that has them, or (None, None)."""
    for lib in _openblas_libs(()):
        for suffix in ("", "64_"):
            for prefix in ("scipy_openblas_", "openblas_"):
                setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    setter.argtypes, setter.restype, getter.restype = [ctypes.c_int], None, ctypes.c_int
                    return setter, getter
    return None, None


def set_blas_num_threads(n):
    """Set OpenBLAS's thread count (one setting for the whole process).  Returns False, and
    changes nothing, when no loaded OpenBLAS has the entry point (then OMP_NUM_THREADS /
    OPENBLAS_NUM_THREADS, read when numpy loads, are the only way)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"number of BLAS threads must be >= 1, got {n}")
    setter, _ = _find_openblas_setter()
    if setter is None:
        return False
    setter(n)
    return True


def get_blas_num_threads():
    """OpenBLAS's thread count, or None when no loaded OpenBLAS reports it."""
    _, getter = _find_openblas_setter()
    return None if getter is None else int(getter())


_blas = None
_blas_lock = threading.Lock()
_blas_users = [0, None]                # blocks open now (any thread), the thread count before the first


@contextlib.contextmanager
def single_threaded_blas():
    """Within the block, OpenBLAS computes each GEMM on the calling thread alone.
    Without an OpenBLAS whose thread count can be set, a no-op.

    OpenBLAS's thread count is one setting for the whole process, so blocks open in several
    threads at once share it: the first to enter saves the count, the last to leave restores it."""
    global _blas
    if _blas is None:
        _blas = _find_openblas_setter()
    setter, getter = _blas
    if setter is None:
        yield
        return
    with _blas_lock:
        if _blas_users[0] == 0:
            _blas_users[1] = getter()
            setter(1)
        _blas_users[0] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users[0] -= 1
            if _blas_users[0] == 0:
                setter(_blas_users[1])


# ---- OpenBLAS's idle threads ----------------------------------------------------------------
# After a GEMM, OpenBLAS's worker threads spin for 2^28 cycles (about 0.1 s) before they sleep.
# Between two GEMMs the fast path runs its element-wise passes on its own threads, one per core,
# and the spinning workers take those cores (figures: docs/performance.md).  So the fast path
# shortens the spin once, on its first use (the first parallel loop: `tune_openblas`), unless
# OPENBLAS_THREAD_TIMEOUT is set (OpenBLAS then read it itself; 28 is its default).  Importing
# npbert does not do it: it changes a process-wide setting of a native library, which only a
# program that runs the fast path should get.  The cost: a worker that has gone to sleep takes a
# few microseconds to wake for the next GEMM.

BLAS_THREAD_TIMEOUT = 8                # log2 of the spin in cycles (OpenBLAS accepts 4..30)
_tuned = [False]                       # tune_openblas has run in this process


def tune_openblas():
    """On the fast path's first use: shorten OpenBLAS's idle spin to 2^BLAS_THREAD_TIMEOUT cycles
    unless the user set OPENBLAS_THREAD_TIMEOUT.  Later calls do nothing."""
    if _tuned[0]:
        return
    with _blas_lock:
        if _tuned[0]:
            return
        _tuned[0] = True
        if "OPENBLAS_THREAD_TIMEOUT" not in os.environ:
            set_blas_thread_timeout(BLAS_THREAD_TIMEOUT)


def set_blas_thread_timeout(log2_cycles):
    """Make OpenBLAS's idle worker threads sleep after 2^log2_cycles cycles of spinning
    (OPENBLAS_THREAD_TIMEOUT, read again at run time).  Returns True if an OpenBLAS took it,
    False if none with the entry points needed is loaded (then nothing changes).

    OpenBLAS reads the value from the environment only, when its thread pool starts: the
    variable is set for the two calls below and then restored as it was."""
    log2_cycles = int(log2_cycles)
    if not 4 <= log2_cycles <= 30:
        raise ValueError(f"OpenBLAS's thread timeout is log2 of a cycle count in 4..30, got {log2_cycles}")
    libs = _openblas_libs(("openblas_read_env", "blas_thread_shutdown_"))
    if not libs:
        return False
    before = os.environ.get("OPENBLAS_THREAD_TIMEOUT")
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(log2_cycles)
    try:
        for lib in libs:
            lib.openblas_read_env()        # the timeout is read from the environment ...
            lib.blas_thread_shutdown_()    # ... when the thread pool starts: the next GEMM restarts it
    finally:
        if before is None:
            del os.environ["OPENBLAS_THREAD_TIMEOUT"]
        else:
            os.environ["OPENBLAS_THREAD_TIMEOUT"] = before
    return True


def _openblas_libs(symbols):
    """The loaded OpenBLAS libraries (this process's maps) that export every name in symbols."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"\S*openblas\S*\.so\S*", f.read())))
    except OSError:
        return []
    libs = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if all(hasattr(lib, name) for name in symbols):
            libs.append(lib)
    return libs


def over_batch(work, batch_size):
    """work(a, b) for batch rows [a, b) split over npbert's threads, one BLAS thread each:
    for many small GEMMs (attention's per-head products) this beats BLAS's own threads."""
    tune_openblas()
    if getattr(_local, "inline", False):         # inside side_by_side: BLAS is already on one thread
        work(0, batch_size)
        return
    with single_threaded_blas():
        parallel_for(work, batch_size)


# ---- Whole tasks side by side -----------------------------------------------------------------
# A thread pool handing out element-wise passes pays twice per pass: the wake-up of a sleeping
# worker and the GIL, which every NumPy call takes at its start and end.  Two threads that each
# run a long sequence of calls on their own data (the encoder's layers on half the batch each)
# meet at the GIL far less often (figures: docs/performance.md).

SIDE_BY_SIDE_MAX_THREADS = 3           # with more threads, each op's own splitting uses them better


def side_by_side(tasks):
    """Run each task() and return their results in order.  With 2..SIDE_BY_SIDE_MAX_THREADS
    npbert threads (and at most that many tasks) they run at the same time, one per thread,
    each with npbert's loops inline (parallel_for, over_batch) and OpenBLAS on one thread;
    otherwise one after the other, each with every thread.  The tasks must not share
    anything they write, and must compute the same numbers however they are run (npbert's
    ops do: their splits never change a result)."""
    tune_openblas()
    tasks = list(tasks)
    n = get_num_threads()
    if len(tasks) < 2 or getattr(_local, "inline", False) or not 2 <= n <= SIDE_BY_SIDE_MAX_THREADS \
            or len(tasks) > n:
        return [task() for task in tasks]
    pool = _get_pool()
    with single_threaded_blas():
        futures = [pool.submit(_run_inline, task) for task in tasks[1:]]
        try:
            first = _run_inline(tasks[0])
        finally:
            wait(futures)                    # every task ends before BLAS gets its threads back
        return [first] + [f.result() for f in futures]


def _run_inline(task):
    before = getattr(_local, "inline", False)
    _local.inline = True
    try:
        return task()
    finally:
        _local.inline = before
