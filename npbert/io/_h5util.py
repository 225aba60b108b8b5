"""Shared h5py helpers: open with CheckpointError, map contiguous datasets."""
import os

import numpy as np

from npbert.io.errors import CheckpointError


def open_h5(path):
    import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot open as HDF5: {e}") from e


def dataset_array(path, dataset, name):
    """A dataset's contents: a read-only memory map when the dataset is stored
    contiguously and uncompressed (how h5py and Keras write weights), else a
    copy read by h5py."""
    import h5py      # required, but heavy: loaded when an HDF5 file is opened, not by `import npbert`
    if not isinstance(dataset, h5py.Dataset):
        raise CheckpointError(f"{path}: {name!r} is a {type(dataset).__name__}, not a dataset")
    dtype = dataset.dtype
    if dtype.kind not in "fiucb" or dataset.shape is None:
        raise CheckpointError(f"{path}: dataset {name!r} has unsupported type {dtype}")
    try:
        offset = dataset.id.get_offset() if dataset.chunks is None and not dataset.compression \
            else None
    except Exception:   # h5py raises assorted errors for virtual/external datasets
        offset = None
    count = int(np.prod(dataset.shape, dtype=object))
    if offset is not None and count and dataset.id.get_storage_size() == count * dtype.itemsize \
            and offset + count * dtype.itemsize <= os.path.getsize(path):
        return np.memmap(path, dtype=dtype, mode="r", offset=offset,
                         shape=dataset.shape).view(np.ndarray)
    try:
        return dataset[()] if dataset.shape == () else np.asarray(dataset)
    except (OSError, ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: cannot read dataset {name!r}: {e}") from e


# What h5py raises on damaged files, beyond OSError.
H5_ERRORS = (OSError, KeyError, ValueError, RuntimeError, TypeError, IndexError, AttributeError)


def read_h5(path, reader):
    """reader(path), with what h5py raises on a damaged file turned into a CheckpointError
    naming the file; a CheckpointError from the reader itself passes through unchanged."""
    path = os.fspath(path)
    try:
        return reader(path)
    except CheckpointError:
        raise
    except H5_ERRORS as e:
        raise CheckpointError(f"{path}: damaged HDF5 file: {type(e).__name__}: {e}") from e
