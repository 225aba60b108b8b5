"""TrainingArguments takes the keywords tutorials pass to transformers' (report_to="none",
logging_dir, push_to_hub=False, hub_*, run_name, disable_tqdm, ...): kept with a note where they
mean nothing here, refused where they would change the model, a misspelling refused with the
closest name (npbert/training/offline_args.py)."""
import dataclasses
import logging
import warnings

import pytest

from npbert.training import TrainingArguments
from npbert.training.offline_args import ALIASES, IGNORED, REFUSED

NPBERT_FIELDS = {f.name for f in dataclasses.fields(TrainingArguments)}


def transformers_fields():
    """{name: default} of the installed transformers' TrainingArguments fields npbert has not."""
    transformers = pytest.importorskip("transformers")
    out = {}
    for f in dataclasses.fields(transformers.TrainingArguments):
        if f.name in NPBERT_FIELDS or f.name in ALIASES or not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = None
    return out


def test_every_transformers_field_is_known():
    """Each field of transformers' TrainingArguments is npbert's, ignored or refused: none is a
    TypeError; at transformers' default none warns or is refused."""
    theirs = transformers_fields()
    assert len(theirs) > 50                                   # (the list did come from transformers)
    unknown = sorted(set(theirs) - set(IGNORED) - set(REFUSED))
    assert not unknown, f"transformers fields npbert does not know: {unknown}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                        # a default is no request: no warning
        for name, default in theirs.items():
            args = TrainingArguments("out", **{name: default})
            assert name in args.ignored_args and getattr(args, name) is default


def test_the_tutorial_keywords_are_kept_with_one_note(caplog):
    kwargs = dict(report_to="none", logging_dir="./logs", push_to_hub=False, hub_model_id="me/model",
                  hub_strategy="every_save", run_name="bert-run", disable_tqdm=False, fp16=True)
    with caplog.at_level(logging.INFO, logger="npbert"), pytest.warns(UserWarning) as caught:
        args = TrainingArguments("out", learning_rate=2e-5, **kwargs)
    assert args.learning_rate == 2e-5
    assert args.ignored_args == kwargs
    assert args.report_to == "none" and args.logging_dir == "./logs" and args.hub_model_id == "me/model"
    assert not set(kwargs) & set(args.to_dict())              # not saved in training_args.json
    notes = [r.getMessage() for r in caplog.records if r.name == "npbert.training.offline_args"]
    assert len(notes) == len(kwargs) and all("is not used" in n for n in notes)
    assert any("report_to" in n and "tracker" in n for n in notes)
    mine = [str(w.message) for w in caught if "ignored" in str(w.message)]
    assert len(mine) == 1                                     # one line for the whole call
    for requested in ("logging_dir='./logs'", "hub_model_id='me/model'", "run_name='bert-run'", "fp16=True"):
        assert requested in mine[0]
    for default in ("report_to", "push_to_hub", "hub_strategy", "disable_tqdm"):
        assert default not in mine[0]                         # transformers' defaults ask for nothing


def test_no_warning_for_what_asks_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainingArguments("out", report_to=[], push_to_hub=False, disable_tqdm=None, dataloader_num_workers=0,
                          label_smoothing_factor=0.0)


@pytest.mark.parametrize("kwargs,match", [
    ({"push_to_hub": True}, "uploads nothing"),
    ({"label_smoothing_factor": 0.1}, "no label smoothing"),
    ({"neftune_noise_alpha": 5.0}, "NEFTune"),
    ({"data_seed": 3}, "set seed instead"),
    ({"optim_args": "foo=1"}, "adam_beta1")])
def test_what_would_change_the_model_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainingArguments("out", **kwargs)


@pytest.mark.parametrize("wrong,right", [("learing_rate", "learning_rate"),
                                         ("per_device_train_batchsize", "per_device_train_batch_size"),
                                         ("num_epochs", "num_train_epochs"),
                                         ("report_too", "report_to"),
                                         ("eval_stratgy", "eval_strategy")])
def test_a_misspelled_keyword_names_the_closest(wrong, right):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{wrong}': did you mean '{right}'"):
        TrainingArguments("out", **{wrong: 1})
    with pytest.raises(TypeError, match="see docs/training.md"):
        TrainingArguments("out", zzzzqqq=1)


def test_transformers_4_evaluation_strategy_is_eval_strategy():
    with pytest.warns(FutureWarning, match="old name of `eval_strategy`"):
        args = TrainingArguments("out", evaluation_strategy="epoch")
    assert args.eval_strategy == "epoch"
    with pytest.raises(ValueError, match="give `eval_strategy` only"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TrainingArguments("out", evaluation_strategy="epoch", eval_strategy="epoch")


def test_the_command_line_fields_are_npbert_s_own():
    """The ignored keywords are no dataclass fields: `npbert finetune --help` does not list them."""
    assert not NPBERT_FIELDS & set(IGNORED)
    assert not NPBERT_FIELDS & set(REFUSED)
