"""The unpickler of ``pytorch_model.bin``: a state dict's pickle read without running the
file's code (npbert/io/torch_pickle.py reads the two file layouts around it).

Pickle can call any importable function, so ``pickle.load`` on an untrusted
file runs arbitrary code.  `_RestrictedUnpickler` resolves every global the
file names through a fixed table of our own stand-in callables; anything
else (``os.system``, ``builtins.eval``, ``subprocess.Popen``...) is refused
by name before it is imported, let alone called.  The stand-ins do not build
tensors: they return inert records, checked and turned into NumPy views of
the memory-mapped storages only after the pickle is fully read.
"""
import collections
import pickle
import pickletools

import numpy as np

from npbert.io.errors import CheckpointError

# torch storage class name -> NumPy dtype of its elements (little-endian;
# swapped for big-endian files).  BFloat16 is read as uint16 and widened.
STORAGE_DTYPES = {
    "DoubleStorage": np.dtype("<f8"),
    "FloatStorage": np.dtype("<f4"),
    "HalfStorage": np.dtype("<f2"),
    "BFloat16Storage": np.dtype("<u2"),
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("bool"),
    "ComplexFloatStorage": np.dtype("<c8"),
    "ComplexDoubleStorage": np.dtype("<c16"),
    "UntypedStorage": np.dtype("u1"),
}


# --- inert stand-ins for the globals a state dict pickle names ---------------

class _Inert:
    """Base of the stand-ins: no attributes can be set on them by BUILD."""
    __slots__ = ()

    def __setstate__(self, state):
        raise pickle.UnpicklingError(f"refusing to set state on {type(self).__name__}")

    def __reduce__(self):  # never pickled back out
        raise TypeError("not picklable")


class _StorageType(_Inert):
    """Stands for ``torch.FloatStorage`` and friends: a dtype, nothing else."""
    __slots__ = ("name", "dtype")

    def __init__(self, name):
        self.name, self.dtype = name, STORAGE_DTYPES[name]


class _TensorClass(_Inert):
    """Stands for ``torch.Tensor`` / ``torch.nn.Parameter`` in
    ``_rebuild_from_type_v2``: a marker, never instantiated."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _StorageRef(_Inert):
    """A persistent id, checked: which bytes, which dtype, how many elements,
    and for legacy views the element range inside the root storage."""
    __slots__ = ("key", "storage_type", "numel", "view")

    def __init__(self, key, storage_type, numel, view=None):
        self.key, self.storage_type, self.numel, self.view = key, storage_type, numel, view


class _TensorRef(_Inert):
    """What ``_rebuild_tensor_v2`` would build: a strided view of a storage."""
    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


def _is_int(x):
    return type(x) is int


def _int_tuple(x, what):
    if not isinstance(x, tuple) or not all(_is_int(d) and d >= 0 for d in x):
        raise pickle.UnpicklingError(f"tensor {what} {x!r} is not a tuple of non-negative ints")
    return x


def _rebuild_tensor(storage, storage_offset, size, stride):
    if not isinstance(storage, _StorageRef):
        raise pickle.UnpicklingError(f"tensor storage is {type(storage).__name__}, "
                                     "not a storage reference")
    if not _is_int(storage_offset) or storage_offset < 0:
        raise pickle.UnpicklingError(f"tensor storage_offset {storage_offset!r} is invalid")
    size, stride = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    if len(size) != len(stride):
        raise pickle.UnpicklingError(f"tensor size {size} and stride {stride} differ in length")
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    # requires_grad, hooks and metadata mean nothing to an inference array.
    return _rebuild_tensor(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    if not isinstance(data, _TensorRef):
        raise pickle.UnpicklingError("Parameter data is not a tensor")
    return data


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return _rebuild_parameter(data)


_REBUILDERS = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_parameter,
               _rebuild_parameter_with_state)


def _rebuild_from_type_v2(func, new_type, args, state):
    # torch writes this for tensors carrying Python attributes: rebuild with
    # `func(*args)`, then re-type; the type can only be Tensor/Parameter here.
    if func not in _REBUILDERS or not isinstance(new_type, _TensorClass) \
            or not isinstance(args, tuple):
        raise pickle.UnpicklingError("_rebuild_from_type_v2 with unexpected arguments")
    return func(*args)


# (module, name) -> the object the unpickler gets instead of the real one.
ALLOWED_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch", "Tensor"): _TensorClass("Tensor"),
    ("torch._tensor", "Tensor"): _TensorClass("Tensor"),
    ("torch.nn.parameter", "Parameter"): _TensorClass("Parameter"),
}
for _name in STORAGE_DTYPES:
    ALLOWED_GLOBALS[("torch", _name)] = _StorageType(_name)
ALLOWED_GLOBALS[("torch.storage", "UntypedStorage")] = _StorageType("UntypedStorage")


class _RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler whose only reachable callables are `ALLOWED_GLOBALS`.

    Every opcode that reaches a global (GLOBAL, STACK_GLOBAL, INST, OBJ,
    EXT1/2/4) goes through ``find_class``; REDUCE/NEWOBJ can only call what
    is on the stack, and nothing callable gets there except through
    ``find_class``.  Persistent ids become checked `_StorageRef` records.
    """

    def __init__(self, file, source, allow_storages=True):
        super().__init__(file)
        self._source = source
        self._allow_storages = allow_storages
        self.storages = {}   # key -> _StorageRef of the root storage

    def find_class(self, module, name):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise CheckpointError(f"refusing to load global {module}.{name} from pickle "
                                  f"{self._source}: only tensor-rebuilding globals are "
                                  "allowed") from None

    def persistent_load(self, pid):
        if not self._allow_storages:
            raise pickle.UnpicklingError("unexpected persistent id")
        if not isinstance(pid, tuple) or len(pid) not in (5, 6):
            raise pickle.UnpicklingError(f"persistent id {pid!r} is not a storage id")
        kind = pid[0].decode("ascii") if isinstance(pid[0], bytes) else pid[0]
        if kind != "storage":
            raise pickle.UnpicklingError(f"persistent id of type {kind!r} is not a storage")
        storage_type, key, _location, numel = pid[1:5]
        view = pid[5] if len(pid) == 6 else None
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError("persistent id names no storage type")
        if not isinstance(key, str) or not _is_int(numel) or numel < 0:
            raise pickle.UnpicklingError(f"persistent id {pid[2:5]!r} is malformed")
        root = self.storages.get(key)
        if root is None:
            root = self.storages[key] = _StorageRef(key, storage_type, numel)
        elif root.storage_type.dtype != storage_type.dtype or root.numel != numel:
            raise pickle.UnpicklingError(f"storage {key!r} is referenced with two different "
                                         "dtypes or sizes")
        if view is None:
            return root
        if (not isinstance(view, tuple) or len(view) != 3 or not isinstance(view[0], str)
                or not all(_is_int(v) and v >= 0 for v in view[1:])
                or view[1] + view[2] > numel):
            raise pickle.UnpicklingError(f"storage view {view!r} is malformed or out of range")
        return _StorageRef(key, storage_type, view[2], view=(view[1], view[2]))


# Protocol-5 out-of-band buffer opcodes: torch never writes them (it pickles
# with protocol 2), and CPython's C unpickler mishandles some malformed uses
# of them (it prints a SystemError while cleaning up), so they are refused.
_REFUSED_OPCODES = {"BYTEARRAY8", "NEXT_BUFFER", "READONLY_BUFFER"}


def _check_opcodes(file, source):
    """Walk the pickle's opcodes without executing any (pickletools only
    decodes), refuse the out-of-band buffer ones, and rewind."""
    start = file.tell()
    try:
        for opcode, _, position in pickletools.genops(file):
            if opcode.name in _REFUSED_OPCODES:
                raise CheckpointError(f"{source}: pickle opcode {opcode.name} at offset "
                                      f"{position} is not used by torch checkpoints")
    finally:
        file.seek(start)


def _unpickle(file, source, allow_storages=True):
    _check_opcodes(file, source)
    unpickler = _RestrictedUnpickler(file, source, allow_storages)
    return unpickler.load(), unpickler.storages
