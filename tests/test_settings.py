"""The attributes the docs tell a user to set are checked when set (issue 48, item 3).

Each owning class lists its settable attributes in `SETTINGS` (npbert/settings.py).  Here, for
every entry of every table: a value of the wrong type (the issue's `"32"`) is refused at the
assignment with a TypeError naming `<Class>.<name>`, what it accepts and the value, and the
attribute keeps its value; a value of the right type out of range is a ValueError; the
documented good values are taken and read back.  A docs scan fails when a page tells the user to
set an attribute that no table holds (and no exemption below explains)."""
import glob
import os
import re

import numpy as np
import pytest

import npbert
from npbert import optim
from npbert.config import BertConfig
from npbert.modeling.encoder import BertEncoder
from npbert.modeling.module import ModelState
from npbert.modeling.leaf_modules import Dropout
from npbert.modeling.parameter import Parameter
from npbert.optim.optimizer import Optimizer

pytestmark = pytest.mark.usefixtures("npbert_path")          # each model test on the fast and reference paths

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWNERS = (BertEncoder, Dropout, ModelState, Parameter, BertConfig, Optimizer)


def tiny(**kw):
    config = npbert.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=64, **kw)
    return npbert.BertForSequenceClassification(config, seed=0, dtype=np.float64)


def owner_of(cls_name, model):
    """The object holding the table of `cls_name` in a built model (or an optimizer of it)."""
    return {"BertEncoder": lambda: model.bert.encoder, "Dropout": lambda: model.bert.embeddings.dropout,
            "ModelState": lambda: model.state, "Parameter": lambda: model.classifier.weight,
            "BertConfig": lambda: model.config,
            "Optimizer": lambda: optim.AdamW(model.parameters(), lr=1e-3)}[cls_name]()


# (class, setting) -> (documented good values, a value of the wrong type, a value out of range or None)
EXAMPLES = {
    ("BertEncoder", "attention_tiles_from"): ([32, 512, None, np.int64(8), 1], "32", 0),
    ("BertEncoder", "gradient_checkpointing"): ([True, False], "yes", None),
    ("Dropout", "p"): ([0.0, 0.1, 0.5, 1.0], "0.1", 1.5),
    ("ModelState", "need_inputs_embeds_grad"): ([True, False], "False", None),
    ("Parameter", "requires_grad"): ([False, True], "no", None),
    ("BertConfig", "hidden_dropout_prob"): ([0.0, 0.1, 0.3], "0.1", -0.1),
    ("BertConfig", "attention_probs_dropout_prob"): ([0.0, 0.1], "0.1", 2.0),
    ("BertConfig", "classifier_dropout"): ([None, 0.2], "0.2", float("nan")),
    ("BertConfig", "gather_masked_lm"): ([True, False], "true", None),
    ("BertConfig", "is_decoder"): ([False, True], 1, None),
    ("Optimizer", "nonfinite"): (["raise", "skip", "apply"], 1, "ignore"),
}


def test_the_examples_cover_every_table():
    """A setting added to a table without examples here fails, so each one is tested below."""
    tables = {(cls.__name__, name) for cls in OWNERS for name in cls.SETTINGS}
    assert tables == set(EXAMPLES), tables ^ set(EXAMPLES)


@pytest.mark.parametrize("cls_name,name", sorted(EXAMPLES))
def test_a_wrong_type_is_refused_where_it_is_set(cls_name, name):
    model = tiny()                                  # (kept alive: a Parameter needs its model)
    owner = owner_of(cls_name, model)
    good, wrong_type, out_of_range = EXAMPLES[(cls_name, name)]
    before = getattr(owner, name, "unset")                     # (gather_masked_lm: unset until set)
    with pytest.raises(TypeError) as e:
        setattr(owner, name, wrong_type)
    message = str(e.value)
    shown = f"requires_grad of parameter 'classifier.weight'" if cls_name == "Parameter" else \
        f"{'AdamW' if cls_name == 'Optimizer' else cls_name}.{name}"
    assert message.startswith(f"{shown} must be "), message
    assert message.endswith(f", got {wrong_type!r} ({type(wrong_type).__name__})"), message
    assert getattr(owner, name, "unset") == before              # refused: the old value stays
    if out_of_range is not None:
        with pytest.raises(ValueError, match=re.escape(f"{shown} must be ")):
            setattr(owner, name, out_of_range)
        assert getattr(owner, name, "unset") == before
    for value in good:
        setattr(owner, name, value)
        assert getattr(owner, name) == value and type(getattr(owner, name)) is type(value if not isinstance(
            value, np.integer) else int(value))


def test_the_issues_case_names_the_setting_and_the_tiles_still_work():
    """`attention_tiles_from = "32"` stops at the assignment with the issue's message; 32 and None
    give the same outputs on 40 tokens (tiles against the full op, float64: both sum the same
    products in another order, so they agree to round-off; 1e-12 is ~1e4 ulps of values ~1)."""
    model = tiny().eval()
    with pytest.raises(TypeError, match=re.escape("BertEncoder.attention_tiles_from must be a positive int or None, "
                                                  "got '32' (str)")):
        model.bert.encoder.attention_tiles_from = "32"
    ids = np.random.default_rng(0).integers(5, 40, size=(1, 40))
    model.bert.encoder.attention_tiles_from = 32
    tiled = model(input_ids=ids).logits
    model.bert.encoder.attention_tiles_from = None
    full = model(input_ids=ids).logits
    np.testing.assert_allclose(tiled, full, rtol=0, atol=1e-12)


def test_a_config_file_with_a_wrong_type_names_the_setting_and_the_file(tmp_path):
    tiny().save_pretrained(str(tmp_path))
    text = (tmp_path / "config.json").read_text().replace('"hidden_dropout_prob": 0.1', '"hidden_dropout_prob": "0.1"')
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(TypeError) as e:
        npbert.BertConfig.from_pretrained(str(tmp_path))
    assert str(tmp_path / "config.json") in str(e.value) and "BertConfig.hidden_dropout_prob must be" in str(e.value)


# ---- the docs: every attribute they tell a user to set is in a table ---------------------------------------

ASSIGNMENT = re.compile(r"(?<![\w.])((?!self\.)[A-Za-z_][\w\[\]]*(?:\.[A-Za-z_]\w*)*)\.([A-Za-z_]\w*) ?= ?(?!=)")

# Attribute names the docs show assigned that are not a user's setting of an npbert object, or are
# checked elsewhere.  Each with why.
NOT_SETTINGS = {
    "weight": "a gradient's formula (dword_embeddings.weight = scatter_add(...)) or torch's tying line",
    "ndarray": "a dataclass field's annotation (np.ndarray = None)",
    "num_labels": "BertConfig.num_labels is a property whose setter resizes id2label (int(n))",
    "layer_norm_eps": "a formula line (eps = config.layer_norm_eps = 1e-12)",
    "dps": "mpmath's precision (docs/gelu.md)",
    "state": "numpy's bit_generator.state",
    "max_position_embeddings": "a size set on a config before building: BertConfig.validate() checks the sizes "
                               "when a model is built (a config.json's wrong size names the file there)",
    "grad": "Parameter.grad's own setter checks the array, its shape and dtype",
    "scaling": "a formula (BertSelfAttention.scaling = 1/sqrt(D))",
    "overwrite_output_dir": "TrainingArguments keywords (checked by TrainingArguments.__post_init__)",
    "ignore_changed_args": "TrainingArguments keywords (checked by TrainingArguments.__post_init__)",
    "pad_token_id": "the tokenizer's (npbert/tokenization/, owned by another change; left for it)",
    "deprecation_warnings": "the tokenizer's (npbert/tokenization/, owned by another change; left for it)",
}


def documented_assignments():
    found = set()
    for path in sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)) + \
            [os.path.join(REPO, "README.md")]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                found.update(m.group(2) for m in ASSIGNMENT.finditer(line))
    return found


def test_every_setting_the_docs_show_is_checked_or_explained():
    names = documented_assignments()
    assert {"attention_tiles_from", "nonfinite", "gather_masked_lm", "requires_grad"} <= names   # the scan finds them
    tables = {name for cls in OWNERS for name in cls.SETTINGS}
    unexplained = names - tables - set(NOT_SETTINGS)
    assert not unexplained, f"the docs set {sorted(unexplained)}: add each to its class's SETTINGS (npbert/settings.py)"


def test_the_thread_count_is_checked_where_it_is_set():
    """npbert's thread count is set by a function (docs/performance.md: set_num_threads(n)): a
    string or a float is refused naming it, not turned into a number by int()."""
    from npbert.fast import parallel
    before = parallel.get_num_threads()
    try:
        for wrong in ("4", 2.5, None, True):
            with pytest.raises(TypeError, match=re.escape(f"set_num_threads: the number of threads must be a positive "
                                                          f"int, got {wrong!r} ({type(wrong).__name__})")):
                parallel.set_num_threads(wrong)
            assert parallel.get_num_threads() == before
        with pytest.raises(ValueError, match="must be a positive int, got 0"):
            parallel.set_num_threads(0)
        for good in (1, np.int64(2)):
            parallel.set_num_threads(good)
            assert parallel.get_num_threads() == good and type(parallel.get_num_threads()) is int
    finally:
        parallel.set_num_threads(before)


def test_every_settings_table_is_tested():
    """A class that gains a non-empty SETTINGS table (grep of npbert/; Module's empty base table
    aside) is one of OWNERS, so its entries get the tests above."""
    found = set()
    for path in glob.glob(os.path.join(REPO, "npbert", "**", "*.py"), recursive=True):
        text = open(path, encoding="utf-8").read()
        for match in re.finditer(r"^class (\w+)\b[^\n]*\n(?:(?!^class )[\s\S])*?^    SETTINGS = \{(?!\})", text, re.M):
            found.add(match.group(1))
    assert found == {cls.__name__ for cls in OWNERS}, found
