"""npbert.testing: every strategy's output is accepted by npbert, and the edge cases come up."""
import unicodedata

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
    """Measured over the examples of the test above (run here again if it has not run in this
    session): padded rows, one-token sequences, head masks with zeros and several activations
    each occur in at least 10 %."""
    if not CASES:
        test_configs_and_inputs_are_accepted()
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


TEXT_FEATURES = {
    "CJK ideograph": lambda s: any(0x4E00 <= ord(c) <= 0x9FFF or 0x3400 <= ord(c) <= 0x4DBF
                                   or 0x20000 <= ord(c) <= 0x2FA1F or 0xF900 <= ord(c) <= 0xFAFF for c in s),
    "combining mark": lambda s: any(unicodedata.category(c).startswith("M") for c in s),
    "accented letter": lambda s: any(c.isalpha() and c != unicodedata.normalize("NFD", c)[:1]
                                     and unicodedata.category(unicodedata.normalize("NFD", c)[-1]) == "Mn"
                                     for c in s),
    "control or zero-width": lambda s: any(unicodedata.category(c) in ("Cc", "Cf") for c in s),
    "punctuation": lambda s: any(unicodedata.category(c).startswith("P") for c in s),
    "whitespace run": lambda s: any(a.isspace() and b.isspace() for a, b in zip(s, s[1:])),
}


def test_texts_hit_their_edge_cases():
    """Over 300 examples each kind of character texts() promises occurs in at least 10 % of
    them (measured about 20-50 %; 10 % leaves room for hypothesis's random choices)."""
    seen = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(nt.texts())
    def collect(text):
        seen.append(text)
    collect()
    n = len(seen)
    rates = {name: sum(map(has, seen)) / n for name, has in TEXT_FEATURES.items()}
    low = {name: rate for name, rate in rates.items() if rate < 0.10}
    assert n >= 250 and not low, (n, rates)


@settings(max_examples=50, deadline=None)
@given(nt.vocabularies())
def test_vocabularies_build_tokenizers(vocab):
    assert vocab[:5] == list(nt.SPECIAL_TOKENS) and len(set(vocab)) == len(vocab)
    tok = _tok(vocab)
    assert tok.convert_tokens_to_ids(vocab[5]) == 5


def test_bert_configs_draw_ten_activations_unless_told():
    """The docs say so: all ten activations by default (an exact-GELU-only implementation must
    pass activations=("gelu",)); with activations= only those."""
    assert len(nt.ACTIVATIONS) == 10 and len(set(nt.ACTIVATIONS)) == 10
    from npbert.functional import get_activation
    assert all(callable(get_activation(name)[1]) for name in nt.ACTIVATIONS)   # each one npbert has
    seen = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(nt.bert_configs(activations=("gelu", "relu")))
    def only_these(config):
        seen.add(config.hidden_act)
        assert config.hidden_act in ("gelu", "relu")
    only_these()
    assert seen == {"gelu", "relu"}
