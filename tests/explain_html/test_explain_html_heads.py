"""`npbert explain --html` with a task head: every head npbert has draws its outputs as stages (with and
without a label); with a label the page's loss is the head's own, and its numbers are transformers'
(float64, autograd); a folder with tokenizer.json and no vocab.txt (transformers 5) is read."""
import warnings

import numpy as np
import pytest

import npbert
from npbert import cli
from npbert.explain import TINY_CONFIG, TINY_VOCAB
from npbert.explain import decode, page_upstream

from test_explain_html import page_data, retaining, stage, write_page

PAIR = ["--text_pair", "a lazy dog ."]
MASKED = "the quick brown [MASK] jumps"
# class -> (num_labels, the head's output stages with their dims after B, whether it has a pooler)
HEADS = {
    "BertForSequenceClassification": (3, {"logits": ["K"]}, True),
    "BertForTokenClassification": (3, {"logits": ["T", "K"]}, False),
    "BertForQuestionAnswering": (2, {"start_logits": ["T"], "end_logits": ["T"]}, False),
    "BertForMaskedLM": (2, {"logits": ["T", "V"]}, False),
    "BertForNextSentencePrediction": (2, {"logits": ["K"]}, True),
    "BertForPreTraining": (2, {"prediction_logits": ["T", "V"], "seq_relationship_logits": ["K"]}, True),
    "BertForMultipleChoice": (2, {"logits": ["C"]}, True),
}


def head_folder(root, cls_name, seed=4):
    folder = root / cls_name
    if not folder.exists():
        K = HEADS[cls_name][0]
        getattr(npbert, cls_name)(npbert.BertConfig(**TINY_CONFIG, num_labels=K), seed=seed).save_pretrained(folder)
        (folder / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return tmp_path_factory.mktemp("heads")


@pytest.mark.parametrize("cls_name", list(HEADS))
def test_every_head_draws_its_outputs_without_a_label(cls_name, folders, tmp_path, capsys):
    folder = head_folder(folders, cls_name)
    text = MASKED if "Masked" in cls_name or "PreTraining" in cls_name else "the quick brown fox"
    status, out, path = write_page(tmp_path, capsys, "--model", str(folder), "--dtype", "float64", "--text", text, *PAIR)
    assert status == 0, out
    _, data = page_data(path)
    K, outputs, pooler = HEADS[cls_name]
    T, c = len(data["tokens"]), npbert.BertConfig(**TINY_CONFIG)
    heads = [s for s in data["stages"] if s["section"] == "head"]
    assert [s["key"] for s in heads] == list(outputs) and data["stages"][-len(heads):] == heads
    assert data["model"]["head"]["class"] == cls_name
    assert any(s["section"] == "pooler" for s in data["stages"]) == pooler
    # the values: the head's own outputs on the page's tokens (float64 model, float32 storage: 1e-6 of the largest)
    model = getattr(npbert, cls_name).from_pretrained(folder, dtype=np.float64).eval()
    ids, types = np.array([data["input_ids"]]), np.array([data["token_type_ids"]])
    inputs = dict(input_ids=ids, token_type_ids=types, attention_mask=np.ones_like(ids))
    if cls_name == "BertForMultipleChoice":
        inputs = {k: v[:, None] for k, v in inputs.items()}                    # one choice
    o = model(**inputs)
    sizes = {"T": T, "V": c.vocab_size, "K": K, "C": 1}
    for s in heads:
        assert s["dims"] == ["B", *outputs[s["key"]]]
        assert s["shape"] == [1] + [sizes[d] for d in outputs[s["key"]]]
        ref = o[s["key"]]
        np.testing.assert_allclose(decode(s["value"]), ref, rtol=0, atol=1e-6 * (1 + np.abs(ref).max()))
        assert not decode(s["grad"]).any()                                    # sum(h * U) does not read it
        assert s["check"]["forward"]["ok"] and s["check"]["backward"] is None
        assert s["source"]["file"].startswith("npbert/modeling/heads/")
    # the loss without a label: sum(last_hidden_state * U), U from the seed
    U = page_upstream(0, 1, T, c.hidden_size)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some weights of")        # the head's, not BertModel's
        bert = npbert.BertModel.from_pretrained(folder, dtype=np.float64, add_pooling_layer=pooler)
    h = bert(input_ids=ids, token_type_ids=types).last_hidden_state
    assert data["loss"]["value"] == pytest.approx(float(np.sum(h * U)), rel=1e-12)
    np.testing.assert_array_equal(decode(data["loss"]["U"]), U.astype(np.float32))
    assert data["loss"]["labels"] is None and data["gradient_check"]["ok"]


def _transformers_head(cls_name, model, torch, transformers):
    K = HEADS[cls_name][0]
    hf_config = transformers.BertConfig(**TINY_CONFIG, num_labels=K, attn_implementation="eager")
    hf = getattr(transformers, cls_name)(hf_config).double().eval()
    hf.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in model.state_dict().items()},
                       strict=False)
    return hf


@pytest.mark.parametrize("cls_name, text, argv, labels", [
    ("BertForTokenClassification", "the quick brown fox", ["--label=-100,0,1,2,0,-100,1,1,2,0,-100"],
     {"labels": [[-100, 0, 1, 2, 0, -100, 1, 1, 2, 0, -100]]}),
    ("BertForQuestionAnswering", "the quick brown fox", ["--label", "7,9"],
     {"start_positions": [7], "end_positions": [9]}),
    ("BertForMaskedLM", MASKED, ["--label", "fox"], {"labels": None}),
    ("BertForPreTraining", MASKED, ["--label", "fox", "--next_sentence_label", "1"],
     {"labels": None, "next_sentence_label": [1]}),
    ("BertForNextSentencePrediction", "the quick brown fox", ["--label", "1"], {"labels": [1]}),
])
def test_a_heads_loss_is_transformers(cls_name, text, argv, labels, folders, tmp_path, capsys):
    """With a label, the loss, the gradient of each output and of the stages below are those of
    transformers' class of the same name on the same weights (float64, autograd)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = head_folder(folders, cls_name)
    status, out, path = write_page(tmp_path, capsys, "--model", str(folder), "--dtype", "float64", "--text", text,
                                   *PAIR, *argv)
    assert status == 0, out
    _, data = page_data(path)
    ids = data["input_ids"]
    if labels.get("labels", 0) is None:                                   # the masked LM: fox at [MASK], -100 elsewhere
        mask = data["tokens"].index("[MASK]")
        labels["labels"] = [[TINY_VOCAB.index("fox") if t == mask else -100 for t in range(len(ids))]]
    assert data["loss"]["labels"] == labels
    model = getattr(npbert, cls_name).from_pretrained(folder, dtype=np.float64)
    hf = _transformers_head(cls_name, model, torch, transformers)
    seen = {}
    keep = retaining(seen)
    hooks = [hf.bert.embeddings.word_embeddings.register_forward_hook(keep("word")),
             hf.bert.encoder.layer[-1].output.LayerNorm.register_forward_hook(keep("last"))]
    o = hf(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([data["token_type_ids"]]),
           **{k: torch.tensor(v) for k, v in labels.items()})
    heads = [s for s in data["stages"] if s["section"] == "head"]
    for s in heads:
        o[s["key"]].retain_grad()
    o.loss.backward()
    for h in hooks:
        h.remove()
    assert data["loss"]["value"] == pytest.approx(o.loss.item(), rel=1e-12)          # float64 both
    # float32 storage of float64 numbers: 1e-6 of the largest |value| (a wrong stage is off by far more)
    pairs = [(decode(s["grad"]), o[s["key"]].grad.numpy()) for s in heads]
    pairs += [(decode(stage(data, "word")["grad"]), seen["word"].grad.numpy()),
              (decode(stage(data, "layer_output", 1)["grad"]), seen["last"].grad.numpy())]
    for mine, ref in pairs:
        np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-6 * (1 + np.abs(ref).max()))
    assert all(s["check"]["backward"]["ok"] for s in heads)
    assert all(ch["ok"] for ch in data["loss"]["checks"])
    assert data["gradient_check"]["of"] == cls_name and data["gradient_check"]["ok"]
    assert [t["name"] for t in data["loss"]["terms"]] == [t.name for t in model.loss_terms(
        {"input_ids": np.array([ids]), **{k: np.array(v) for k, v in labels.items()}})]


def test_a_wrong_output_gradient_fails(folders, tmp_path, capsys, monkeypatch):
    """The checks of d loss / d output (against central differences, and through the head's own
    backward against its backward()) can fail."""
    import npbert.explain.heads as heads
    real = heads.loss_gradients
    monkeypatch.setattr(heads, "loss_gradients", lambda head: {k: 0.5 * v for k, v in real(head).items()})
    folder = head_folder(folders, "BertForTokenClassification")
    status, out, path = write_page(tmp_path, capsys, "--model", str(folder), "--text", "a dog", "--label", "1,2,0,1")
    _, data = page_data(path)
    assert status == 1 and "BertForTokenClassification.backward(**d loss / d outputs)" in out
    assert "d loss / d outputs" in data["checks"]["failed"]
    assert not stage(data, "logits")["check"]["backward"]["ok"]


@pytest.mark.parametrize("cls_name, argv, message", [
    ("BertForQuestionAnswering", ["--label", "3"], "START,END"),
    ("BertForQuestionAnswering", ["--label", "3,40"], "position 40 is out of range"),
    ("BertForTokenClassification", ["--label", "1,2"], "one label per token, 4 of them"),
    ("BertForTokenClassification", ["--label=-100,-100,-100,-100"], "no label counts"),
    ("BertForMaskedLM", ["--label", "fox"], "the text has no [MASK]"),
    ("BertForPreTraining", ["--label", "fox"], "--next_sentence_label"),
    ("BertForMultipleChoice", ["--label", "0"], "Leave --label out"),
    ("BertForSequenceClassification", ["--label", "dog"], "not a class index"),
    ("BertForSequenceClassification", ["--next_sentence_label", "1"], "goes with --label"),
])
def test_label_usage_errors(cls_name, argv, message, folders, tmp_path, capsys):
    folder = head_folder(folders, cls_name)
    status = cli.main(["explain", "--model", str(folder), "--html", str(tmp_path / "p.html"), "--text", "a dog", *argv])
    err = capsys.readouterr().err
    assert status == 2 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.html").exists()


def test_a_folder_with_tokenizer_json_only(folders, tmp_path, capsys):
    """A folder as transformers 5 saves it: tokenizer.json, no vocab.txt; text and page both read it, and
    cut the text into the tokens of the same vocabulary as a vocab.txt."""
    transformers = pytest.importorskip("transformers")
    with_vocab = head_folder(folders, "BertForSequenceClassification")
    folder = tmp_path / "tf5"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Some weights of")        # the classifier's
        npbert.BertModel.from_pretrained(with_vocab).save_pretrained(folder)
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 5 saves tokenizer.json without vocab.txt; this is " + transformers.__version__)
    vocab = {token: i for i, token in enumerate(TINY_VOCAB)}
    transformers.BertTokenizer(vocab=vocab).save_pretrained(folder)          # the Rust tokenizer of transformers 5
    assert (folder / "tokenizer.json").exists() and not (folder / "vocab.txt").exists()
    text = "the lazy dog jumps over the brown fox"
    assert cli.main(["explain", "--model", str(folder), "--text", text]) == 0
    out = capsys.readouterr().out
    assert "tokenizer.json" in out and "[CLS] the lazy dog jumps over the brown fox [SEP]" in out
    status, out, path = write_page(tmp_path, capsys, "--model", str(folder), "--text", text)
    assert status == 0, out
    _, data = page_data(path)
    _, reference = page_data(write_page(tmp_path, capsys, "--model", str(with_vocab), "--text", text, name="v.html")[2])
    assert data["tokens"] == reference["tokens"] and data["input_ids"] == reference["input_ids"]
    assert "tokenizer.json" in data["tokenizer"]
