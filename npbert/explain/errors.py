"""The one error npbert.explain raises for what its caller gave it (a text, a label, a tokenizer
that does not fit the model): a ValueError whose message says what to give instead."""


class ExplainError(ValueError):
    """What was given cannot be shown: the message names it and says what to give instead."""
