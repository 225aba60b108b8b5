"""Checkpoint readers and writers, NumPy and h5py only.

Entry points:

- `read_state_dict(path)`: any supported weights file or checkpoint
  directory -> ``{transformers_name: np.ndarray}`` in torch layout.
- `detect_format(path)`: which format ``read_state_dict`` would read.
- `match_state_dict(checkpoint, expected)`: checkpoint keys -> a model's
  parameter names (prefix, gamma/beta, tied decoder...).
- `write_safetensors`, `write_npbert_h5`: atomic writers.

Every reader raises `CheckpointError` (a ValueError) on bad input, naming the
file and the key or offset at fault.  See docs/checkpoint_formats.md.
"""
import json
import os

from npbert.io.atomic_dir import finish_interrupted_saves
from npbert.io.errors import CheckpointError, RunError, SaveError
from npbert.io.keras_h5 import read_keras_h5
from npbert.io.manifest import verify_manifest, write_manifest
from npbert.io.names import MatchResult, match_state_dict
from npbert.io.npbert_h5 import is_npbert_h5, read_npbert_h5, read_npbert_h5_config, write_npbert_h5
from npbert.io.safetensors import read_safetensors, write_safetensors
from npbert.io.tf_checkpoint import read_tf_checkpoint
from npbert.io.torch_pickle import read_torch_checkpoint

__all__ = [
    "CheckpointError", "RunError", "SaveError", "MatchResult", "detect_format", "finish_interrupted_saves",
    "verify_manifest", "write_manifest", "find_weights_file", "match_state_dict",
    "read_npbert_h5_config", "read_safetensors", "read_state_dict", "write_npbert_h5",
    "write_safetensors",
]

# Formats, as `detect_format` names them.
SAFETENSORS = "safetensors"
SAFETENSORS_SHARDED = "safetensors-sharded"
TORCH_ZIP = "pytorch-zip"
TORCH_LEGACY = "pytorch-legacy"
TORCH_SHARDED = "pytorch-sharded"
KERAS_H5 = "keras-h5"
TF_CHECKPOINT = "tf-checkpoint"
NPBERT_H5 = "npbert-h5"

# Directory look-up order, transformers' own priority first, then Google's
# release layout, then npbert's.
_DIRECTORY_FILES = [
    ("model.safetensors", SAFETENSORS),
    ("model.safetensors.index.json", SAFETENSORS_SHARDED),
    ("pytorch_model.bin", None),
    ("pytorch_model.bin.index.json", TORCH_SHARDED),
    ("tf_model.h5", KERAS_H5),
    ("bert_model.ckpt.index", TF_CHECKPOINT),
    ("model.ckpt.index", TF_CHECKPOINT),
    ("model.h5", None),
    ("npbert_model.h5", NPBERT_H5),
]

_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_ZIP_SIGNATURE = b"PK\x03\x04"


def find_weights_file(path, from_tf=False):
    """The weights file ``read_state_dict`` would use for ``path``.

    For a directory, the first of model.safetensors, model.safetensors.index.json,
    pytorch_model.bin, pytorch_model.bin.index.json, tf_model.h5,
    bert_model.ckpt.index, model.ckpt.index, model.h5, npbert_model.h5 that
    exists; with ``from_tf=True`` (transformers' keyword), the first TensorFlow one
    (tf_model.h5, bert_model.ckpt.index, model.ckpt.index), and an error if there is
    none.  For a TF checkpoint given by prefix (``.../bert_model.ckpt``), the
    ``.index`` file.  Otherwise ``path`` itself.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        names = [(n, f) for n, f in _DIRECTORY_FILES if not from_tf or f in (KERAS_H5, TF_CHECKPOINT)]
        for name, _ in names:
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return candidate
        raise CheckpointError(
            f"{path}: no {'TensorFlow ' if from_tf else ''}weights file found (looked for "
            + ", ".join(n for n, _ in names) + ")" + (" (from_tf=True)" if from_tf else ""))
    if not os.path.exists(path) and os.path.isfile(path + ".index"):
        path = path + ".index"
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such file or directory")
    if from_tf and detect_format(path) not in (KERAS_H5, TF_CHECKPOINT):
        raise CheckpointError(f"{path}: from_tf=True, but this is a {detect_format(path)} file, not a TensorFlow "
                              "checkpoint (bert_model.ckpt.index or tf_model.h5); leave from_tf out to read it")
    return path


def _sniff_file(path):
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e}") from e
    if path.endswith(".index.json"):
        return SAFETENSORS_SHARDED if ".safetensors" in os.path.basename(path) else TORCH_SHARDED
    if head.startswith(_ZIP_SIGNATURE):
        return TORCH_ZIP
    if head.startswith(_HDF5_SIGNATURE) or _has_hdf5_userblock(path):
        return NPBERT_H5 if is_npbert_h5(path) else KERAS_H5
    if len(head) >= 9 and head[8:9] == b"{":
        return SAFETENSORS
    if head[:1] == b"\x80" and len(head) >= 2 and head[1] <= 5:
        return TORCH_LEGACY
    if path.endswith(".index"):
        return TF_CHECKPOINT
    raise CheckpointError(f"{path}: unknown checkpoint format (first bytes {head[:8]!r})")


def _has_hdf5_userblock(path):
    # HDF5 may sit after a user block of 512, 1024, 2048... bytes.
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = 512
            while offset + 8 <= size and offset <= 1 << 20:
                f.seek(offset)
                if f.read(8) == _HDF5_SIGNATURE:
                    return True
                offset *= 2
    except OSError:
        pass
    return False


def detect_format(path):
    """Name the format of a weights file or checkpoint directory.

    One of ``"safetensors"``, ``"safetensors-sharded"``, ``"pytorch-zip"``,
    ``"pytorch-legacy"``, ``"pytorch-sharded"``, ``"keras-h5"``,
    ``"tf-checkpoint"``, ``"npbert-h5"``.  Content decides, not the file name
    (except for the TF checkpoint index, which has no magic number of its own
    at the start).
    """
    return _sniff_file(find_weights_file(path))


def read_state_dict(path):
    """Read a checkpoint into ``{name: np.ndarray}``.

    ``path`` is a weights file, a TF checkpoint prefix, or a directory (see
    `find_weights_file` for the order).  Tensors come back in torch layout
    keyed by transformers' PyTorch names; for the TF formats the names are
    mapped and kernels transposed as transformers' converters do, and
    optimizer slots are dropped.  Other formats keep their keys as stored
    (prefix, gamma/beta... are `match_state_dict`'s business).
    """
    file = find_weights_file(path)
    fmt = _sniff_file(file)
    if fmt == SAFETENSORS:
        return read_safetensors(file)
    if fmt in (SAFETENSORS_SHARDED, TORCH_SHARDED):
        return _read_sharded(file)
    if fmt in (TORCH_ZIP, TORCH_LEGACY):
        return read_torch_checkpoint(file)
    if fmt == KERAS_H5:
        return read_keras_h5(file)
    if fmt == TF_CHECKPOINT:
        return read_tf_checkpoint(file)
    if fmt == NPBERT_H5:
        return read_npbert_h5(file)
    raise CheckpointError(f"{file}: format {fmt} is not supported")  # pragma: no cover


def _read_sharded(index_file):
    """transformers' sharded checkpoints: an index JSON whose ``weight_map``
    maps each tensor name to the shard file holding it."""
    try:
        with open(index_file, encoding="utf-8") as f:
            index = json.load(f)
        weight_map = index["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("weight_map is not an object")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{index_file}: bad shard index: {e}") from e
    directory = os.path.dirname(index_file)
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        if not isinstance(shard, str) or os.path.basename(shard) != shard:
            raise CheckpointError(f"{index_file}: shard name {shard!r} is not a plain file name")
        part = read_state_dict(os.path.join(directory, shard))
        for name, array in part.items():
            if weight_map.get(name) == shard:
                tensors[name] = array
    absent = sorted(set(weight_map) - set(tensors))
    if absent:
        raise CheckpointError(f"{index_file}: tensor {absent[0]!r} is listed in the index "
                              f"but not found in shard {weight_map[absent[0]]!r}")
    return tensors

