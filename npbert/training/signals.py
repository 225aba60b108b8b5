"""SIGINT (Ctrl-C), SIGTERM and SIGUSR1 during training: stop at the end of the step, save, say how to resume.

    with StopOnSignal(announce) as stop:
        for step ...:
            ...
            if stop.requested:              # the signal number, or None
                save a checkpoint; raise TrainingInterrupted(...)

The first signal only sets `requested` (and calls `announce(message)`): the step in progress
finishes, the Trainer saves a checkpoint and raises TrainingInterrupted, whose message names
the step, the checkpoint and the command that resumes.  A second signal raises
TrainingInterrupted at once, wherever the loop is (a checkpoint being written is then left
out whole: its temporary directory is removed).  Handlers are installed only in the main
thread (Python delivers signals there) and restored on exit.

SIGUSR1 is there for runs under a launcher: Open MPI's mpiexec answers a SIGTERM or SIGINT by
killing every rank within a second (SIGTERM, then SIGKILL), too soon to finish a step and save,
but forwards SIGUSR1 to every rank and lets them end on their own; Slurm's `--signal=USR1@120`
sends it ahead of a time limit.  `kill -USR1 <mpiexec's pid>` therefore stops a data-parallel run
the way SIGTERM stops one process (docs/data_parallel.md).
"""
import signal
import threading

SIGNALS = ("SIGINT", "SIGTERM", "SIGUSR1")


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by SIGINT, SIGTERM or SIGUSR1.  `step`: the last completed step; `checkpoint`:
    the checkpoint to resume from (None if there is none); `signum`; `immediate`: True after a
    second signal (stopped mid-step, nothing saved for it).  `exit_status` is 128 + signum, the
    status a shell reports for a process killed by that signal."""

    def __init__(self, message, step=None, checkpoint=None, signum=signal.SIGINT, immediate=False):
        super().__init__(message)
        self.step, self.checkpoint, self.signum, self.immediate = step, checkpoint, int(signum), immediate

    @property
    def exit_status(self):
        return 128 + self.signum

    def __str__(self):
        return self.args[0]


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopOnSignal:
    """Context manager; see the module docstring.  `on_second(signum)` builds the exception
    raised by a second signal (a TrainingInterrupted)."""

    def __init__(self, announce=None, on_second=None):
        self.announce, self.on_second = announce, on_second
        self.requested = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for name in SIGNALS:
                signum = getattr(signal, name, None)
                if signum is not None:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def _handle(self, signum, frame):
        if self.requested is None:
            self.requested = signum
            if self.announce is not None:
                self.announce(f"{signal_name(signum)} received: stopping at the end of this step and saving a "
                              "checkpoint (press Ctrl-C again to stop at once)")
            return
        for s, previous in self._previous.items():       # a third signal gets the default behaviour
            signal.signal(s, previous)
        self._previous = {}
        if self.on_second is not None:
            raise self.on_second(signum)
        raise TrainingInterrupted(f"{signal_name(signum)}: stopped at once", signum=signum, immediate=True)


def how_to_resume(path, resume_command=None):
    """The command (the CLI's, "{checkpoint}" replaced) or the Python call that resumes from path."""
    if resume_command:
        return resume_command.format(checkpoint=path)
    return f"Trainer.train(resume_from_checkpoint={path!r})"


def stopped_after_step(signum, state, path, resume_command=None):
    """The TrainingInterrupted of a first signal: stopped after state.global_step, saved `path`."""
    step = state.global_step
    return TrainingInterrupted(f"{signal_name(signum)}: stopped after step {step} of {state.max_steps}; saved "
                               f"{path}; resume with: {how_to_resume(path, resume_command)}",
                               step=step, checkpoint=path, signum=signum)


def stopped_at_once(signum, state, path, resume_command=None):
    """The TrainingInterrupted of a second signal: nothing more saved; `path` is the last checkpoint
    this run saved or resumed from (whole: checkpoints are renamed into place only when complete)."""
    step = state.global_step
    if path is None:
        where = "no checkpoint was saved by this run"
    else:
        where = (f"the last checkpoint, {path}, is whole (checkpoints are renamed into place only when complete); "
                 f"resume with: {how_to_resume(path, resume_command)}")
    return TrainingInterrupted(f"{signal_name(signum)} again: stopped at once during step {step + 1}; {where}",
                               step=step, checkpoint=path, signum=signum, immediate=True)
