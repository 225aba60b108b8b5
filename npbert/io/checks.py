"""Checks a loader makes on what it read, before a model uses it.

    check_finite(tensors, source)                 every float tensor finite: a flipped exponent
                                                  bit (a weight of -5.95e35) or a nan is named
    check_layer_count(keys, num_hidden_layers, source, config_source)
                                                  the checkpoint's encoder.layer.<i> indices against
                                                  the config's num_hidden_layers, both ways
    check_no_interrupted_save(directory)          a save_pretrained caught while moving its files in
    check_saved_weights(directory, weights_file)  the weights file against the folder's manifest.json

Each raises CheckpointError naming the file and what disagrees.
"""
import os
import re

import numpy as np

from npbert.io.atomic_dir import interrupted_saves
from npbert.io.errors import CheckpointError
from npbert.io.manifest import MANIFEST, verify_manifest

_LAYER_RE = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")


def check_finite(tensors, source, what="tensor"):
    """Raise CheckpointError naming the first tensor of `tensors` ({name: array}) that holds a
    nan or an infinity, with how many and the first position."""
    for name, array in tensors.items():
        array = np.asarray(array)
        if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.complexfloating):
            continue
        if array.size and not np.isfinite(array).all():
            bad = ~np.isfinite(array)
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise CheckpointError(f"{source}: {what} {name!r} holds {int(bad.sum())} non-finite value(s) (the first "
                                  f"at {first}: {array[first].item()!r}); the file is corrupt or the run that wrote it "
                                  "diverged")


def layer_indices(keys):
    """The sorted set of i in `...encoder.layer.<i>....` among `keys`."""
    return sorted({int(m.group(1)) for k in keys for m in [_LAYER_RE.search(k)] if m})


def check_layer_count(keys, num_hidden_layers, source, config_source="the config"):
    """The checkpoint (its tensor names `keys`) must hold exactly layers 0..num_hidden_layers-1:
    a config saying 5 layers over a 6-layer checkpoint would silently drop the last one."""
    found = layer_indices(keys)
    if not found:
        return
    if found != list(range(len(found))):
        missing = sorted(set(range(max(found) + 1)) - set(found))
        raise CheckpointError(f"{source}: the encoder layers are not numbered 0..{max(found)} (missing "
                              f"encoder.layer.{missing[0]})")
    if len(found) != num_hidden_layers:
        raise CheckpointError(f"{source} holds {len(found)} encoder layers (encoder.layer.0..{len(found) - 1}), but "
                              f"{config_source} says num_hidden_layers={num_hidden_layers}: loading would "
                              f"{'drop' if len(found) > num_hidden_layers else 'leave random'} "
                              f"{abs(len(found) - num_hidden_layers)} layer(s); fix num_hidden_layers")


def check_no_interrupted_save(directory):
    """Refuse a directory where a save was interrupted while moving its files in (its weights
    and config may come from two different saves)."""
    pending = interrupted_saves(directory)
    if pending:
        raise CheckpointError(f"{directory}: a save into it was interrupted while moving its files in ({pending[0]} "
                              "holds the rest): its files may come from two different saves. Finish it with "
                              f"npbert.io.finish_interrupted_saves({directory!r}) (any npbert training run into "
                              "this directory does it first)")


def check_saved_weights(directory, weights_file):
    """The weights file against `directory`'s manifest.json when there is one (save_pretrained
    and the Trainer's checkpoints write it): a flipped bit, or two tensors' names swapped in the
    header, changes the SHA-256, which no check on the values can see.  No manifest: nothing
    to check (a folder from transformers or an older npbert)."""
    try:
        verify_manifest(directory, required=False, names={os.path.basename(weights_file)})
    except CheckpointError as e:
        raise CheckpointError(f"{e}. If you rewrote it on purpose, delete {os.path.join(directory, MANIFEST)} (or "
                              "save the model again with save_pretrained)") from None


def check_loaded(tensors, config, source, config_source="the config"):
    """What from_pretrained checks on a checkpoint it read, before building the model: the
    encoder layers match config.num_hidden_layers, every weight is finite."""
    check_layer_count(tensors.keys(), config.num_hidden_layers, source, config_source)
    check_finite(tensors, source, "weight")
