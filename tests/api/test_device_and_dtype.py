"""model.to(device | dtype | tensor), .cpu(), .cuda(), .double(), .float(), as tutorials call
them (issue "Tutorial code from anywhere"): the CPU is the model itself, any other device an
error that says npbert is CPU-only, a dtype converts every parameter."""
import numpy as np
import pytest

import npbert

torch = pytest.importorskip("torch")
TINY = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)


def model_and_ids():
    return npbert.BertForSequenceClassification(npbert.BertConfig(**TINY)).eval(), np.array([[2, 5, 6, 3], [2, 7, 3, 0]])


@pytest.mark.parametrize("device", ["cpu", "cpu:0", torch.device("cpu"), "CPU"])
def test_the_cpu_is_the_model_itself(device):
    model, ids = model_and_ids()
    before = {n: p for n, p in model.named_parameters()}
    assert model.to(device) is model and model.cpu() is model
    assert all(p is before[n] for n, p in model.named_parameters())          # nothing copied, nothing changed


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda"), 0, "mps"])
def test_another_device_is_an_error_saying_npbert_runs_on_the_cpu(device):
    model, _ = model_and_ids()
    with pytest.raises(RuntimeError, match="CPU only"):
        model.to(device)
    with pytest.raises(RuntimeError, match="CPU only"):
        model.cuda()


@pytest.mark.parametrize("how", ["to_torch", "to_numpy", "to_name", "double", "to_tensor", "to_keyword"])
def test_a_dtype_converts_every_parameter_and_the_numbers_follow(how):
    """float32 -> float64: the parameters are the float32 values exactly (widening is exact), so the
    float64 logits differ from the float32 ones by float32 round-off only (5e-6 relative on values
    ~0.1, 10 ops of ~16-term sums); back to float32 the parameters are bit-equal to the start."""
    model, ids = model_and_ids()
    start = {n: p.copy() for n, p in model.named_parameters()}
    want = model(input_ids=ids).logits
    convert = {"to_torch": lambda: model.to(torch.float64), "to_numpy": lambda: model.to(np.float64),
               "to_name": lambda: model.to("float64"), "double": model.double,
               "to_tensor": lambda: model.to(torch.zeros(1, dtype=torch.float64)),
               "to_keyword": lambda: model.to(device="cpu", dtype=torch.float64)}[how]
    assert convert() is model
    assert model.dtype == np.float64 and all(p.dtype == np.float64 for p in model.parameters())
    got = model(input_ids=ids).logits
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=5e-6, atol=1e-7)
    model.float()
    assert all(np.array_equal(p, start[n]) and p.dtype == np.float32 for n, p in model.named_parameters())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, np.int64, "float16"])
def test_a_dtype_npbert_does_not_compute_in_is_refused(dtype):
    model, _ = model_and_ids()
    with pytest.raises(TypeError, match="float32 or float64"):
        model.to(dtype)
    assert model.dtype == np.float32


def test_a_converted_model_trains_like_one_built_in_that_dtype():
    """After .double(), a backward runs in float64 and equals a model built in float64 from the same
    (float32-exact) parameters, bit for bit: the same arithmetic."""
    model, ids = model_and_ids()
    twin = npbert.BertForSequenceClassification(npbert.BertConfig(**TINY), dtype=np.float64).eval()
    twin.load_state_dict({n: p.astype(np.float64) for n, p in model.state_dict().items()})
    model.double()
    model(input_ids=ids, labels=np.array([1, 0]))
    twin(input_ids=ids, labels=np.array([1, 0]))
    a, b = model.backward(), twin.backward()
    assert all(np.array_equal(a[k], b[k]) for k in a)
