"""Pictures of attributions: token heatmaps (a standalone HTML page, or a PNG), a relevance map
(rollout, flow), the head-importance grid and the pruning curve.

The HTML page needs nothing but this module: inline styles, no script, no font or image from the
network.  The PNGs need matplotlib (`pip install npbert[plot]`), imported only when one is drawn;
without it they raise ImportError saying so.  Every file is written atomically.

Colours: a token's background is green for a positive score and red for a negative one, its
strength |score| / max |score| over the row (as captum's visualization does).
"""
import html
import os

import numpy as np

from npbert.io._atomic import atomic_path, atomic_write


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("drawing a PNG needs matplotlib: pip install matplotlib (or pip install npbert[plot]); "
                          "an .html page needs nothing") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _rows(tokens, scores):
    """[(label, tokens, scores (T,))]: one row, or one per entry of a dict {label: scores}."""
    items = scores.items() if isinstance(scores, dict) else [("", scores)]
    rows = []
    for label, s in items:
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        if len(s) != len(tokens):
            raise ValueError(f"{len(tokens)} tokens but {len(s)} scores" + (f" for {label!r}" if label else ""))
        rows.append((label, list(tokens), s))
    return rows


def _colour(value, scale):
    """An rgba background: green for positive, red for negative, alpha |value| / scale."""
    alpha = 0.0 if scale == 0 else min(1.0, abs(value) / scale)
    rgb = "40,160,60" if value >= 0 else "210,50,50"
    return f"rgba({rgb},{alpha:.3f})"


def token_heatmap_html(tokens, scores, path=None, title="", notes=()):
    """A standalone HTML page: each token on a background coloured by its score, the score in its
    tooltip.  scores: (T,), or {label: (T,)} for several rows (methods, targets).  `notes`: lines
    printed under the title (the target, the convergence delta).  Returns the HTML; writes it to
    `path` when given."""
    parts = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
             f"<title>{html.escape(title or 'attributions')}</title>",
             "<style>body{font-family:sans-serif;margin:2em;line-height:2.2em}"
             ".tok{padding:0.15em 0.3em;margin:0 0.1em;border-radius:0.2em;white-space:pre}"
             ".label{color:#555;font-size:0.9em;margin-right:1em}.note{color:#555;font-size:0.9em;line-height:1.4em}"
             "</style></head><body>"]
    if title:
        parts.append(f"<h2>{html.escape(title)}</h2>")
    for note in notes:
        parts.append(f"<div class=\"note\">{html.escape(note)}</div>")
    for label, toks, s in _rows(tokens, scores):
        scale = float(np.abs(s).max())
        line = [f"<span class=\"label\">{html.escape(label)}</span>"] if label else []
        for tok, v in zip(toks, s):
            line.append(f"<span class=\"tok\" style=\"background:{_colour(v, scale)}\" "
                        f"title=\"{v:.6g}\">{html.escape(tok)}</span>")
        parts.append("<div>" + "".join(line) + "</div>")
    parts.append("<div class=\"note\">green: raises the target, red: lowers it; "
                 "hover a token for its score</div></body></html>")
    page = "\n".join(parts)
    if path is not None:
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        with atomic_write(path, "w") as f:
            f.write(page)
    return page


def token_heatmap_png(tokens, scores, path, title=""):
    """The same as a PNG: one row of coloured cells per score row, the tokens under them."""
    plt = _pyplot()
    rows = _rows(tokens, scores)
    T = len(tokens)
    fig, axes = plt.subplots(len(rows), 1, figsize=(max(6.0, 0.55 * T + 1.5), 1.3 * len(rows) + 0.8), squeeze=False)
    for ax, (label, toks, s) in zip(axes[:, 0], rows):
        scale = float(np.abs(s).max()) or 1.0
        ax.imshow(s[None, :] / scale, cmap="RdYlGn", vmin=-1, vmax=1, aspect="auto")
        ax.set_xticks(range(T))
        ax.set_xticklabels(toks, rotation=60, ha="right", fontsize=8)
        ax.set_yticks([0])
        ax.set_yticklabels([label], fontsize=8)
        for t, v in enumerate(s):
            ax.text(t, 0, f"{v:.2g}", ha="center", va="center", fontsize=6)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, plt, path)


def relevance_map_png(relevance, tokens, path, title=""):
    """A (T, T) relevance map (rollout, flow, grad rollout of one example): row i, output token i,
    over the input tokens (columns)."""
    plt = _pyplot()
    relevance = np.asarray(relevance)
    T = len(tokens)
    if relevance.shape != (T, T):
        raise ValueError(f"the relevance map has shape {relevance.shape}, {T} tokens need ({T}, {T})")
    fig, ax = plt.subplots(figsize=(0.35 * T + 3, 0.35 * T + 2.5))
    im = ax.imshow(relevance, cmap="viridis")
    ax.set_xticks(range(T))
    ax.set_yticks(range(T))
    ax.set_xticklabels(tokens, rotation=90, fontsize=8)
    ax.set_yticklabels(tokens, fontsize=8)
    ax.set_xlabel("input token")
    ax.set_ylabel("output token")
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title(title, fontsize=10)
    return _save(fig, plt, path)


def head_importance_png(importance, path, title="head importance"):
    """The (L, N) grid, layers down, heads across, each cell annotated."""
    plt = _pyplot()
    a = np.asarray(importance)
    L, N = a.shape
    fig, ax = plt.subplots(figsize=(0.6 * N + 2, 0.5 * L + 1.5))
    im = ax.imshow(a, cmap="viridis", aspect="auto")
    for i in range(L):
        for j in range(N):
            ax.text(j, i, f"{a[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if a[i, j] < (a.max() + a.min()) / 2 else "black")
    ax.set_xticks(range(N))
    ax.set_yticks(range(L))
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    fig.colorbar(im, ax=ax)
    ax.set_title(title, fontsize=10)
    return _save(fig, plt, path)


def pruning_curve_png(curve, path, title="pruning heads by importance"):
    """The loss (and accuracy) against the number of heads masked, least important first."""
    plt = _pyplot()
    panels = 1 + (curve.accuracy is not None)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.6), squeeze=False)
    axes[0][0].plot(curve.masked, curve.loss, "o-")
    axes[0][0].set_ylabel("loss")
    if curve.accuracy is not None:
        axes[0][1].plot(curve.masked, curve.accuracy, "o-", color="tab:green")
        axes[0][1].set_ylabel("accuracy")
    for ax in axes[0]:
        ax.set_xlabel("heads masked")
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return _save(fig, plt, path)


def _save(fig, plt, path):
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return path
