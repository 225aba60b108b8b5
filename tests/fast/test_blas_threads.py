"""The fast path shortens the spin of OpenBLAS's idle worker threads on its first use, not at
import (npbert/fast/parallel.py: they would otherwise take the cores npbert's own threads need),
and runs small GEMMs on one BLAS thread."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from npbert.fast import parallel

PROBE = """
import ctypes, sys
import numpy as np
import npbert
from npbert.fast import parallel

def timeouts():
    libs = parallel._openblas_libs(("openblas_thread_timeout",))
    for lib in libs:
        lib.openblas_thread_timeout.restype = ctypes.c_int
    return ",".join(str(lib.openblas_thread_timeout()) for lib in libs) or "none"

at_import = timeouts()
with npbert.using_path(sys.argv[1]):
    m = npbert.BertModel(npbert.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
                                           num_attention_heads=2, intermediate_size=16))
m(input_ids=np.array([[1, 2, 3], [4, 5, 6]]))
print(at_import, timeouts())
"""


def _timeouts(env_value, path="fast"):
    """(OpenBLAS's thread timeout after `import npbert`, after one model call on `path`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "NPBERT_PATH")}
    if env_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE, path], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return tuple(out.stdout.split())


def _has_openblas():
    return bool(parallel._openblas_libs(("openblas_read_env", "blas_thread_shutdown_", "openblas_thread_timeout")))


@pytest.mark.skipif(not _has_openblas(), reason="NumPy here does not use an OpenBLAS with a settable thread timeout")
def test_the_fast_paths_first_use_sets_the_timeout_and_respects_the_users_choice():
    # OpenBLAS reports the value it read (0: unset, its default spin of 2^28 cycles)
    assert _timeouts(None) == ("0", str(parallel.BLAS_THREAD_TIMEOUT))   # import: untouched; first use: set
    assert _timeouts(None, "reference") == ("0", "0")                    # the reference path never touches it
    assert _timeouts("12") == ("12", "12")      # the user's OPENBLAS_THREAD_TIMEOUT wins


@pytest.mark.skipif(not _has_openblas(), reason="NumPy here does not use an OpenBLAS with a settable thread timeout")
def test_gemms_after_the_pool_restarts_are_unchanged():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 250))
    before = a @ b
    assert parallel.set_blas_thread_timeout(6) is True
    try:
        after = a @ b                     # the worker threads are started again here
        assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ or os.environ["OPENBLAS_THREAD_TIMEOUT"] != "6"
    finally:
        parallel.set_blas_thread_timeout(parallel.BLAS_THREAD_TIMEOUT)
    np.testing.assert_array_equal(after, before)          # same library, same blocking: bit-identical


@pytest.mark.parametrize("bad", [0, 3, 31])
def test_out_of_range_timeout(bad):
    with pytest.raises(ValueError, match="4..30"):
        parallel.set_blas_thread_timeout(bad)


@pytest.mark.skipif(parallel._find_openblas_setter()[0] is None, reason="no OpenBLAS whose thread count can be set")
def test_single_threaded_blas_sets_and_restores_the_thread_count():
    setter, getter = parallel._find_openblas_setter()
    before = getter()
    setter(2)
    try:
        with parallel.single_threaded_blas():
            assert getter() == 1
        assert getter() == 2
        with pytest.raises(RuntimeError):
            with parallel.single_threaded_blas():
                raise RuntimeError("inside")
        assert getter() == 2                  # restored on the way out of an exception too
    finally:
        setter(before)


@pytest.mark.skipif(parallel._find_openblas_setter()[0] is None, reason="no OpenBLAS whose thread count can be set")
def test_single_threaded_blas_blocks_overlapping_in_two_threads():
    """A enters, B enters, A leaves, B leaves: BLAS stays on one thread until B leaves and then
    gets its count back (restoring on each exit would leave it at 1 for good: B saw 1 on entry)."""
    import threading
    setter, getter = parallel._find_openblas_setter()
    before = getter()
    setter(2)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with parallel.single_threaded_blas():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with parallel.single_threaded_blas():
            b_in.set()
            a_out.wait(10)
            seen["after A left"] = getter()

    try:
        threads = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert a_out.is_set() and b_in.is_set()
        assert seen["after A left"] == 1
        assert getter() == 2
    finally:
        setter(before)
