"""What the ranks exchange about the model: its initial parameters (rank 0's, broadcast) and,
every optimizer step, the sum of their gradients.

    broadcast_parameters(model, world)      # once: every rank starts from rank 0's arrays
    allreduce_gradients(grads, model, world)    # every step, after the last micro-batch's backward

The all-reduce packs the gradient dict into contiguous buckets in a fixed order, the order of
model.named_parameters() (frozen parameters left out, as backward() leaves them out):

    bucket = [g_a.ravel(), g_b.ravel(), ...]     consecutive parameters, <= bucket_bytes together
    Allreduce(IN_PLACE, bucket, SUM)             one call per bucket, every rank the same buckets
    g_a[...] = bucket[0:a].reshape(g_a.shape)    unpacked back into the dict's own arrays

A parameter larger than a bucket (the word embeddings) is its own bucket and is reduced in
its own array, without a copy.  Each rank's gradient already is its share of the global mean
(npbert.distributed.loss), so the ranks' gradients are summed, not averaged.
"""
import hashlib

import numpy as np

from .world import DistributedError

# torch's DistributedDataParallel reduces in buckets of 25 MiB (bucket_cap_mb=25): large enough
# that each Allreduce runs at the network's bandwidth rather than its latency, small enough to
# cost little memory (one bucket's buffer per dtype).
DEFAULT_BUCKET_BYTES = 25 * 2 ** 20


def _array(p):
    """The NumPy array of a parameter: named_parameters() yields arrays, or parameter objects
    whose `.data` is the array (an ndarray's own `.data` is a memoryview: not that)."""
    return p if isinstance(p, np.ndarray) else np.asarray(p.data)


class GradientBuckets:
    """The fixed packing of one model's gradients into buckets.

    Args:
        named_shapes: [(name, shape)] in named_parameters() order: the gradients to reduce.
        dtype: the gradients' dtype (the model's).
        bucket_bytes: the most bytes one bucket holds (a larger single gradient is a bucket alone).

    `buckets` lists, for each bucket, its (name, start, stop, shape) entries: the gradient
    `name` occupies [start, stop) of the bucket's buffer."""

    def __init__(self, named_shapes, dtype, bucket_bytes=DEFAULT_BUCKET_BYTES):
        self.dtype = np.dtype(dtype)
        self.bucket_bytes = int(bucket_bytes)
        if self.bucket_bytes < self.dtype.itemsize:
            raise ValueError(f"bucket_bytes must hold at least one {self.dtype} value, got {bucket_bytes}")
        self.shapes = {name: tuple(shape) for name, shape in named_shapes}
        cap = self.bucket_bytes // self.dtype.itemsize          # values per bucket
        self.buckets, current, used = [], [], 0
        for name, shape in self.shapes.items():
            n = int(np.prod(shape, dtype=np.int64))
            if current and used + n > cap:
                self.buckets.append(current)
                current, used = [], 0
            current.append((name, used, used + n, shape))
            used += n
        if current:
            self.buckets.append(current)
        largest = max((b[-1][2] for b in self.buckets if len(b) > 1), default=0)
        self._buffer = np.empty(largest, dtype=self.dtype)         # reused by every packed bucket
        self.calls = 0                                             # Allreduce calls of the last allreduce_

    @classmethod
    def for_model(cls, model, bucket_bytes=DEFAULT_BUCKET_BYTES):
        """The buckets of `model`'s trainable parameters, in named_parameters() order."""
        named = [(name, _array(p).shape) for name, p in model.named_parameters() if model.is_trainable(name)]
        return cls(named, model.dtype, bucket_bytes)

    @property
    def nbytes(self):
        """Bytes every rank contributes to one all-reduce: every gradient once."""
        return sum(b[-1][2] for b in self.buckets) * self.dtype.itemsize

    def signature(self):
        """What every rank must have in common for the buckets to line up: names, shapes, dtype, cap."""
        return {"dtype": self.dtype.str, "bucket_bytes": self.bucket_bytes,
                "parameters": [[name, list(shape)] for name, shape in self.shapes.items()]}

    def zeros(self):
        """A gradient dict of zeros (a rank with no examples in this step adds nothing)."""
        return {name: np.zeros(shape, dtype=self.dtype) for name, shape in self.shapes.items()}

    def allreduce_(self, grads, world):
        """Replace every gradient in `grads` by its sum over the ranks, in place; returns grads."""
        missing = [n for n in self.shapes if n not in grads]
        extra = [n for n in grads if n not in self.shapes]
        if missing or extra:
            raise KeyError(f"allreduce_gradients: the gradients do not match the model's trainable parameters "
                           f"(missing {missing[:4]}, unexpected {extra[:4]}); was a parameter frozen or unfrozen "
                           f"on one rank only?")
        for name, shape in self.shapes.items():
            g = grads[name]
            if not isinstance(g, np.ndarray) or g.shape != shape or g.dtype != self.dtype:
                raise ValueError(f"allreduce_gradients: {name} is {getattr(g, 'dtype', type(g).__name__)}"
                                 f"{list(np.shape(g))}, the buckets were made for {self.dtype}{list(shape)}")
        self.calls = 0
        if world.world_size == 1:
            return grads
        for bucket in self.buckets:
            if len(bucket) == 1 and grads[bucket[0][0]].flags.c_contiguous and grads[bucket[0][0]].flags.writeable:
                world.allreduce_(grads[bucket[0][0]])              # a bucket of its own: reduced where it is
            else:
                buffer = self._buffer[:bucket[-1][2]]
                for name, start, stop, _ in bucket:                # pack
                    buffer[start:stop] = grads[name].reshape(-1)
                world.allreduce_(buffer)
                for name, start, stop, shape in bucket:            # unpack, into the dict's own arrays
                    if grads[name].flags.writeable:
                        grads[name][...] = buffer[start:stop].reshape(shape)
                    else:
                        grads[name] = buffer[start:stop].reshape(shape).copy()
            self.calls += 1
        return grads


def allreduce_gradients(grads, model, world, bucket_bytes=DEFAULT_BUCKET_BYTES):
    """Sum `grads` (the dict model.backward() returned, or None for a rank that had no example
    this step) over the ranks, in place, in buckets of `bucket_bytes`; returns the dict.

    The buckets are planned on the first call for a model (and again if its trainable
    parameters change) and checked to be the same on every rank; then each step costs one
    Allreduce per bucket.  On one process the dict is checked and returned as it is."""
    key = (id(model), bucket_bytes, tuple((n, _array(p).shape, _array(p).dtype.str)
                                           for n, p in model.named_parameters() if model.is_trainable(n)))
    cache = world.gradient_buckets
    buckets = cache.get(key)
    if buckets is None:
        buckets = GradientBuckets.for_model(model, bucket_bytes)
        world.check_same({"gradient buckets": buckets.signature()}, what="the gradients to all-reduce")
        cache.clear()
        cache[key] = buckets
    if grads is None:
        grads = buckets.zeros()
    return buckets.allreduce_(grads, world)


def broadcast_parameters(model, world, root=0):
    """Overwrite every parameter of `model` with rank `root`'s, in place (the arrays the
    optimizer holds stay the same objects).  The ranks first check that their models have the
    same parameter names, shapes and dtype, so that a different config on one rank is an error
    naming it rather than a hang or a silent mix.  Also copies root's dropout generator state
    (model.state.rng), so that every rank's random stream starts where root's does.  On one
    process there is nothing to do."""
    if world.world_size == 1:
        return
    named = [(name, _array(p)) for name, p in model.named_parameters()]
    world.check_same({"parameters": [[name, list(a.shape), a.dtype.str] for name, a in named]},
                     what="the model's parameters")
    for name, a in named:
        if not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError(f"broadcast_parameters: {name} is not a writeable contiguous array")
        world.broadcast_(a, root)
    rng = getattr(getattr(model, "state", None), "rng", None)
    if rng is not None:
        rng.bit_generator.state = world.broadcast_object(rng.bit_generator.state, root)


def check_same_parameters(model, world):
    """Raise DistributedError on every rank unless every rank's parameters are bit-identical
    (a SHA-256 per parameter), naming the parameters that differ.  Costs one pass over the
    parameters: worth running before a checkpoint is written from rank 0's copy."""
    if world.world_size == 1:
        return
    digests = {name: hashlib.sha256(np.ascontiguousarray(_array(p)).tobytes()).hexdigest()
               for name, p in model.named_parameters()}
    everyone = world.all_gather_object(digests)
    differ = [name for name in digests if any(d.get(name) != digests[name] for d in everyone)]
    if differ:
        raise DistributedError(f"the ranks' parameters have drifted apart: {len(differ)} of {len(digests)} differ "
                               f"(first: {differ[:3]}); the ranks no longer train one model")
