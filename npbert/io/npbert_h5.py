"""(Not yet implemented.)"""
from npbert.io.errors import CheckpointError


def is_npbert_h5(path):
    return False


def read_npbert_h5(path):
    raise CheckpointError(f"{path}: npbert .h5 is not yet supported")


def read_npbert_h5_config(path):
    raise CheckpointError(f"{path}: npbert .h5 is not yet supported")


def write_npbert_h5(path, tensors, config_dict):
    raise CheckpointError(f"{path}: npbert .h5 is not yet supported")
