"""The pictures: what training_curves.png and the attention grid say (legend texts, baseline
lines, the colour bar), read from the matplotlib figure just before it is saved."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")

from npbert.interpret.attention_picture import plot_attention  # noqa: E402
from npbert.training.plots import TRAIN_LOSS_LABEL, plot_training_curves  # noqa: E402

LOG = [{"loss": 7.0, "step": 10}, {"loss": 6.0, "step": 20}, {"eval_loss": 6.5, "eval_acc": 0.1, "step": 20},
       {"loss": 5.5, "step": 30}, {"eval_loss": 5.9, "eval_acc": 0.2, "step": 30, "eval_runtime": 1.0},
       {"train_loss": 6.1, "train_runtime": 3.0, "step": 30}]


@pytest.fixture
def saved(monkeypatch):
    """The figures saved while the test runs: [(legend texts, other texts, number of axes)]."""
    import matplotlib.figure
    figures = []
    real = matplotlib.figure.Figure.savefig

    def savefig(fig, *args, **kwargs):
        legends = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        figures.append((legends, texts, fig.axes))
        return real(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return figures


def test_the_training_loss_is_labelled_as_the_mean_since_the_last_log(tmp_path, saved):
    assert "mean over the steps since the last log" in TRAIN_LOSS_LABEL
    path = plot_training_curves(LOG, str(tmp_path / "curves.png"))
    assert path and open(path, "rb").read(4) == b"\x89PNG"
    legends, _, axes = saved[0]
    assert TRAIN_LOSS_LABEL in legends and "eval_loss" in legends and "eval_acc" in legends
    assert "eval_runtime" not in legends and len(axes) == 2
    line = axes[0].get_lines()[0]                      # the training loss: the three logged means, in order
    assert list(line.get_xdata()) == [10, 20, 30] and list(line.get_ydata()) == [7.0, 6.0, 5.5]


def test_panels_draw_their_baselines_and_limits(tmp_path, saved):
    panels = [("loss", ["loss"], [(6.2, "unigram entropy 6.2")]),
              ("accuracy", ["eval_acc"], [(0.05, "always ','")], (0.0, 0.5)),
              ("nothing logged", ["eval_nsp"], [])]                      # no data: no panel
    plot_training_curves(LOG, str(tmp_path / "c.png"), panels=panels, labels={"eval_acc": "top-1"})
    legends, texts, axes = saved[0]
    assert len(axes) == 2 and "top-1" in legends
    assert texts == ["unigram entropy 6.2", "always ','"]
    assert [y for line in axes[0].get_lines() if line.get_linestyle() == "--" for y in line.get_ydata()] == [6.2, 6.2]
    assert axes[1].get_ylim() == (0.0, 0.5)
    assert plot_training_curves(LOG, str(tmp_path / "none.png"), panels=[("x", ["absent"], [])]) is None


def test_the_attention_grid_has_one_colour_bar_from_0_to_1(tmp_path, saved):
    L, N, T = 2, 2, 4
    rng = np.random.default_rng(0)
    att = [rng.dirichlet(np.ones(T), size=(1, N, T)) for _ in range(L)]     # rows sum to 1
    path = plot_attention(att, ["[CLS]", "a", "b", "[SEP]"], str(tmp_path / "att.png"), title="a b")
    assert path and open(path, "rb").read(4) == b"\x89PNG"
    _, _, axes = saved[0]
    bars = [ax for ax in axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and len(axes) == L * N + 1
    assert bars[0].get_ylim() == (0.0, 1.0) and bars[0].get_ylabel() == "attention probability"
