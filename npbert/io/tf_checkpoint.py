"""Google's original BERT checkpoints (``bert_model.ckpt``), without TensorFlow.

A TF "V2" checkpoint is a tensor bundle: ``<prefix>.index`` says where each
tensor is, ``<prefix>.data-00000-of-00001`` (one file per shard) holds the
raw bytes back to back.

The index is an SSTable, LevelDB's immutable sorted-table format::

    [data block]*  [metaindex block]  [index block]  [footer: 48 bytes]

* footer: two BlockHandles (metaindex, index), each two varints
  ``(offset, size)``, zero-padded to 40 bytes, then the 8-byte magic
  ``0xdb4775248b80fb57`` (little-endian).
* block: entries, then ``num_restarts`` uint32 restart offsets, then the
  uint32 ``num_restarts``; followed in the file by a 5-byte trailer: one
  compression-type byte (0 = none, 1 = snappy) and a masked CRC32C.
* entry: varint ``shared``, varint ``non_shared``, varint ``value_length``,
  then ``non_shared`` key bytes (appended to the first ``shared`` bytes of
  the previous key: prefix compression) and the value.
* the index block maps a separator key to the BlockHandle of each data block.

In the data blocks, the key ``""`` holds a ``BundleHeaderProto``
(num_shards, endianness) and every other key is a tensor name whose value
is a ``BundleEntryProto``: dtype (1), shape (2), shard_id (3), offset (4),
size (5), crc32c (6), slices (7).  We decode those protobufs by hand: a
field is a varint key ``(field_number << 3) | wire_type`` followed by a
varint (type 0), 8 bytes (1), a length-prefixed blob (2) or 4 bytes (5).

Tensors are C-order, little-endian; Dense kernels are (in, out), which the
name mapping transposes to torch's (out, in).
"""
import json
import mmap
import os

import numpy as np

from npbert.io.errors import CheckpointError
from npbert.io.names import google_to_hf

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5

# tensorflow DataType enum -> NumPy dtype.  BFLOAT16 is widened to float32.
TF_DTYPES = {
    1: np.dtype("<f4"),    # DT_FLOAT
    2: np.dtype("<f8"),    # DT_DOUBLE
    3: np.dtype("<i4"),    # DT_INT32
    4: np.dtype("u1"),     # DT_UINT8
    5: np.dtype("<i2"),    # DT_INT16
    6: np.dtype("i1"),     # DT_INT8
    8: np.dtype("<c8"),    # DT_COMPLEX64
    9: np.dtype("<i8"),    # DT_INT64
    10: np.dtype("bool"),  # DT_BOOL
    14: np.dtype("<u2"),   # DT_BFLOAT16 (raw bits)
    17: np.dtype("<u2"),   # DT_UINT16
    18: np.dtype("<c16"),  # DT_COMPLEX128
    19: np.dtype("<f2"),   # DT_HALF
    22: np.dtype("<u4"),   # DT_UINT32
    23: np.dtype("<u8"),   # DT_UINT64
}
DT_BFLOAT16 = 14
DT_STRING = 7


# --- CRC32C (Castagnoli), for the index blocks --------------------------------

def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def unmask_crc(masked):
    """LevelDB stores ``rotate_right(crc, 15) + 0xa282ead8``; undo it."""
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# --- protobuf wire format ---------------------------------------------------------

class _Corrupt(Exception):
    """Internal: a structural problem, re-raised as CheckpointError with context."""


def read_varint(buf, pos, end=None):
    """Decode a base-128 varint at ``buf[pos]``; returns ``(value, new_pos)``."""
    end = len(buf) if end is None else end
    value = shift = 0
    while True:
        if pos >= end:
            raise _Corrupt(f"varint runs past the end (offset {pos})")
        if shift > 63:
            raise _Corrupt(f"varint longer than 10 bytes (offset {pos})")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def parse_protobuf(buf):
    """A protobuf message -> ``{field_number: [values]}``.

    Varints come back as ints, fixed32/fixed64 as ints, length-delimited
    fields as bytes (sub-messages are parsed by the caller).
    """
    fields = {}
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos, end)
        elif wire == 1:
            if pos + 8 > end:
                raise _Corrupt("fixed64 runs past the end")
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise _Corrupt(f"length-delimited field {number} runs past the end")
            value, pos = bytes(buf[pos:pos + length]), pos + length
        elif wire == 5:
            if pos + 4 > end:
                raise _Corrupt("fixed32 runs past the end")
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise _Corrupt(f"unsupported protobuf wire type {wire} (field {number})")
        fields.setdefault(number, []).append(value)
    return fields


def _signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _int_field(fields, number, default=0):
    """The last value of a varint/fixed field, checked to be an int."""
    value = fields.get(number, [default])[-1]
    if not isinstance(value, int):
        raise _Corrupt(f"protobuf field {number} has the wrong wire type")
    return value


def _message_field(fields, number):
    """The values of a sub-message field, checked to be bytes."""
    values = fields.get(number, [])
    if not all(isinstance(v, bytes) for v in values):
        raise _Corrupt(f"protobuf field {number} has the wrong wire type")
    return values


def _parse_entry(value):
    """BundleEntryProto -> dict(dtype, shape, shard_id, offset, size, crc32c, sliced)."""
    f = parse_protobuf(value)
    shape = []
    shapes = _message_field(f, 2)
    if shapes:
        shape_proto = parse_protobuf(shapes[-1])
        if _int_field(shape_proto, 3):
            raise _Corrupt("tensor shape has unknown rank")
        for dim in _message_field(shape_proto, 2):
            size = _signed64(_int_field(parse_protobuf(dim), 1))
            if size < 0:
                raise _Corrupt(f"tensor dimension {size} is negative")
            shape.append(size)
    return {
        "dtype": _int_field(f, 1),
        "shape": tuple(shape),
        "shard_id": _int_field(f, 3),
        "offset": _signed64(_int_field(f, 4)),
        "size": _signed64(_int_field(f, 5)),
        "crc32c": f.get(6, [None])[-1],
        "sliced": 7 in f,
    }


# --- SSTable -----------------------------------------------------------------------

def _read_block(index, offset, size, what):
    """The contents of a block, with its trailer checked."""
    if offset + size + BLOCK_TRAILER_SIZE > len(index):
        raise _Corrupt(f"{what} block [{offset}, {offset + size}) runs past the end")
    contents = index[offset:offset + size]
    compression = index[offset + size]
    if compression == 1:
        raise _Corrupt(f"{what} block at offset {offset} is snappy-compressed, which "
                       "npbert does not decode (re-save the checkpoint uncompressed)")
    if compression != 0:
        raise _Corrupt(f"{what} block at offset {offset} has unknown compression "
                       f"type {compression}")
    stored = int.from_bytes(index[offset + size + 1:offset + size + 5], "little")
    actual = crc32c(index[offset:offset + size + 1])   # contents + type byte
    if unmask_crc(stored) != actual:
        raise _Corrupt(f"{what} block at offset {offset} fails its CRC32C check")
    return contents


def _block_entries(block, what):
    """Yield ``(key, value)`` of a block, undoing the prefix compression."""
    if len(block) < 4:
        raise _Corrupt(f"{what} block is shorter than its restart count")
    num_restarts = int.from_bytes(block[-4:], "little")
    limit = len(block) - 4 - 4 * num_restarts
    if limit < 0:
        raise _Corrupt(f"{what} block claims {num_restarts} restarts, more than fit")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = read_varint(block, pos, limit)
        non_shared, pos = read_varint(block, pos, limit)
        value_len, pos = read_varint(block, pos, limit)
        if shared > len(key) or pos + non_shared + value_len > limit:
            raise _Corrupt(f"{what} block entry at offset {pos} is inconsistent")
        key = key[:shared] + bytes(block[pos:pos + non_shared])
        pos += non_shared
        yield key, bytes(block[pos:pos + value_len])
        pos += value_len


def read_sstable(index):
    """All ``(key, value)`` pairs of an SSTable held in ``index`` (bytes-like)."""
    if len(index) < FOOTER_SIZE:
        raise _Corrupt(f"file is {len(index)} bytes, shorter than the 48-byte footer")
    footer = index[len(index) - FOOTER_SIZE:]
    magic = int.from_bytes(footer[40:48], "little")
    if magic != TABLE_MAGIC:
        raise _Corrupt(f"bad table magic number {magic:#x} at offset {len(index) - 8}")
    pos = 0
    _meta_offset, pos = read_varint(footer, pos, 40)
    _meta_size, pos = read_varint(footer, pos, 40)
    index_offset, pos = read_varint(footer, pos, 40)
    index_size, pos = read_varint(footer, pos, 40)
    entries = []
    seen = set()
    for _, handle in _block_entries(_read_block(index, index_offset, index_size, "index"),
                                    "index"):
        offset, p = read_varint(handle, 0)
        size, _ = read_varint(handle, p)
        if (offset, size) in seen:
            raise _Corrupt(f"index lists the data block at offset {offset} twice")
        seen.add((offset, size))
        for key, value in _block_entries(_read_block(index, offset, size, "data"), "data"):
            entries.append((key, value))
    return entries


# --- the bundle ------------------------------------------------------------------

def checkpoint_prefix(path):
    """``.../bert_model.ckpt.index`` or ``.../bert_model.ckpt`` -> the prefix."""
    path = os.fspath(path)
    return path[: -len(".index")] if path.endswith(".index") else path


def read_tf_checkpoint_raw(path):
    """Every tensor of a TF V2 checkpoint, keyed by its TF variable name, in
    TF layout (no renaming, no transposition, optimizer slots included).
    Arrays are read-only views of memory-mapped data files."""
    prefix = checkpoint_prefix(path)
    index_path = prefix + ".index"
    try:
        with open(index_path, "rb") as f:
            index = f.read()
    except OSError as e:
        raise CheckpointError(f"{index_path}: cannot read: {e}") from e
    try:
        entries = read_sstable(index)
    except _Corrupt as e:
        raise CheckpointError(f"{index_path}: {e}") from None

    num_shards, big_endian = 1, False
    tensors_meta = {}
    previous = None
    for key, value in entries:
        if previous is not None and key <= previous:
            raise CheckpointError(f"{index_path}: keys out of order at {key!r}")
        previous = key
        try:
            if key == b"":
                header = parse_protobuf(value)
                num_shards = _int_field(header, 1, 1)
                big_endian = _int_field(header, 2) == 1
                continue
            name = key.decode("utf-8")
            tensors_meta[name] = _parse_entry(value)
        except (_Corrupt, UnicodeDecodeError) as e:
            raise CheckpointError(f"{index_path}: entry {key!r}: {e}") from None
    if previous is None:
        raise CheckpointError(f"{index_path}: the index holds no entries")
    if big_endian:
        raise CheckpointError(f"{index_path}: big-endian bundles are not supported")
    if not 1 <= num_shards <= 100000:
        raise CheckpointError(f"{index_path}: implausible shard count {num_shards}")

    shards = {}
    tensors = {}
    for name, meta in tensors_meta.items():
        where = f"{index_path}: tensor {name!r}"
        if meta["sliced"]:
            raise CheckpointError(f"{where}: partitioned (sliced) variables are not supported")
        dtype = TF_DTYPES.get(meta["dtype"])
        if dtype is None:
            if google_to_hf(name) is None:
                continue   # e.g. a string-typed optimizer record we would skip anyway
            raise CheckpointError(f"{where}: unsupported TF dtype enum {meta['dtype']}")
        shard = meta["shard_id"]
        if not 0 <= shard < num_shards:
            raise CheckpointError(f"{where}: shard id {shard} outside 0..{num_shards - 1}")
        if shard not in shards:
            data_path = f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"
            try:
                with open(data_path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    shards[shard] = (data_path, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                                     if size else b"")
            except (OSError, ValueError) as e:
                raise CheckpointError(f"{where}: cannot open data file {data_path}: {e}") from e
        data_path, data = shards[shard]
        count = int(np.prod(meta["shape"], dtype=object))
        nbytes = count * dtype.itemsize
        offset, size = meta["offset"], meta["size"]
        if size != nbytes:
            raise CheckpointError(f"{where}: shape {meta['shape']} needs {nbytes} bytes but the "
                                  f"entry says {size}")
        if offset < 0 or offset + size > len(data):
            raise CheckpointError(f"{where}: bytes [{offset}, {offset + size}) run past the end "
                                  f"of {data_path} ({len(data)} bytes)")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=offset) if count else \
            np.zeros(0, dtype=dtype)
        array = array.reshape(meta["shape"])
        if meta["dtype"] == DT_BFLOAT16:
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array
    return tensors


def read_tf_checkpoint(path):
    """A Google BERT checkpoint -> ``{transformers_name: np.ndarray}``, torch layout.

    Names are mapped as transformers' ``load_tf_weights_in_bert`` maps them
    (`npbert.io.names.google_to_hf`); Dense kernels are transposed; Adam
    slots and ``global_step`` are dropped.  Transposed kernels are
    materialised C-contiguous (a copy); everything else stays memory-mapped.
    """
    raw = read_tf_checkpoint_raw(path)
    tensors = {}
    for name, array in raw.items():
        mapped = google_to_hf(name)
        if mapped is None:
            continue
        hf_name, transpose = mapped
        if hf_name in tensors:
            raise CheckpointError(f"{checkpoint_prefix(path)}.index: two variables map to "
                                  f"{hf_name!r} (one is {name!r})")
        tensors[hf_name] = np.ascontiguousarray(array.T) if transpose else array
    return tensors


def read_bert_config(path):
    """``bert_config.json`` next to a checkpoint, as a dict (or None)."""
    config_path = os.path.join(os.path.dirname(checkpoint_prefix(path)), "bert_config.json")
    if not os.path.isfile(config_path):
        return None
    try:
        with open(config_path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{config_path}: {e}") from e

