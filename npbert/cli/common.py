"""What every `npbert` command shares: the error a user can fix, and argparse value types."""
import argparse


class CliError(Exception):
    """A problem the user can fix (a bad path, a bad option); printed without a traceback."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def non_negative_int(text):
    """argparse type: a non-negative integer (what np.random.default_rng accepts as a seed)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value
