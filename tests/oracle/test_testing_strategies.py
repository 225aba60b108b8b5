"""npbert.testing: every strategy's output is accepted by npbert, and the edge cases come up."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import npbert
import npbert.testing as nt

CASES = []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nt.bert_configs().flatmap(lambda c: st.tuples(st.just(c), nt.model_inputs(c), nt.head_masks(c))))
def test_configs_and_inputs_are_accepted(case):
    config, inputs, head_mask = case
    model = npbert.BertModel(config, dtype=np.float64).eval()
    out = model(**inputs, head_mask=head_mask)
    assert np.all(np.isfinite(out.last_hidden_state))
    B, T = inputs["attention_mask"].shape
    assert out.last_hidden_state.shape == (B, T, config.hidden_size)
    assert np.all(inputs["attention_mask"].sum(axis=1) >= 1)
    CASES.append((B, T, bool((inputs["attention_mask"] == 0).any()), bool((head_mask == 0).any()),
                  config.hidden_act))


def test_edge_cases_come_up():
    """Measured over the examples of the test above (run first): padded rows, one-token
    sequences, head masks with zeros and several activations each occur in at least 10 %."""
    if not CASES:
        pytest.skip("run with test_configs_and_inputs_are_accepted")
    n = len(CASES)
    assert sum(c[2] for c in CASES) / n > 0.1                       # some padding
    assert sum(c[1] == 1 for c in CASES) / n > 0.1                  # one-token sequences
    assert sum(c[3] for c in CASES) / n > 0.1                       # zeroed heads
    assert len({c[4] for c in CASES}) >= 5


@settings(max_examples=200, deadline=None)
@given(nt.texts())
def test_texts_tokenize(text):
    vocab = nt.SPECIAL_TOKENS + ("the", "cat", "##s")
    tok = _tok(vocab)
    tok(text)


def _tok(vocab, cache={}):
    key = tuple(vocab)
    if key not in cache:
        import os
        import tempfile
        path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        with open(path, "w") as f:
            f.write("\n".join(vocab) + "\n")
        cache[key] = npbert.BertTokenizer(path)
    return cache[key]


def test_texts_hit_cjk_and_combining_marks():
    import unicodedata
    from hypothesis import find
    # each edge case is reachable: hypothesis finds an example of it
    find(nt.texts(), lambda s: any(0x4E00 <= ord(c) <= 0x9FFF for c in s))
    find(nt.texts(), lambda s: any(unicodedata.category(c) == "Mn" for c in s))


@settings(max_examples=50, deadline=None)
@given(nt.vocabularies())
def test_vocabularies_build_tokenizers(vocab):
    assert vocab[:5] == list(nt.SPECIAL_TOKENS) and len(set(vocab)) == len(vocab)
    tok = _tok(vocab)
    assert tok.convert_tokens_to_ids(vocab[5]) == 5
