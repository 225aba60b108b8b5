"""Where a step of npbert's fast path spends its time, op by op (bench_model.py --profile).

Each op the fast modules call (npbert.fast's functions, the linear layer's GEMMs and its bias,
the modules' own forward and backward) is wrapped, for the profile only, by a timer that keeps
a stack per thread: an op's *exclusive* time is its wall time minus that of the wrapped ops it
called, so nothing is counted twice.  A module's exclusive time is the NumPy work written
inline in it (residual adds, the GELU derivative's multiplication, concatenations) plus its
Python.  The encoder runs its two halves side by side on two threads (npbert/fast/parallel.py:
side_by_side), so the times add up to thread-seconds, about twice the step's wall time there;
shares are of those thread-seconds, and "seconds of the step" is the share times the step's
wall time.  Bytes: the arrays an op reads and writes (arguments and results, one level into
tuples and dicts), per step; bytes / exclusive time says how far an op is from streaming
memory.  Threads: how many distinct threads ran the op (1 outside the encoder's halves means
nothing ran it on the second core, except the ops that split themselves: parallel_for).
`module BertEncoder.forward` / `.backward` (inline) is mostly the main thread waiting for the
other half to finish (and the halves' outputs joined): how unevenly the two cores were loaded.

The wrapped linear layer computes what npbert/ops/linear.py computes (the same expressions),
only timing the GEMM and the bias apart.
"""
import collections
import contextlib
import threading
import time

import numpy as np

_local = threading.local()
_lock = threading.Lock()
STATS = collections.defaultdict(lambda: {"seconds": 0.0, "calls": 0, "bytes": 0, "threads": set()})
MAIN = {"seconds": 0.0}


def _nbytes(obj, depth=0):
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if depth > 1:
        return 0
    if isinstance(obj, (tuple, list)):
        return sum(_nbytes(o, depth + 1) for o in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(o, depth + 1) for o in obj.values())
    return 0


def _enter():
    """Start timing a block: push its children's time (0 so far)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(0.0)                               # the children's time
    return stack, time.perf_counter()


def _leave(stack, t0):
    """The block's exclusive time (its children's subtracted), counted in its parent's children."""
    dt = time.perf_counter() - t0
    children = stack.pop()
    if stack:
        stack[-1] += dt
    return dt - children


def _add(name, seconds, nbytes):
    with _lock:
        s = STATS[name]
        s["seconds"] += seconds
        s["calls"] += 1
        s["bytes"] += nbytes
        s["threads"].add(threading.get_ident())


@contextlib.contextmanager
def timed(name, nbytes=0):
    """Exclusive wall time of the block under `name` (child blocks' time subtracted)."""
    stack, t0 = _enter()
    try:
        yield
    finally:
        _add(name, _leave(stack, t0), nbytes)


def wrap(name, fn, count_bytes=True):
    def wrapped(*args, **kwargs):
        stack, t0 = _enter()
        try:
            out = fn(*args, **kwargs)
        finally:
            seconds = _leave(stack, t0)
        _add(name, seconds, (_nbytes(args) + _nbytes(kwargs) + _nbytes(out)) if count_bytes else 0)
        return out
    wrapped.__wrapped__ = fn
    return wrapped


# ---- the linear layer, its GEMM and its bias timed apart (npbert/ops/linear.py's expressions) ----

def linear_forward(x, weight, bias=None):
    x2 = x.reshape(-1, x.shape[-1])
    with timed("GEMM", x2.nbytes + weight.nbytes + x2.shape[0] * weight.shape[0] * x2.itemsize):
        y = x2 @ weight.T
    if bias is not None:
        with timed("linear: bias add", 2 * y.nbytes):
            y += bias
    return y.reshape(*x.shape[:-1], weight.shape[0]), (x, weight, bias is not None)


def linear_param_grads(dy, x, has_bias=True, weight_grad=True):
    dy2 = dy.reshape(-1, dy.shape[-1])
    x2 = x.reshape(-1, x.shape[-1])
    grads = {}
    if weight_grad:
        with timed("GEMM", dy2.nbytes + x2.nbytes + dy2.shape[1] * x2.shape[1] * x2.itemsize):
            grads["weight"] = dy2.T @ x2
    if has_bias:
        with timed("linear: bias grad (column sums)", dy2.nbytes):
            grads["bias"] = dy2.sum(axis=0)
    return grads


def linear_input_grad(dy, weight, x_shape):
    dy2 = dy.reshape(-1, dy.shape[-1])
    with timed("GEMM", dy2.nbytes + weight.nbytes + dy2.shape[0] * weight.shape[1] * dy2.itemsize):
        return (dy2 @ weight).reshape(x_shape)


OPS = ("layer_norm_forward", "layer_norm_backward", "gelu_forward", "gelu_forward_with_grad", "gelu_backward",
       "dropout_forward", "dropout_backward", "keep_mask", "attention_forward", "attention_backward",
       "tiled_attention_forward", "tiled_attention_backward", "embedding_forward", "embedding_backward",
       "softmax_forward", "softmax_backward", "tanh_forward", "tanh_backward")


def install():
    """Wrap the fast path's ops and modules (for this process, for profiling only)."""
    import npbert.fast as fast
    import npbert.fast.attention as fast_attention_op
    import npbert.fast.tiled_attention as tiled
    import npbert.modeling.fast as mfast
    import npbert.modeling.fast_attention as mfast_attention
    import npbert.modeling.module as module
    import npbert.modeling.leaf_modules as leaf_modules
    from npbert.modeling import attention, bert, embeddings, encoder, pooler

    fast.linear_forward = linear_forward
    for mod in (module, leaf_modules, mfast_attention):
        mod.linear_param_grads = linear_param_grads
        mod.linear_input_grad = linear_input_grad
    for name in OPS:
        if hasattr(fast, name):
            setattr(fast, name, wrap(name, getattr(fast, name)))
    for mod in (fast_attention_op, tiled):           # the ops the attention op calls by their own names
        for name in ("softmax_forward_unshifted", "softmax_backward", "dropout_forward", "dropout_backward",
                     "keep_mask"):
            if hasattr(mod, name):
                label = "softmax_forward (attention)" if name == "softmax_forward_unshifted" else name
                setattr(mod, name, wrap(label, getattr(mod, name)))
    import npbert.fast.gelu as fast_gelu                # the modules read GELU from its registry (get_activation)
    for key in ("gelu", "gelu_python"):
        forward, backward = fast_gelu.ACT2FN[key]
        fast_gelu.ACT2FN[key] = (wrap("gelu_forward", forward), wrap("gelu_backward", backward))
    mfast_attention.tiled_attention_forward = wrap("tiled_attention_forward", tiled.tiled_attention_forward)
    mfast_attention.tiled_attention_backward = wrap("tiled_attention_backward", tiled.tiled_attention_backward)
    classes = [mfast.FastBertOutput, mfast.FastBertIntermediate, mfast_attention.FastBertSelfAttention,
               mfast_attention.FastBertSelfOutput, attention.BertAttention, encoder.BertLayer,
               embeddings.BertEmbeddings, pooler.BertPooler, bert.BertModel, encoder.BertEncoder]
    for cls in classes:
        for meth in ("forward", "backward"):
            if meth in cls.__dict__:
                setattr(cls, meth, wrap(f"module {cls.__name__}.{meth} (inline)", cls.__dict__[meth],
                                        count_bytes=False))
    import npbert.fast.parallel as parallel
    run_inline = parallel._run_inline

    def timed_inline(task):                          # a side_by_side task: thread-seconds of the worker
        t0 = time.perf_counter()
        try:
            return run_inline(task)
        finally:
            if threading.current_thread() is not threading.main_thread():
                with _lock:
                    MAIN["seconds"] += time.perf_counter() - t0
    parallel._run_inline = timed_inline


def reset():
    STATS.clear()
    MAIN["seconds"] = 0.0


def snapshot(wall):
    """{"wall": step seconds, "thread_seconds": ..., "ops": {name: {...}}} of the runs since reset()."""
    total = wall + MAIN["seconds"]
    ops = {name: {"seconds": s["seconds"], "calls": s["calls"], "bytes": s["bytes"], "threads": len(s["threads"])}
           for name, s in STATS.items()}
    ops["rest (Python between ops, the model's own code)"] = {
        "seconds": total - sum(s["seconds"] for s in STATS.values()), "calls": 0, "bytes": 0, "threads": 0}
    return {"wall": wall, "thread_seconds": total, "ops": ops}


def print_table(mode, profile, rounds, floor=None):
    """The profile of `rounds` runs of `mode`: one line per op, largest first."""
    wall = profile["wall"] / rounds
    total = profile["thread_seconds"]
    print(f"\nper-op profile, {mode}: step {wall * 1e3:.0f} ms wall, {total / rounds * 1e3:.0f} ms thread-seconds "
          f"({total / profile['wall']:.2f} threads busy on average)"
          + ("" if floor is None else f"; gemm-floor {floor * 1e3:.0f} ms, step / floor {wall / floor:.2f}x"))
    print(f"  {'op':52s} {'share':>6s} {'ms/step':>8s} {'calls':>6s} {'MB/step':>8s} {'GB/s':>6s} {'thr':>3s}")
    for name, s in sorted(profile["ops"].items(), key=lambda kv: -kv[1]["seconds"]):
        share = s["seconds"] / total
        ms = share * wall * 1e3                       # seconds of the step
        gbs = s["bytes"] / s["seconds"] / 1e9 if s["bytes"] and s["seconds"] > 0 else float("nan")
        print(f"  {name:52s} {share:6.1%} {ms:8.1f} {s['calls'] // rounds:6d} {s['bytes'] / rounds / 1e6:8.1f} "
              f"{gbs:6.1f} {s['threads']:3d}")
