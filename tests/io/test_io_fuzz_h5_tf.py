"""Random corruption of the HDF5 and TF-index fixtures: a CheckpointError or
a consistent load, never another exception."""
import os
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npbert.io import CheckpointError, read_state_dict, write_npbert_h5

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.fixture
def sources(tmp_path):
    write_npbert_h5(tmp_path / "n.h5", {"a.w": np.arange(12, dtype=np.float32).reshape(3, 4),
                                        "a.b": np.ones(4)}, {"hidden_size": 4})
    return {"npbert-h5": tmp_path / "n.h5",
            "keras-h5": os.path.join(FIXTURES, "tf_model_h5", "tf_model.h5"),
            "tf-index": os.path.join(FIXTURES, "google", "bert_model.ckpt.index")}


@settings(max_examples=90, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz(tmp_path, sources, data):
    kind = data.draw(st.sampled_from(sorted(sources)))
    raw = bytearray(open(sources[kind], "rb").read())
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    if kind == "tf-index":
        shutil.copy(os.path.join(FIXTURES, "google", "bert_model.ckpt.data-00000-of-00001"), work)
        target = work / "bert_model.ckpt.index"
    else:
        target = work / "model.h5"
    target.write_bytes(bytes(raw))
    try:
        got = read_state_dict(target)
    except CheckpointError:
        return
    assert all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in got.items())
