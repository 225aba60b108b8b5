"""`F`: the op namespace of one path, npbert.ops (the reference ops) or npbert.fast (their fast
twins, the same names).  A test that takes `F` runs on both, so every finite-difference,
torch-parity and property test of an op holds for the reference op and for its fast twin."""
import pytest

import npbert.fast
import npbert.ops


@pytest.fixture(scope="module", params=["reference", "fast"])      # module scope: usable with hypothesis
def F(request):
    return npbert.ops if request.param == "reference" else npbert.fast
