"""torch runs on one thread in these tests: they compare numbers on tiny batches, where torch's
second thread only waits at barriers (on a loaded machine a forward of 11 tokens took 0.2-0.9 s
with two threads, 0.02-0.08 s with one, measured).  Restored afterwards."""
import pytest


@pytest.fixture(scope="session", autouse=True)
def _torch_on_one_thread():
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
