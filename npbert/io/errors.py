"""The one exception every checkpoint reader raises on bad input."""


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, inconsistent or unsafe.

    The message names the file and, where there is one, the key or byte
    offset at fault, e.g.::

        CheckpointError: model.safetensors: tensor 'bert.pooler.dense.bias':
        data_offsets [100, 4000] end past the data section (3072 bytes)
    """
