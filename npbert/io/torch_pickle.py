"""``pytorch_model.bin`` without torch, and without running the file's code.

torch writes a state dict in one of two layouts (see
docs/checkpoint_formats.md):

* **zip** (torch >= 1.6, the default): a zip archive with one top folder
  holding ``data.pkl`` (the pickled dict), ``data/<key>`` (one raw,
  uncompressed, 64-byte-aligned record per storage), ``byteorder``
  (``little``/``big``) and ``version``.  Nothing read from the archive can
  grow past what the file holds: a storage record must be stored
  uncompressed, its declared size equal to what the pickle declares and
  inside the file (it is memory-mapped, never copied); the small records
  (``data.pkl``, ``byteorder``) may be compressed, but their declared
  (uncompressed) size in the zip directory is bounded by deflate's largest
  ratio and by `MAX_RECORD_BYTES` (a state dict's pickle holds names and
  tensor records only: tens of KB for BERT), and they are inflated in chunks
  that stop at the declared size.  A zip bomb (a compressed storage, a
  ``data.pkl`` declaring hundreds of MB, a declared size beyond the entry's or
  below what the entry inflates to) is refused before it takes memory.
* **legacy**: five things back to back in one file: a pickled magic number,
  a pickled protocol version (1001), a pickled ``sys_info`` dict, the pickled
  dict, a pickled sorted list of storage keys, then for each key an int64
  element count followed by the storage's raw bytes.

In both, a tensor is pickled as a call
``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
requires_grad, backward_hooks[, metadata])`` whose ``storage`` argument is a
*persistent id* ``("storage", torch.FloatStorage, key, location, numel[,
view_metadata])``: the key names the bytes, the storage type their dtype.

The pickle itself is read by npbert/io/torch_unpickler.py, which never runs the
file's code.
"""
import io
import mmap
import os
import pickle
import struct
import zipfile
import zlib

import numpy as np

from npbert.io.errors import CheckpointError
from npbert.io.torch_unpickler import _TensorRef, _unpickle

# Bounds on the small zip records (data.pkl, byteorder) read into memory: deflate cannot
# compress better than about 1032:1, and a state dict's pickle holds only the tensors' names and
# rebuild records (~150 bytes a tensor: BERT-base's data.pkl is ~30 KB, BERT-large's ~60 KB), so
# 32 MiB is room for some 200,000 tensors while a bytes object of hundreds of MB is refused from
# its declared size, before it is inflated.
DEFLATE_MAX_RATIO = 1032
MAX_RECORD_BYTES = 32 << 20
READ_CHUNK_BYTES = 1 << 20           # a compressed record is inflated this much at a time

LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001

# What the stdlib raises on malformed pickles and zips (zipfile raises
# RuntimeError for an "encrypted" member, e.g. a flipped flag bit).
_READ_ERRORS = (pickle.UnpicklingError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError,
                ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
                struct.error, OSError, zlib.error, NotImplementedError, RecursionError,
                MemoryError, UnicodeError, RuntimeError)




# --- storages -> arrays --------------------------------------------------------

def _tensor_array(ref, storage_arrays, big_endian, name, source):
    """A _TensorRef -> np.ndarray view of its storage (checked in bounds)."""
    storage = ref.storage
    flat = storage_arrays[storage.key]
    if storage.view is not None:
        start, count = storage.view
        flat = flat[start:start + count]
    numel = flat.shape[0]
    size, stride, offset = ref.size, ref.stride, ref.offset
    count = int(np.prod(size, dtype=object))
    if count:
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= numel:
            raise CheckpointError(f"{source}: tensor {name!r}: size {size} stride {stride} "
                                  f"offset {offset} reaches element {last} of a storage of "
                                  f"{numel}")
    elif offset > numel:
        raise CheckpointError(f"{source}: tensor {name!r}: storage offset {offset} is past "
                              f"the end of its storage ({numel} elements)")
    itemsize = flat.dtype.itemsize
    contiguous_strides = tuple(int(np.prod(size[i + 1:], dtype=object)) for i in range(len(size)))
    if count == 0:
        array = np.zeros(size, dtype=flat.dtype)
    elif stride == contiguous_strides or count == 1:
        array = flat[offset:offset + count].reshape(size)
    else:
        array = np.lib.stride_tricks.as_strided(
            flat[offset:], shape=size, strides=tuple(s * itemsize for s in stride),
            writeable=False)
    if big_endian:
        array = array.astype(array.dtype.newbyteorder("="))
    if storage.storage_type.name == "BFloat16Storage":
        array = (array.astype(np.uint32) << 16).view(np.float32)
    return array


def _collect(obj, storage_arrays, big_endian, source):
    """The unpickled object -> {name: np.ndarray}; anything but a flat
    mapping of names to tensors is refused."""
    if not isinstance(obj, dict):
        raise CheckpointError(f"{source}: the pickle holds a {type(obj).__name__}, not a "
                              "state dict")
    tensors = {}
    for name, value in obj.items():
        if not isinstance(name, str):
            raise CheckpointError(f"{source}: state dict key {name!r} is not a string")
        if not isinstance(value, _TensorRef):
            raise CheckpointError(f"{source}: state dict entry {name!r} is a "
                                  f"{type(value).__name__}, not a tensor")
        tensors[name] = _tensor_array(value, storage_arrays, big_endian, name, source)
    return tensors


def _storage_dtype(ref, big_endian):
    dtype = ref.storage_type.dtype
    return dtype.newbyteorder(">") if big_endian else dtype


# --- the zip format ------------------------------------------------------------

def _zip_record_offset(mapping, info, source):
    """File offset of an uncompressed zip member's bytes (for memory mapping)."""
    at = info.header_offset
    if at + 30 > len(mapping) or mapping[at:at + 4] != b"PK\x03\x04":
        raise CheckpointError(f"{source}: zip member {info.filename!r}: no local header at "
                              f"offset {at}")
    name_len, extra_len = struct.unpack_from("<HH", mapping, at + 26)
    start = at + 30 + name_len + extra_len
    if start + info.file_size > len(mapping):
        raise CheckpointError(f"{source}: zip member {info.filename!r}: data [{start}, "
                              f"{start + info.file_size}) runs past the end of the file")
    return start


def _read_record(archive, name, path):
    """A small record's bytes.  Its declared (uncompressed) size in the zip directory is checked
    first, so a bomb is refused before anything is inflated; then it is inflated in chunks of
    READ_CHUNK_BYTES, which zipfile stops at the declared size (a record that inflates to more
    than it declares fails its CRC-32 check, having taken one chunk more, not its real size)."""
    info = archive.getinfo(name)
    stored = info.compress_type == zipfile.ZIP_STORED
    ratio_bound = MAX_RECORD_BYTES if stored else DEFLATE_MAX_RATIO * info.compress_size + 1024
    if info.file_size > min(MAX_RECORD_BYTES, ratio_bound) or (stored and info.file_size != info.compress_size):
        if stored and info.file_size != info.compress_size:
            why = "a stored record's two sizes must be equal"
        elif info.file_size > ratio_bound:
            why = f"deflate cannot inflate {info.compress_size} bytes to more than {ratio_bound}"
        else:
            why = (f"more than the {MAX_RECORD_BYTES >> 20} MiB a state dict's pickle could need: it holds tensor "
                   "names and records only, the tensors' bytes are in data/")
        raise CheckpointError(f"{path}: zip record {name!r} declares {info.file_size} bytes from "
                              f"{info.compress_size} stored ({why}): refused before reading it (a zip bomb?)")
    parts, total = [], 0
    with archive.open(info) as f:
        while True:
            chunk = f.read(READ_CHUNK_BYTES)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
    if total != info.file_size:
        raise CheckpointError(f"{path}: zip record {name!r} inflated to {total} bytes, its header declares "
                              f"{info.file_size}")
    return b"".join(parts)


def _read_zip(path):
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise CheckpointError(f"{path}: zip archive has no single <folder>/data.pkl "
                                  f"(found {pickles}); not a torch checkpoint")
        prefix = pickles[0][: -len("data.pkl")]
        big_endian = False
        if prefix + "byteorder" in names:
            order = _read_record(archive, prefix + "byteorder", path)
            if order not in (b"little", b"big"):
                raise CheckpointError(f"{path}: byteorder record says {order[:20]!r}")
            big_endian = order == b"big"
        obj, storages = _unpickle(io.BytesIO(_read_record(archive, pickles[0], path)), path)
        arrays = {}
        for key, ref in storages.items():
            member = prefix + "data/" + key
            try:
                info = archive.getinfo(member)
            except KeyError:
                raise CheckpointError(f"{path}: storage {key!r} has no record {member!r}") \
                    from None
            dtype = _storage_dtype(ref, big_endian)
            nbytes = ref.numel * dtype.itemsize
            if info.file_size != nbytes:
                raise CheckpointError(f"{path}: storage {key!r}: record {member!r} holds "
                                      f"{info.file_size} bytes, {ref.numel} x "
                                      f"{ref.storage_type.name} need {nbytes}")
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != nbytes:
                # torch never compresses a storage: a compressed one (or a stored one whose
                # sizes disagree) would make us decompress what the file does not hold
                raise CheckpointError(f"{path}: storage {key!r}: record {member!r} is compressed "
                                      f"({info.compress_size} bytes stored for {info.file_size} declared): torch "
                                      "writes storages uncompressed; refused (a zip bomb?)")
            start = _zip_record_offset(mapping, info, path)
            arrays[key] = np.frombuffer(mapping, dtype=dtype, count=ref.numel, offset=start)
    return _collect(obj, arrays, big_endian, path)


# --- the legacy format ---------------------------------------------------------

def _read_legacy(path):
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    # The mmap object is itself a file (read, readline, tell), and a read
    # past its end returns short instead of allocating what a corrupt length
    # field asks for.
    magic, _ = _unpickle(mapping, path, allow_storages=False)
    if magic != LEGACY_MAGIC_NUMBER:
        raise CheckpointError(f"{path}: not a torch checkpoint (bad magic number at offset 0)")
    protocol, _ = _unpickle(mapping, path, allow_storages=False)
    if protocol != LEGACY_PROTOCOL_VERSION:
        raise CheckpointError(f"{path}: unsupported legacy protocol version {protocol!r}")
    sys_info, _ = _unpickle(mapping, path, allow_storages=False)
    if not isinstance(sys_info, dict):
        raise CheckpointError(f"{path}: sys_info record is not a dict")
    # torch writes legacy storages (and their counts) little-endian whatever
    # the machine, so sys_info's `little_endian` is not needed.
    big_endian = False
    obj, storages = _unpickle(mapping, path)
    keys, _ = _unpickle(mapping, path, allow_storages=False)
    position = mapping.tell()
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) \
            or len(set(keys)) != len(keys):
        raise CheckpointError(f"{path}: storage key list is malformed")
    if set(keys) != set(storages):
        missing = sorted(set(storages) - set(keys)) or sorted(set(keys) - set(storages))
        raise CheckpointError(f"{path}: storage {missing[0]!r} is referenced but not stored "
                              "(or stored but never referenced)")
    arrays = {}
    for key in keys:
        ref = storages[key]
        dtype = _storage_dtype(ref, big_endian)
        if position + 8 > len(mapping):
            raise CheckpointError(f"{path}: storage {key!r}: element count at offset "
                                  f"{position} runs past the end of the file (truncated?)")
        count = int.from_bytes(mapping[position:position + 8], "little", signed=True)
        if count != ref.numel:
            raise CheckpointError(f"{path}: storage {key!r} at offset {position}: element count "
                                  f"{count} differs from the {ref.numel} the pickle declares")
        position += 8
        end = position + count * dtype.itemsize
        if end > len(mapping):
            raise CheckpointError(f"{path}: storage {key!r}: bytes [{position}, {end}) run "
                                  f"past the end of the file ({len(mapping)} bytes, truncated?)")
        arrays[key] = np.frombuffer(mapping, dtype=dtype, count=count, offset=position)
        position = end
    if position != len(mapping):
        raise CheckpointError(f"{path}: {len(mapping) - position} unexplained bytes after the "
                              f"last storage (offset {position})")
    return _collect(obj, arrays, big_endian, path)


def read_torch_checkpoint(path):
    """Read a torch-saved state dict (zip or legacy) into ``{name: np.ndarray}``.

    Arrays are read-only views of a memory map of the file where the layout
    allows (always for files torch wrote); BF16 is widened to float32.
    Raises CheckpointError on a bad, truncated or hostile file, naming the
    refused global or the storage/offset at fault.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        if os.path.getsize(path) == 0:
            raise CheckpointError(f"{path}: empty file")
        if head == b"PK\x03\x04":
            return _read_zip(path)
        return _read_legacy(path)
    except CheckpointError:
        raise
    except _READ_ERRORS as e:
        raise CheckpointError(f"{path}: not a readable torch checkpoint: "
                              f"{type(e).__name__}: {e}") from e
