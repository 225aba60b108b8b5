"""training_curves.png: the training loss (and every evaluation metric) against the step,
drawn from trainer_state.log_history.  matplotlib is optional (`pip install npbert[plot]`):
without it nothing is drawn and the caller says how to get the picture.  (The attention picture,
attention.png, is with the other pictures of a model: npbert/interpret/attention_picture.py.)"""
import os

from npbert.io._atomic import atomic_path


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401  (optional: the plot extra)
    except ImportError:
        return False
    return True


# What the Trainer logs as "loss" is the mean training loss of the steps since the previous
# log entry (transformers' convention), not the loss of one step: the legend says so.
TRAIN_LOSS_LABEL = "training loss (mean over the steps since the last log)"


def _series(log_history, key):
    """[(step, value)] of `key` in the log entries that have both."""
    return [(e["step"], e[key]) for e in log_history if isinstance(e.get(key), (int, float)) and "step" in e]


def _default_panels(log_history):
    metrics = sorted({k for e in log_history for k, v in e.items() if k.startswith("eval_") and k != "eval_loss"
                      and isinstance(v, (int, float)) and not k.endswith(("_runtime", "_per_second"))})
    panels = [("loss", ["loss", "eval_loss"], [])]
    if metrics:
        panels.append(("metric", metrics, []))
    return panels


def plot_training_curves(log_history, path, title=None, panels=None, labels=None):
    """Write the curves to `path` (PNG, atomically); returns path, or None without matplotlib
    or without anything to draw.

    panels: [(y-axis label, [log keys], [(y, label), ...] baselines drawn as dashed lines[, (ymin,
    ymax)])], one panel each; by default the training and evaluation loss, then every other
    eval_ metric.
    labels: {log key: legend text} (default: the key; "loss" is TRAIN_LOSS_LABEL)."""
    if not have_matplotlib():
        return None
    import matplotlib                # optional (the plot extra): loaded when a picture is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [tuple(p) + (None,) * (4 - len(p)) for p in (panels or _default_panels(log_history))]
    panels = [p for p in panels if any(_series(log_history, k) for k in p[1])]
    if not panels:
        return None
    names = {"loss": TRAIN_LOSS_LABEL, **(labels or {})}
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, (ylabel, keys, lines, ylim) in zip(axes[0], panels):
        for k in keys:
            points = _series(log_history, k)
            if points:
                ax.plot(*zip(*points), "-" if k == "loss" else "o-", label=names.get(k, k), markersize=3)
        for y, text in lines:
            ax.axhline(y, linestyle="--", color="gray", linewidth=1)
            ax.annotate(text, (0.01, y), xycoords=("axes fraction", "data"), fontsize=7, color="dimgray",
                        va="bottom")
        if ylim:
            ax.set_ylim(*ylim)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path
