"""npbert's own HDF5 checkpoint.

Layout: one group per module, one dataset per parameter, mirroring the
transformers names, and the config as JSON in a root attribute::

    /                               attrs: npbert_format = 1, config = "{...}"
    /bert/encoder/layer/0/attention/self/query/weight     float32 (out, in)
    /cls/predictions/bias

Datasets are written contiguous and uncompressed, so reading memory-maps
them.  float32 and float64 are both kept as they are.
"""
import json
import os

import numpy as np

from npbert.io._atomic import atomic_path
from npbert.io._h5util import H5_ERRORS, dataset_array, open_h5, read_h5
from npbert.io.errors import CheckpointError

FORMAT_VERSION = 1


def is_npbert_h5(path):
    try:
        import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`
        with h5py.File(path, "r") as f:
            return "npbert_format" in f.attrs
    except H5_ERRORS:
        return False


def write_npbert_h5(path, tensors, config_dict, progress=None):
    """Write ``{name: array}`` and the config dict to ``path``, atomically.

    ``progress``, if given, is called as ``progress(bytes_written, total)``.
    """
    import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`
    config_json = json.dumps(config_dict if config_dict is not None else {}, sort_keys=True)
    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or not name or "/" in name or ".." in name \
                or name.startswith(".") or name.endswith("."):
            raise CheckpointError(f"{path}: tensor name {name!r} cannot become an HDF5 path")
        array = np.asarray(value)
        if array.dtype.kind not in "fiub":
            raise CheckpointError(f"{path}: tensor {name!r} has unsupported dtype {array.dtype}")
        arrays[name] = array
    total = sum(a.nbytes for a in arrays.values())
    done = 0
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.attrs["npbert_format"] = FORMAT_VERSION
            f.attrs["config"] = config_json
            for name, array in arrays.items():
                target = name.replace(".", "/")
                if target in f:
                    raise CheckpointError(f"{path}: tensor {name!r} clashes with another name")
                f.create_dataset(target, data=np.ascontiguousarray(array).astype(
                    array.dtype.newbyteorder("<"), copy=False))
                done += array.nbytes
                if progress is not None:
                    progress(done, total)


def read_npbert_h5(path):
    """``{name: np.ndarray}`` from an npbert ``.h5`` (memory-mapped)."""
    return read_h5(path, _read_npbert_h5)


def _read_npbert_h5(path):
    import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`
    tensors = {}
    with open_h5(path) as f:
        if "npbert_format" not in f.attrs:
            raise CheckpointError(f"{path}: not an npbert .h5 (no npbert_format attribute)")
        version = int(f.attrs["npbert_format"])
        if version != FORMAT_VERSION:
            raise CheckpointError(f"{path}: npbert .h5 format version {version} is not supported")

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                tensors[name.replace("/", ".")] = dataset_array(path, obj, name)
        f.visititems(visit)
    return tensors


def read_npbert_h5_config(path):
    """The config dict stored in an npbert ``.h5``."""
    path = os.fspath(path)

    def config_attribute(path):
        with open_h5(path) as f:
            if "config" not in f.attrs:
                raise CheckpointError(f"{path}: no config attribute (not an npbert .h5?)")
            return f.attrs["config"]
    raw = read_h5(path, config_attribute)
    try:
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except ValueError as e:
        raise CheckpointError(f"{path}: config attribute is not JSON: {e}") from e
