"""Bad SQuAD input: a clear error naming the file and the question, never a silent wrong answer."""
import json

import numpy as np
import pytest

from npbert.tasks import squad


def _write(tmp_path, obj, name="data.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return str(path)


def _file(qas, context="The Normans came from Normandy in France."):
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_answer_offset_that_does_not_match_its_text(tmp_path):
    path = _write(tmp_path, _file([{"id": "q7", "question": "Where?", "answers": [{"text": "France", "answer_start": 3}]}]))
    with pytest.raises(ValueError, match=r"data.json: question q7: answer_start 3 does not point at the answer text 'France'"):
        squad.read_squad_examples(path, is_training=True)
    # not training: the answers are not read, so nothing to check
    assert len(squad.read_squad_examples(path, is_training=False)) == 1


def test_missing_keys_empty_and_broken_files(tmp_path):
    path = _write(tmp_path, _file([{"id": "q1", "answers": []}]))
    with pytest.raises(ValueError, match=r'question q1: missing key "question"'):
        squad.read_squad_examples(path, is_training=False)
    path = _write(tmp_path, _file([{"id": "q2", "question": "Where?", "answers": [{"text": "France", "answer_start": 34}]}]))
    with pytest.raises(ValueError, match=r'question q2: missing key "is_impossible"'):
        squad.read_squad_examples(path, is_training=True, version_2_with_negative=True)
    with pytest.raises(ValueError, match=r"empty.json: the file is empty"):
        squad.read_squad_examples(_write(tmp_path, "", "empty.json"), is_training=False)
    with pytest.raises(ValueError, match=r"bad.json: not valid JSON \(line 1"):
        squad.read_squad_examples(_write(tmp_path, "{", "bad.json"), is_training=False)
    with pytest.raises(ValueError, match=r'none.json: not a SQuAD file'):
        squad.read_squad_examples(_write(tmp_path, {"x": 1}, "none.json"), is_training=False)
    with pytest.raises(ValueError, match=r"noq.json: no questions"):
        squad.read_squad_examples(_write(tmp_path, _file([]), "noq.json"), is_training=False)
    with pytest.raises(ValueError, match=r"question q3: a training question needs an answer"):
        squad.read_squad_examples(_write(tmp_path, _file([{"id": "q3", "question": "?", "answers": []}])), True)


def test_answer_inside_a_word_is_skipped_and_counted(tmp_path, caplog):
    # U+00A0 does not separate words in the context (Google's split), but str.split() splits the
    # answer at it: the answer's words "10\u00a0km" cannot hold "10 km", so Google skips it
    context = "The Normans came 10\u00a0km from Normandy in France."
    qas = [{"id": "q1", "question": "How far?", "answers": [{"text": "10\u00a0km", "answer_start": 17}]},
           {"id": "q2", "question": "Where?", "answers": [{"text": "France", "answer_start": 40}]}]
    examples = squad.read_squad_examples(_write(tmp_path, _file(qas, context)), is_training=True)
    assert [e.qas_id for e in examples] == ["q2"]
    assert examples[0].start_position == examples[0].end_position == 7       # word 7: "France."
    assert "skipped 1 of 2 training questions" in caplog.text


def test_only_null_answer_left_predicts_empty():
    """v2 with every span invalid: Google's function fails; ours predicts "" with score_diff inf."""
    example = squad.SquadExample("q", "?", ["a", "b"])
    feature = squad.InputFeatures(1000000000, 0, 0, ["[CLS]", "?", "[SEP]", "a", "b", "[SEP]"], {3: 0, 4: 1},
                                  {3: True, 4: True}, [0] * 6, [1] * 6, [0] * 6)
    start = np.array([5.0, 0, 0, -1, -1, 0])
    end = np.array([5.0, 0, 0, -1, -1, 0])
    result = squad.RawResult(1000000000, start, end)
    predictions, nbest, diff = squad.write_predictions([example], [feature], [result], n_best_size=1,
                                                       version_2_with_negative=True)
    assert predictions == {"q": ""} and diff == {"q": float("inf")} and nbest["q"][0]["text"] == ""
    with pytest.raises(ValueError, match="feature 1000000000: start_logits holds NaN"):
        squad.write_predictions([example], [feature], [squad.RawResult(1000000000, start * np.nan, end)])


def test_training_features_need_training_examples():
    example = squad.SquadExample("q9", "Where?", ["In", "France."])       # read with is_training=False
    with pytest.raises(ValueError, match="question q9: no answer position"):
        squad.convert_examples_to_features([example], _WordTokenizer(), is_training=True)
    features = squad.convert_examples_to_features([example], _WordTokenizer(), max_seq_length=8)
    assert features[0].tokens == ["[CLS]", "where?", "[SEP]", "in", "france.", "[SEP]"]


class _WordTokenizer:
    """Lower-cased whitespace words, ids by order of appearance: enough for the windowing logic."""

    def __init__(self):
        self.vocab = {}

    def tokenize(self, text):
        return text.lower().split()

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.setdefault(t, len(self.vocab)) for t in tokens]
