"""(Not yet implemented.)"""
from npbert.io.errors import CheckpointError


def read_tf_checkpoint(path):
    raise CheckpointError(f"{path}: this format is not yet supported by npbert")
