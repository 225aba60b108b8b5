"""The exceptions npbert's readers, writers and training runs raise on bad input or a bad state.

Each message names what is at fault (file, key, byte offset, line, field, step) and, where
there is one, what to do, so that a command can print it on one line without a traceback.
"""


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, inconsistent or unsafe.

    The message names the file and, where there is one, the key or byte
    offset at fault, e.g.::

        CheckpointError: model.safetensors: tensor 'bert.pooler.dense.bias':
        data_offsets [100, 4000] end past the data section (3072 bytes)
    """


class RunError(RuntimeError):
    """A training run cannot start or go on: its output directory is used by another run or
    holds another run's checkpoints, resuming would change the run's arguments, a save failed
    (a full disk), ...  The message names the directory, file, step or flag, e.g.::

        RunError: out/: another run (pid 4242 on host1, `npbert finetune ...`, since
        2024-05-01 12:00:03) holds the lock out/.npbert-run.lock
    """


class SaveError(RunError, OSError):
    """A save that failed (a full disk, a read-only directory): an OSError whose message names
    the file being written and the training step, and says what is still intact.  `errno` and
    `filename` are those of the underlying OSError."""

    def __init__(self, message, errno=None, filename=None):
        super().__init__(message)
        self.errno, self.filename = errno, filename

    def __str__(self):
        return self.args[0]
