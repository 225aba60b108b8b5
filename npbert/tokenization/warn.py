"""The tokenizer's warnings, given both ways: to the `npbert` logger (`npbert.tokenization`, as
transformers logs through its `transformers` logger) and through `warnings.warn` (what
`pytest.warns` and `warnings.filterwarnings` see)."""
import logging
import warnings

logger = logging.getLogger("npbert.tokenization")


def warn(message, stacklevel=3):
    """Log `message` as a warning and issue it as a UserWarning from the caller's caller."""
    logger.warning(message)
    warnings.warn(message, UserWarning, stacklevel=stacklevel)
