"""The progress line of a training run, on stderr:

    step 120/500 | epoch 0.96 | loss 2.3141 | lr 4.8e-05 | grad norm 1.02 | 3.41 steps/s | ETA 1m51s

On a terminal it is rewritten in place (carriage return) after every step; otherwise (a log
file, CI) one line is printed every `logging_steps` steps, so logs stay readable.
"""
import sys
import time


def format_duration(seconds):
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class ProgressLine:
    def __init__(self, total_steps, start_step=0, stream=None, every=1, enabled=True):
        self.total, self.stream, self.every, self.enabled = total_steps, stream or sys.stderr, max(1, int(every)), enabled
        self.start_step, self.t0 = start_step, time.perf_counter()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_len = 0

    def update(self, step, epoch, loss=None, lr=None, grad_norm=None, extra=""):
        if not self.enabled or (not self.tty and step % self.every and step != self.total):
            return
        elapsed = time.perf_counter() - self.t0
        done = step - self.start_step
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - step) / rate if rate > 0 else float("nan")
        parts = [f"step {step}/{self.total}", f"epoch {epoch:.2f}"]
        if loss is not None:
            parts.append(f"loss {loss:.4f}")
        if lr is not None:
            parts.append(f"lr {lr:.3g}")
        if grad_norm is not None:
            parts.append(f"grad norm {grad_norm:.3g}")
        parts.append(f"{rate:.2f} steps/s")
        parts.append(f"ETA {format_duration(eta) if eta == eta else '?'}")
        if extra:
            parts.append(extra)
        line = " | ".join(parts)
        if self.tty:
            pad = max(0, self._last_len - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def message(self, text):
        """A line of its own (an evaluation result, a checkpoint saved), not overwritten."""
        if not self.enabled:
            return
        if self.tty and self._last_len:
            self.stream.write("\n")
            self._last_len = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self):
        if self.enabled and self.tty and self._last_len:
            self.stream.write("\n")
            self.stream.flush()
            self._last_len = 0


class SilentProgress:
    """The progress line of ranks > 0 of a data-parallel run: rank 0 alone prints."""

    def update(self, *args, **kwargs):
        pass

    def message(self, text):
        pass

    def close(self):
        pass
