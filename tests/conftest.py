"""Makes `tests/` importable from every test folder (pytest puts a conftest's folder on
sys.path), for helpers shared across folders such as `google_reference`.  Helper modules are
named in snake_case by what they hold: a folder's shared helpers `<subject>_helpers.py`
(`heads/head_helpers.py`, `training/training_helpers.py`), a reference or a data set by its
name (`google_reference.py`, `bert_batches.py`, `tokenization/tokenization_corpus.py`).

`npbert_path`: runs a test on both paths, npbert.set_path("fast") and ("reference") (the model's
modules then run their fast twins or their reference code; npbert/modeling/module.py).  The
folders whose every test should hold on both (tests/modeling, tests/heads) use it from their
conftest; a single module can with `pytestmark = pytest.mark.usefixtures("npbert_path")`."""
import pytest

import npbert


@pytest.fixture(scope="module", params=["fast", "reference"])     # module scope: usable with hypothesis
def npbert_path(request):
    with npbert.using_path(request.param):
        yield request.param
