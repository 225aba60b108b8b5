"""safetensors, read and written with NumPy alone.

File layout (all integers little-endian)::

    [0, 8)          N: u64, the byte length of the JSON header
    [8, 8 + N)      the JSON header, UTF-8, possibly padded with spaces
    [8 + N, end)    the data section: raw tensor bytes, back to back

The header maps each tensor name to ``{"dtype": "F32", "shape": [768, 768],
"data_offsets": [begin, end]}``, offsets counted from the start of the data
section, plus an optional ``"__metadata__"`` dict of string -> string.  Tensor
bytes are C-contiguous, little-endian.  A valid file's byte ranges tile the
data section exactly: sorted by ``begin``, each starts where the previous one
ended, the first at 0 and the last at the end of the file.

Reading memory-maps the file: every returned array is a read-only view into
the mapping (no copy), except BF16, which NumPy lacks and which we widen to
float32.
"""
import json
import mmap
import os

import numpy as np

from npbert.io._atomic import atomic_write
from npbert.io.errors import CheckpointError

# safetensors dtype string -> NumPy dtype (little-endian).  BF16 is read as
# raw uint16 and widened to float32 by `_bf16_to_float32`.
_DTYPES = {
    "BOOL": np.dtype("bool"),
    "U8": np.dtype("u1"),
    "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
}
# Known to safetensors but with no NumPy counterpart: named in the error.
_UNSUPPORTED_DTYPES = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2",
                       "F8_E4M3FNUZ", "F8_E5M2FNUZ"}
# NumPy dtype kind+itemsize -> safetensors dtype string, for writing.
_NAMES = {(dt.kind, dt.itemsize): name for name, dt in _DTYPES.items() if name != "BF16"}

_MAX_HEADER = 100 * 1024 * 1024  # the reference implementation's limit


def _bf16_to_float32(raw):
    """bfloat16 is the top half of a float32: shift the 16 bits up.  uint16 -> float32."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _no_duplicate_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise CheckpointError(f"duplicate key {key!r} in the JSON header")
        seen[key] = value
    return seen


def read_safetensors_header(path):
    """Parse and fully validate the header.

    Returns ``(header_len, entries, metadata)`` where ``entries`` is a list of
    ``(name, dtype_string, shape_tuple, begin, end)`` sorted by ``begin``.
    Raises CheckpointError naming the file and the tensor/offset at fault.
    """
    path = os.fspath(path)
    try:
        file_size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: file is {file_size} bytes, shorter than "
                                      "the 8-byte header length")
            n = int.from_bytes(head, "little")
            if n > _MAX_HEADER:
                raise CheckpointError(f"{path}: header length {n} at offset 0 exceeds the "
                                      f"{_MAX_HEADER}-byte limit")
            if 8 + n > file_size:
                raise CheckpointError(f"{path}: header length {n} at offset 0 runs past the "
                                      f"end of the file ({file_size} bytes): truncated?")
            raw = f.read(n)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e}") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: header is not UTF-8 (byte {8 + e.start})") from e
    if not text.startswith("{"):
        raise CheckpointError(f"{path}: header does not start with '{{' (offset 8)")
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except CheckpointError as e:
        raise CheckpointError(f"{path}: {e}") from None
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: header is not valid JSON: {e}") from e
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")

    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise CheckpointError(f"{path}: __metadata__ must map strings to strings")

    data_size = file_size - 8 - n
    entries = []
    for name, info in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{where}: entry must have exactly dtype, shape, data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            if dtype in _UNSUPPORTED_DTYPES:
                raise CheckpointError(f"{where}: dtype {dtype} has no NumPy equivalent")
            raise CheckpointError(f"{where}: unknown dtype {dtype!r}")
        if (not isinstance(shape, list)
                or not all(type(d) is int and d >= 0 for d in shape)):
            raise CheckpointError(f"{where}: shape {shape!r} is not a list of "
                                  "non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int and o >= 0 for o in offsets)):
            raise CheckpointError(f"{where}: data_offsets {offsets!r} is not "
                                  "[begin, end] with non-negative integers")
        begin, end = offsets
        if end < begin:
            raise CheckpointError(f"{where}: data_offsets [{begin}, {end}] end before begin")
        if end > data_size:
            raise CheckpointError(f"{where}: data_offsets [{begin}, {end}] run past the "
                                  f"end of the data section ({data_size} bytes; file "
                                  f"offset {8 + n + end} > {file_size})")
        nbytes = int(np.prod(shape, dtype=object)) * _DTYPES[dtype].itemsize
        if nbytes != end - begin:
            raise CheckpointError(f"{where}: {dtype} {tuple(shape)} needs {nbytes} bytes "
                                  f"but data_offsets [{begin}, {end}] hold {end - begin}")
        entries.append((name, dtype, tuple(shape), begin, end))

    entries.sort(key=lambda e: (e[3], e[4]))
    position = 0
    for name, _, _, begin, end in entries:
        if begin < position:
            raise CheckpointError(f"{path}: tensor {name!r}: data_offsets [{begin}, {end}] "
                                  f"overlap the previous tensor (which ends at {position})")
        if begin > position:
            raise CheckpointError(f"{path}: tensor {name!r}: data_offsets [{begin}, {end}] "
                                  f"leave a gap of unclaimed bytes [{position}, {begin})")
        position = end
    if position != data_size:
        raise CheckpointError(f"{path}: tensors end at data offset {position} but the data "
                              f"section is {data_size} bytes (trailing bytes at file offset "
                              f"{8 + n + position})")
    return n, entries, metadata


def read_safetensors(path):
    """Read a ``.safetensors`` file into ``{name: np.ndarray}``.

    Arrays are read-only views into a memory map of the file (BF16 tensors
    are widened to new float32 arrays).  Names are returned as stored.
    """
    path = os.fspath(path)
    n, entries, _ = read_safetensors_header(path)
    data_start = 8 + n
    tensors = {}
    if not entries:
        return tensors
    with open(path, "rb") as f:
        try:
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{path}: cannot memory-map: {e}") from e
    # The arrays keep `mapping` alive through their `.base`; the file
    # descriptor itself is no longer needed.
    if len(mapping) != os.path.getsize(path):
        raise CheckpointError(f"{path}: file changed size while being opened")
    for name, dtype, shape, begin, end in entries:
        count = (end - begin) // _DTYPES[dtype].itemsize
        array = np.frombuffer(mapping, dtype=_DTYPES[dtype], count=count,
                              offset=data_start + begin).reshape(shape)
        if dtype == "BF16":
            array = _bf16_to_float32(array)
        tensors[name] = array
    return tensors


def read_safetensors_metadata(path):
    """The ``__metadata__`` dict of a safetensors file (``{}`` if absent)."""
    return dict(read_safetensors_header(path)[2] or {})


def _dtype_name(name, array):
    dt = array.dtype
    key = (dt.kind, dt.itemsize)
    if key not in _NAMES:
        raise CheckpointError(f"tensor {name!r}: dtype {dt} cannot be stored in safetensors")
    return _NAMES[key]


def write_safetensors(path, tensors, metadata=None, progress=None):
    """Write ``{name: array}`` to ``path`` as safetensors, atomically.

    ``progress``, if given, is called as ``progress(bytes_written, total)``
    after each tensor (for command-line progress displays).

    ``metadata`` (string -> string) defaults to ``{"format": "pt"}``, which
    transformers' loader expects.  Tensors are laid out largest itemsize
    first (then by name) so every tensor is aligned to its itemsize, the
    header is padded with spaces to a multiple of 8, and the byte ranges tile
    the data section exactly, as the reference implementation writes them.
    """
    if metadata is None:
        metadata = {"format": "pt"}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise CheckpointError("safetensors metadata must map strings to strings")
    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise CheckpointError(f"invalid tensor name {name!r}")
        array = np.asarray(value)
        dtype_name = _dtype_name(name, array)
        # C order, little-endian: the only layout safetensors knows.
        arrays[name] = (dtype_name, np.asarray(array, dtype=_DTYPES[dtype_name], order="C"))

    order = sorted(arrays, key=lambda k: (-arrays[k][1].dtype.itemsize, k))
    header = {"__metadata__": dict(metadata)} if metadata else {}
    position = 0
    for name in order:
        dtype_name, array = arrays[name]
        header[name] = {"dtype": dtype_name, "shape": list(array.shape),
                        "data_offsets": [position, position + array.nbytes]}
        position += array.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)

    with atomic_write(path) as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        done = 0
        for name in order:
            array = arrays[name][1]
            if array.nbytes:
                f.write(array.reshape(-1).view(np.uint8))
            done += array.nbytes
            if progress is not None:
                progress(done, position)
