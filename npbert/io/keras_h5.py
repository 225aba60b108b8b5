"""``tf_model.h5`` as transformers' TF classes save it (Keras 2 HDF5 weights).

Layout (what ``model.save_weights(..., save_format="h5")`` writes)::

    /                       attrs: layer_names = [b"bert", b"mlm___cls", ...],
                                   backend, keras_version
    /bert                   attrs: weight_names = [b"tf_bert_for_pre_training/bert/
                                   embeddings/word_embeddings/weight:0", ...]
    /bert/tf_bert_for_pre_training/bert/embeddings/word_embeddings/weight:0
                            the dataset, float32, TF layout

Each top-level layer is a group whose ``weight_names`` attribute lists its
weights in order; a weight's dataset sits in that group under its full
Keras name.  Dense kernels are ``(in, out)``.  Names are mapped to
transformers' PyTorch names by `npbert.io.names.keras_to_hf`, which follows
transformers' TF->PT conversion rules.
"""
import os

import numpy as np

from npbert.io._h5util import dataset_array, open_h5, read_h5
from npbert.io.errors import CheckpointError
from npbert.io.names import keras_to_hf


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def read_keras_h5_raw(path):
    """``{keras_weight_name: array}`` in TF layout, in file order."""
    return read_h5(path, _read_keras_h5_raw)


def _read_keras_h5_raw(path):
    tensors = {}
    with open_h5(path) as f:
        if "layer_names" in f.attrs:
            for layer in f.attrs["layer_names"]:
                layer = _text(layer)
                if layer not in f:
                    raise CheckpointError(f"{path}: layer {layer!r} listed in layer_names has "
                                          "no group")
                group = f[layer]
                for weight in group.attrs.get("weight_names", []):
                    weight = _text(weight)
                    if weight not in group:
                        raise CheckpointError(f"{path}: weight {weight!r} of layer {layer!r} "
                                              "has no dataset")
                    array = dataset_array(path, group[weight], weight)
                    if weight in tensors:
                        # A tied weight (the word embeddings, reused by the
                        # MLM head) is saved once per layer that uses it.
                        if not np.array_equal(tensors[weight], array):
                            raise CheckpointError(f"{path}: weight {weight!r} is stored twice "
                                                  "with different values")
                        continue
                    tensors[weight] = array
        else:
            raise CheckpointError(f"{path}: HDF5 file without Keras 'layer_names' attribute: "
                                  "not a Keras weights file")
    return tensors


def read_keras_h5(path):
    """``tf_model.h5`` -> ``{transformers_name: np.ndarray}`` in torch layout."""
    path = os.fspath(path)
    tensors = {}
    for name, array in read_keras_h5_raw(path).items():
        hf_name, transpose = keras_to_hf(name)
        if hf_name in tensors:
            raise CheckpointError(f"{path}: two weights map to {hf_name!r} (one is {name!r})")
        tensors[hf_name] = np.ascontiguousarray(array.T) if transpose else array
    return tensors
