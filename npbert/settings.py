"""The attributes a user sets on a built object, checked when set (issue 48, item 3).

The docs tell a user to set a few attributes by hand (`model.bert.encoder.attention_tiles_from
= 32`, `opt.nonfinite = "skip"`, `model.config.gather_masked_lm = True`, ...).  A value of the
wrong type used to pass and fail later, far away, without the setting's name (`TypeError: '>='
not supported between instances of 'int' and 'str'` from the encoder's forward).  Each owning
class now lists its settable attributes in one table, `SETTINGS = {name: Setting}`, and checks
an assignment against it at once (its __setattr__, or the property setter):

    BertEncoder     attention_tiles_from, gradient_checkpointing   npbert/modeling/encoder.py
    Dropout         p                                              npbert/modeling/leaf_modules.py
    ModelState      need_inputs_embeds_grad                        npbert/modeling/module.py
    Parameter       requires_grad                                  npbert/modeling/parameter.py
    BertConfig      hidden_dropout_prob, attention_probs_dropout_prob, classifier_dropout,
                    gather_masked_lm, is_decoder                   npbert/config.py
    Optimizer       nonfinite                                      npbert/optim/optimizer.py

A wrong type is a TypeError, a value of the right type out of range a ValueError, both saying
`<Class>.<name> must be <what it accepts>, got <value> (<type>)`.  npbert's thread count is set
by a function, `npbert.fast.parallel.set_num_threads(n)`, which checks its argument the same way
(check_value).
"""
import numbers

import numpy as np


class Setting:
    """One settable attribute: `accepts`, the words of the message ("a positive int or None"),
    and `check(value)`, which returns the value to store or raises TypeError (a wrong type) or
    ValueError (a value out of range) with a short reason (or none)."""

    def __init__(self, accepts, check):
        self.accepts = accepts
        self.check = check

    def __repr__(self):
        return f"Setting({self.accepts!r})"


def _integer(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def _real(value):
    return isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_))


def _positive_int_or_none(value):
    if value is None:
        return None
    if not _integer(value):
        raise TypeError
    if value < 1:
        raise ValueError
    return int(value)


def _bool(value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError
    return bool(value)


def _probability(value):
    if not _real(value):
        raise TypeError
    if not 0.0 <= value <= 1.0:                 # (nan fails too)
        raise ValueError
    return value


def _probability_or_none(value):
    return None if value is None else _probability(value)


def _positive_int(value):
    if value is None:
        raise TypeError
    return _positive_int_or_none(value)


POSITIVE_INT = Setting("a positive int", _positive_int)
POSITIVE_INT_OR_NONE = Setting("a positive int or None", _positive_int_or_none)
BOOL = Setting("a bool (True or False)", _bool)
PROBABILITY = Setting("a number in [0, 1]", _probability)
PROBABILITY_OR_NONE = Setting("a number in [0, 1] or None", _probability_or_none)


def one_of(choices):
    """A Setting accepting exactly one of `choices` (strings)."""
    def check(value):
        if not isinstance(value, str):
            raise TypeError
        if value not in choices:
            raise ValueError
        return value
    return Setting(f"one of {tuple(choices)}", check)


def checked(owner, name, value, where=None):
    """The value to store for `owner.name = value`: `value` as its class's SETTINGS table
    accepts it (ints of numpy made int, ...), or a TypeError / ValueError naming the setting
    (`where`, default "<Class>.<name>").  Names outside the table are returned unchanged."""
    setting = type(owner).SETTINGS.get(name)
    if setting is None:
        return value
    owner_name = type(owner).__name__.removeprefix("Fast")      # a fast twin is named as its class (Module.__repr__)
    return check_value(where or f"{owner_name}.{name}", setting, value)


def check_value(where, setting, value):
    """`value` as `setting` accepts it, or a TypeError / ValueError saying `<where> must be ...`
    (also for a function's argument that sets something: set_num_threads(n))."""
    try:
        return setting.check(value)
    except (TypeError, ValueError) as e:
        kind = type(e)
    raise kind(f"{where} must be {setting.accepts}, got {value!r} ({type(value).__name__})") from None
