"""`npbert demo` on a small budget (1,200 speeches, 40 steps): results.json holds every number the
demo prints, and each one agrees with what a script recomputes from the files the demo wrote
(held_out.h5, held_out.txt, train.txt, the saved model), by code written here independently."""
import collections
import json
import math
import os
import re

import numpy as np
import pytest

import npbert
from npbert.cli import main

STEPS = 40


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "npbert-demo"
    status = main(["demo", "--output_dir", str(out), "--speeches", "1200", "--max_steps", str(STEPS),
                   "--vocab_size", "400", "--max_seq_length", "32", "--batch_size", "32", "--train_seconds", "0",
                   "--evaluations", "2", "--finetune_steps", "10"])
    assert status == 0
    with open(out / "results.json", encoding="utf-8") as f:
        return out, json.load(f)


def held_out(out):
    from npbert.data import read_features
    feats, attrs = read_features(str(out / "held_out.h5"))
    real = feats["masked_lm_weights"] > 0
    return feats, attrs, feats["masked_lm_ids"][real]


def test_the_fields_are_there(run):
    _, r = run
    for when in ("before", "after"):
        assert set(r[when]) == {"mlm_accuracy", "mlm_accuracy_at_mask", "mlm_top5_accuracy", "mlm_loss",
                                "nsp_accuracy", "nsp_loss"}
        for k in ("mlm_accuracy", "mlm_accuracy_at_mask", "mlm_top5_accuracy", "nsp_accuracy"):
            assert 0.0 <= r[when][k] <= 1.0, (when, k)
        assert r[when]["mlm_top5_accuracy"] >= r[when]["mlm_accuracy"]
    assert {"mlm_accuracy", "mlm_top5_accuracy", "unigram_entropy", "nsp_majority", "most_frequent_token"} <= set(
        r["baselines"])
    assert r["steps"] == STEPS and r["max_steps_planned"] == STEPS == r["max_steps_requested"]
    assert f"--max_steps {STEPS}" in r["command"] and "--seed 0" in r["command"]
    assert 0 < r["train_seconds"] < r["total_seconds"]
    steps = [c["step"] for c in r["curve"]]
    seconds = [c["train_seconds"] for c in r["curve"]]
    assert steps == sorted(steps) and steps[-1] == STEPS and len(steps) == 2
    assert seconds == sorted(seconds) and 0 < seconds[-1] <= r["train_seconds"]
    assert r["curve"][-1]["mlm_accuracy"] == pytest.approx(r["after"]["mlm_accuracy"])     # the same model, data


def test_fine_tuning_compares_the_two_starts(run):
    _, r = run
    ft = r["fine_tuning"]
    assert ft["steps"] == 10 and ft["train_examples"] > 100 and ft["held_out_examples"] > 50
    for k in ("pretrained", "random_init", "majority"):
        assert 0.0 <= ft[k] <= 1.0, k
    assert ft["majority"] >= 0.5


def test_training_moved_the_numbers(run):
    """40 steps are far from learning the language, but the losses must fall: the training loss by
    0.5 nats, the held-out MLM loss from about ln V (a random model spreads its guesses) towards
    the unigram entropy (ln 400 = 5.99 -> 5.55 measured, the unigram entropy being 5.3: 0.25 asked)."""
    _, r = run
    assert r["losses"][-1] < r["losses"][0] - 0.5, r["losses"]
    # a model at initialisation: logits near 0, loss within 0.5 nats of ln V
    assert abs(r["before"]["mlm_loss"] - math.log(r["config"]["vocab_size"])) < 0.5, r["before"]
    assert r["after"]["mlm_loss"] < r["before"]["mlm_loss"] - 0.25, (r["before"], r["after"])


def test_the_baselines_come_from_the_held_out_tokens(run):
    out, r = run
    feats, attrs, labels = held_out(out)
    b = r["baselines"]
    assert len(labels) == r["data"]["held_out_predicted_tokens"]
    assert b["mlm_accuracy"] == pytest.approx(float(np.mean(labels == b["most_frequent_token_id"])), abs=1e-12)
    counts = collections.Counter(labels.tolist())
    entropy = -sum(c / len(labels) * math.log(c / len(labels)) for c in counts.values())
    assert b["unigram_entropy"] == pytest.approx(entropy, rel=1e-9)
    # the most frequent token of the training text (counted here with the tokenizer on train.txt)
    tok = npbert.BertTokenizer(str(out / "vocab.txt"))
    words = collections.Counter(tok.tokenize(open(out / "train.txt", encoding="utf-8").read()))
    assert b["most_frequent_token"] == words.most_common(1)[0][0]
    nsp = feats["next_sentence_labels"]
    assert b["nsp_majority"] == pytest.approx(max(nsp.mean(), 1 - nsp.mean()), abs=1e-12)
    v = r["nsp"]
    assert v["learned"] == (r["after"]["nsp_accuracy"] - b["nsp_majority"] >= 0.05)
    # the shared-word cue: the best rule "IsNext when A and B share >= k uncommon tokens" is at
    # least as good as k = 0, which is "always IsNext" (label 0)
    cue = v["shared_words"]
    always_is_next = float((nsp == 0).mean())
    assert always_is_next - 1e-12 <= cue["best_rule_accuracy"] <= 1.0
    assert cue["uncommon_words_shared_is_next"] >= 0 and cue["uncommon_words_shared_not_next"] >= 0


def test_the_after_numbers_are_the_saved_models(run):
    """The saved model, run here on held_out.h5: the same MLM and NSP accuracy as results.json."""
    out, r = run
    feats, _, _ = held_out(out)
    model = npbert.BertForPreTraining.from_pretrained(str(out / "model"))
    right = total = nsp_right = right_at_mask = total_at_mask = 0
    mask_id = npbert.BertTokenizer(str(out / "vocab.txt")).mask_token_id
    for s in range(0, len(feats["input_ids"]), 64):
        sl = slice(s, s + 64)
        with npbert.no_grad():
            o = model(input_ids=feats["input_ids"][sl].astype(np.int64),
                      attention_mask=feats["input_mask"][sl].astype(np.int64),
                      token_type_ids=feats["segment_ids"][sl].astype(np.int64))
        guess = o.prediction_logits.argmax(-1)                                        # (n, T)
        for i in range(guess.shape[0]):
            real = feats["masked_lm_weights"][s + i] > 0
            pos, ids = feats["masked_lm_positions"][s + i][real], feats["masked_lm_ids"][s + i][real]
            right += int((guess[i, pos] == ids).sum())
            total += len(ids)
            at_mask = feats["input_ids"][s + i][pos] == mask_id
            right_at_mask += int((guess[i, pos][at_mask] == ids[at_mask]).sum())
            total_at_mask += int(at_mask.sum())
        nsp_right += int((o.seq_relationship_logits.argmax(-1) == feats["next_sentence_labels"][sl]).sum())
    # float32 on both sides, the same weights and inputs: equal up to argmax ties, i.e. exactly
    assert right / total == pytest.approx(r["after"]["mlm_accuracy"], abs=1e-12)
    assert nsp_right / len(feats["input_ids"]) == pytest.approx(r["after"]["nsp_accuracy"], abs=1e-12)
    assert right_at_mask / total_at_mask == pytest.approx(r["after"]["mlm_accuracy_at_mask"], abs=1e-12)
    assert total_at_mask == r["baselines"]["held_out_at_mask"]


def test_the_prompts_follow_the_printed_rule(run):
    """Rewritten here from the rule's words: held-out lines of 6-14 words that fit in 32 tokens, 10
    evenly spread; the masked word is the first of 4+ letters that is one vocabulary token."""
    out, r = run
    fill = r["fill_mask"]
    assert "first one of 4 or more letters" in fill["rule"] and "fit in 32 tokens" in fill["rule"]
    assert len(fill["prompts"]) == 10
    vocab = set(open(out / "vocab.txt", encoding="utf-8").read().split("\n"))
    tok = npbert.BertTokenizer(str(out / "vocab.txt"))
    held_lines = [line.strip() for line in open(out / "held_out.txt", encoding="utf-8") if line.strip()]
    qualifying = []
    for line in held_lines:
        words = line.split()
        if not 6 <= len(words) <= 14 or len(tok.tokenize(line)) + 2 > 32:
            continue
        for k, w in enumerate(words):
            m = re.fullmatch(r"(\W*)([A-Za-z]+)(\W*)", w)
            if m and len(m.group(2)) >= 4 and m.group(2).lower() in vocab:
                prompt = " ".join(words[:k] + [m.group(1) + "[MASK]" + m.group(3)] + words[k + 1:])
                qualifying.append((prompt, m.group(2).lower()))
                break
    expected = [qualifying[int((k + 0.5) * len(qualifying) / 10)] for k in range(10)]
    assert [(p["prompt"], p["answer"]) for p in fill["prompts"]] == expected
    V = r["config"]["vocab_size"]
    for p in fill["prompts"]:
        assert 1 <= p["rank_before"] <= V and 1 <= p["rank_after"] <= V
        assert len(p["top5_after"]) == 5 and (p["answer"] in p["top5_after"]) == (p["rank_after"] <= 5)
    assert fill["in_top5_after"] == sum(p["rank_after"] <= 5 for p in fill["prompts"])
    assert fill["in_top5_before"] == sum(p["rank_before"] <= 5 for p in fill["prompts"])


def test_the_ranks_after_are_the_saved_models(run):
    """The fill-mask pipeline on the saved model, all tokens ranked: the same rank as results.json."""
    out, r = run
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # the pooler and NSP head, unused by BertForMaskedLM
        model = npbert.BertForMaskedLM.from_pretrained(str(out / "model"))
    tok = npbert.BertTokenizer.from_pretrained(str(out / "model"))
    fill = npbert.pipeline("fill-mask", model=model, tokenizer=tok)
    for p in r["fill_mask"]["prompts"][:4]:
        ranked = [g["token_str"] for g in fill(p["prompt"], top_k=len(tok))]
        assert ranked.index(p["answer"]) + 1 == p["rank_after"], p


def test_the_pictures(run):
    out, r = run
    from npbert.training.plots import have_matplotlib
    if not have_matplotlib():
        assert r["pictures"] == {}
        return
    for name in ("training_curves", "attention"):
        path = r["pictures"][name]
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", path


def test_bad_options_stop_with_a_message(tmp_path, capsys):
    """A flag value or path the user typed wrong: exit status 2 (docs/troubleshooting.md), one line."""
    assert main(["demo", "--output_dir", str(tmp_path / "d"), "--mlm_probability", "1.5"]) == 2
    assert "--mlm_probability" in capsys.readouterr().err
    assert main(["demo", "--output_dir", str(tmp_path / "d"), "--speeches", "12"]) == 2
    assert "--speeches 12" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["demo", "--output_dir", str(tmp_path / "file")]) == 2
    assert "a file of that name exists" in capsys.readouterr().err
