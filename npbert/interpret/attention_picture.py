"""attention.png: the attention probabilities of one sequence, drawn so that they can be read.

    L = layers, N = heads, T = tokens

A grid of L x N maps (layer a row, head a column, labelled once at the left and the top, so
that no title runs into another), or one head large; every map on one colour scale, 0 to 1, with
a colour bar that says so; row = the query token, column = the key token it attends to.  Token
names are written on the axes when they can be read (in one head's picture always; in the grid
along the left column and the bottom row, when the cells leave room for them).

Chinese, Japanese and Korean tokens need a font that has their glyphs; DejaVu Sans (matplotlib's
default) has none, and they would come out as boxes.  `cjk_font()` looks for one among the
installed fonts (matplotlib.font_manager), and the picture uses it as a fallback after DejaVu
Sans; when there is none, a warning says so and how to install one.  matplotlib is optional
(`pip install npbert[plot]`).
"""
import os
import warnings

from npbert.io._atomic import atomic_path

_CJK_RANGES = ((0x3000, 0x303F), (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF),
               (0xF900, 0xFAFF), (0xFF00, 0xFFEF))
_NOT_GLYPHS = ("Last Resort",)           # fonts that map every character to a placeholder box
_found = {}


def has_cjk(texts):
    return any(any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES) for t in texts for ch in t)


def _has_glyph(path, char="中"):
    from matplotlib.ft2font import FT2Font        # optional (the plot extra), as every matplotlib import here
    try:
        return FT2Font(path).get_char_index(ord(char)) != 0
    except (OSError, RuntimeError, ValueError):
        return False


def cjk_font():
    """The family name of an installed font with CJK glyphs, or None.  Looks at matplotlib's
    font list, then at the system's font files (a font installed after matplotlib built its
    cache is added to it)."""
    if "name" in _found:
        return _found["name"]
    import matplotlib.font_manager as fm
    name = None
    seen = set()
    for f in fm.fontManager.ttflist:
        seen.add(f.fname)
        if not f.name.startswith(_NOT_GLYPHS) and _has_glyph(f.fname):
            name = f.name
            break
    if name is None:
        for path in sorted(fm.findSystemFonts()):
            if path in seen or not _has_glyph(path):
                continue
            try:
                fm.fontManager.addfont(path)
                candidate = fm.FontProperties(fname=path).get_name()
            except (OSError, RuntimeError, ValueError):
                continue
            if not candidate.startswith(_NOT_GLYPHS):
                name = candidate
                break
    _found["name"] = name
    return name


def font_families(texts):
    """matplotlib's font.family for `texts`: DejaVu Sans, then a CJK font when the texts need
    one (a warning when none is installed)."""
    families = ["DejaVu Sans"]
    if has_cjk(texts):
        name = cjk_font()
        if name:
            families.append(name)
        else:
            warnings.warn("the text has Chinese/Japanese/Korean characters but no installed font has their glyphs: "
                          "they are drawn as boxes. Install one (e.g. `apt install fonts-noto-cjk` or "
                          "fonts-wqy-microhei) and run again", stacklevel=3)
    return families


def plot_attention(attentions, tokens, path, title="", layer=None, head=None):
    """The attention probabilities of one sequence as a PNG: a layers x heads grid, or one head
    large when `layer` and `head` are given.  attentions: L arrays (1, N, T, T) (a model's
    output.attentions); tokens: the T token strings.  Returns path, or None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    L, N, T = len(attentions), attentions[0].shape[1], attentions[0].shape[-1]
    single = layer is not None
    cells = [(layer, head)] if single else [(l, h) for l in range(L) for h in range(N)]
    rows, cols = (1, 1) if single else (L, N)
    cell = max(4.5, 0.28 * T) if single else min(2.4, max(1.3, 16.0 / max(N, 1)))     # inches
    pitch = 72.0 * cell / max(T, 1)                                 # points between two token rows
    font = 9 if single else min(7.0, 0.85 * pitch)
    label_tokens = single or font >= 4.5                            # smaller would not be readable
    with matplotlib.rc_context({"font.family": font_families(list(tokens) + [title])}):
        fig, axes = plt.subplots(rows, cols, figsize=(cell * cols + 1.6, cell * rows + 1.4), squeeze=False,
                                 layout="constrained")
        image = None
        for (l, h), ax in zip(cells, axes.reshape(-1)):
            image = ax.imshow(attentions[l][0, h], cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_xticks(range(T))
            ax.set_yticks(range(T))
            if label_tokens:                # in the grid: on the left column and the bottom row only
                ax.set_xticklabels(tokens if single or l == L - 1 else [], rotation=90, fontsize=font)
                ax.set_yticklabels(tokens if single or h == 0 else [], fontsize=font)
            else:
                ax.set_xticklabels([])
                ax.set_yticklabels([])
                ax.tick_params(length=0)
            if single:
                ax.set_title(f"layer {l}, head {h}", fontsize=11)
                ax.set_xlabel("key (attended to)", fontsize=9)
                ax.set_ylabel("query (attending)", fontsize=9)
            else:
                if l == 0:
                    ax.set_title(f"head {h}", fontsize=9)
                if h == 0:
                    ax.set_ylabel(f"layer {l}", fontsize=9)
                if not label_tokens:
                    ax.set_xticks([])
                    ax.set_yticks([])
        bar = fig.colorbar(image, ax=axes, shrink=0.6 if single else 0.35, pad=0.02)
        bar.set_label("attention probability", fontsize=9)
        heading = "attention probabilities: row = query token, column = key token it attends to"
        if not single and not label_tokens:
            heading += f"\n({T} tokens: names on the axes of one head with --layer L --head H)"
        shown = title if len(title) <= 90 else title[:87] + "..."
        fig.suptitle(f"{heading}\n{shown}" if shown else heading, fontsize=10)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)
    return path
