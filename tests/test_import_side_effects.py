"""`import npbert` has no side effects: it changes no environment variable, starts no thread,
opens no native library through ctypes and leaves OpenBLAS's thread count and idle spin as they
were (the fast path tunes OpenBLAS on its first use: npbert/fast/parallel.py).  Checked in a
fresh interpreter, with numpy imported first (numpy's own import is numpy's business)."""
import os
import subprocess
import sys

PROBE = r"""
import ctypes, os, re, sys, threading
import numpy as np

def openblas_state():
    # (thread count, idle timeout) of every loaded OpenBLAS, read through ctypes by this probe
    with open("/proc/self/maps") as f:
        paths = sorted(set(re.findall(r"\S*openblas\S*\.so\S*", f.read())))
    state = []
    for path in paths:
        lib = ctypes.CDLL(path)
        for getter in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                       "openblas_get_num_threads", "openblas_thread_timeout"):
            if hasattr(lib, getter):
                f = getattr(lib, getter)
                f.restype = ctypes.c_int
                state.append((getter, f()))
    return state

environ, threads, blas = dict(os.environ), threading.active_count(), openblas_state()
opened = []
real_cdll = ctypes.CDLL
class RecordingCDLL(real_cdll):
    def __init__(self, name, *args, **kwargs):
        opened.append(name)
        super().__init__(name, *args, **kwargs)
ctypes.CDLL = RecordingCDLL

import npbert
import npbert.fast, npbert.reference, npbert.functional, npbert.cli

ctypes.CDLL = real_cdll
from npbert.fast import parallel
problems = []
if dict(os.environ) != environ:
    changed = sorted(set(os.environ.items()) ^ set(environ.items()))
    problems.append(f"os.environ changed: {changed}")
if threading.active_count() != threads:
    problems.append(f"threads: {threads} before, {threading.active_count()} after")
if opened:
    problems.append(f"ctypes.CDLL opened: {opened}")
if parallel._pool is not None or parallel._tuned[0] or parallel._blas is not None:
    problems.append("npbert.fast.parallel ran at import (pool, OpenBLAS tuning or setter)")
if openblas_state() != blas:
    problems.append(f"OpenBLAS changed: {blas} -> {openblas_state()}")
print("ok" if not problems and blas else "\n".join(problems) or "no OpenBLAS found to check")
"""


def test_import_npbert_changes_nothing():
    env = {k: v for k, v in os.environ.items() if k not in ("NPBERT_PATH", "OPENBLAS_THREAD_TIMEOUT")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok", result.stdout
