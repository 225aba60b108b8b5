"""training_curves.png: the training loss (and every evaluation metric) against the step,
drawn from trainer_state.log_history.  matplotlib is optional (`pip install npbert[plot]`):
without it nothing is drawn and the caller says how to get the picture."""
import os


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_training_curves(log_history, path, title=None):
    """Write the curves to `path` (PNG, atomically); returns path, or None without matplotlib
    or without anything to draw."""
    if not have_matplotlib():
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from npbert.io._atomic import atomic_path

    train = [(e["step"], e["loss"]) for e in log_history if "loss" in e and "step" in e]
    evals = {}
    for e in log_history:
        for k, v in e.items():
            if k.startswith("eval_") and isinstance(v, (int, float)) and not k.endswith(
                    ("_runtime", "_per_second")) and "step" in e:
                evals.setdefault(k, []).append((e["step"], v))
    if not train and not evals:
        return None
    panels = 1 + bool([k for k in evals if k != "eval_loss"])
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0][0]
    if train:
        ax.plot(*zip(*train), label="train loss")
    if "eval_loss" in evals:
        ax.plot(*zip(*evals["eval_loss"]), "o-", label="eval loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    ax.grid(alpha=0.3)
    if panels == 2:
        ax = axes[0][1]
        for k, points in evals.items():
            if k != "eval_loss":
                ax.plot(*zip(*points), "o-", label=k)
        ax.set_xlabel("step")
        ax.set_ylabel("metric")
        ax.legend()
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path


def plot_attention(attentions, tokens, path, title="", layer=None, head=None):
    """The attention picture: npbert/training/attention_picture.py (colour bar, labels that do
    not overlap, a CJK font when the tokens need one)."""
    from .attention_picture import plot_attention as draw
    return draw(attentions, tokens, path, title=title, layer=layer, head=head)
