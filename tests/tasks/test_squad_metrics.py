"""squad_evaluate on hand-made cases whose official scores are worked out here, line by line."""
import math

import pytest

from npbert.tasks.squad_metrics import compute_f1, normalize_answer, squad_evaluate


def _dataset(questions):
    """[(id, [gold texts])] -> a one-paragraph SQuAD "data" list."""
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": [
        {"id": qid, "question": "q?", "answers": [{"text": t, "answer_start": 0} for t in golds]}
        for qid, golds in questions]}]}]


def test_normalize_answer():
    assert normalize_answer("The  Normans!") == "normans"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theory") == "theory"            # "the" only as a whole word
    assert normalize_answer("") == ""


def test_v1_scores():
    data = _dataset([("q1", ["Denver Broncos", "The Denver Broncos"]),
                     ("q2", ["10th and 11th centuries"]),
                     ("q3", ["France"]),
                     ("q4", ["Rollo"])])
    predictions = {"q1": "the Denver Broncos.",             # exact after normalisation: EM 1, F1 1
                   "q2": "in the 10th century",             # pred tokens [in, 10th, century], gold [10th, and, 11th, centuries]
                   "q3": "Paris"}                           # no common token: 0, 0; q4 has no prediction: 0, 0
    # q2: common = {10th}: P = 1/3, R = 1/4, F1 = 2 (1/12) / (7/12) = 2/7
    result = squad_evaluate(data, predictions)
    assert set(result) == {"exact_match", "f1"}
    assert result["exact_match"] == pytest.approx(100 * 1 / 4, abs=1e-12)          # float sums of a few terms
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 7) / 4, abs=1e-12)


def test_v2_scores_and_best_threshold():
    data = _dataset([("a1", ["Rollo"]), ("a2", ["Norse raiders", "raiders"]), ("n1", []), ("n2", [])])
    predictions = {"a1": "Rollo", "a2": "Viking raiders", "n1": "", "n2": "Denmark"}
    # raw: a1 EM 1 F1 1; a2 best over golds: vs "raiders" P = 1/2, R = 1 -> F1 2/3, vs "norse raiders" 1/2: 2/3, EM 0;
    #      n1 "" vs "": 1, 1; n2 "denmark" vs "": 0, 0
    result = squad_evaluate(data, predictions)
    assert result["total"] == 4 and result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["exact"] == pytest.approx(100 * 2 / 4, abs=1e-12)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 4, abs=1e-12)
    assert result["HasAns_exact"] == pytest.approx(50.0, abs=1e-12)
    assert result["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2, abs=1e-12)
    assert result["NoAns_exact"] == pytest.approx(50.0, abs=1e-12) and result["NoAns_f1"] == pytest.approx(50.0)
    assert "best_f1" not in result

    na_probs = {"a1": 0.1, "a2": 0.6, "n1": 0.3, "n2": 0.9}
    # best threshold walk, exact: start at 2 (both unanswerable predicted ""); by na prob:
    #   a1 (0.1) +1 -> 3 best, thresh 0.1; n1 (0.3) pred "" +0 -> 3; a2 (0.6) +0 -> 3; n2 (0.9) -1 -> 2
    # f1: a1 +1 -> 3 (0.1); n1 +0; a2 +2/3 -> 3.667 best (0.6); n2 -1
    result = squad_evaluate(data, predictions, na_probs=na_probs)
    assert result["best_exact"] == pytest.approx(100 * 3 / 4, abs=1e-12) and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4, abs=1e-12) and result["best_f1_thresh"] == 0.6
    # the default na_prob_thresh 1.0 overrides nothing: the plain scores are unchanged
    assert result["exact"] == pytest.approx(50.0, abs=1e-12)
    # a threshold of 0.5 predicts "" for a2 and n2: a2 -> 0, n2 -> 1
    result = squad_evaluate(data, predictions, na_probs=na_probs, na_prob_thresh=0.5)
    assert result["exact"] == pytest.approx(100 * 3 / 4, abs=1e-12)
    assert result["f1"] == pytest.approx(100 * 3 / 4, abs=1e-12)


def test_v2_empty_cases_and_missing_predictions():
    assert compute_f1("", "") == 1 and compute_f1("", "x") == 0 and compute_f1("a", "") == 1   # "a" normalises to ""
    data = _dataset([("a1", ["Rollo"]), ("n1", [])])
    result = squad_evaluate(data, {"a1": "rollo"})          # n1 missing: left out, as the v2.0 script does
    assert result["total"] == 1 and result["exact"] == 100.0 and "NoAns_total" not in result
    with pytest.raises(ValueError, match="no question of the dataset has a prediction"):
        squad_evaluate(data, {})
    with pytest.raises(ValueError, match="na_probs has no value for question a1"):
        squad_evaluate(data, {"a1": "rollo"}, na_probs={})
    assert not math.isnan(squad_evaluate(data, {"a1": "x", "n1": ""})["f1"])
