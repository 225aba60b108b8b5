"""One model shared by several threads (npbert/modeling/call.py, pretrained.py: _check_own_forward).

Forward calls work side by side: each thread's call options are its own, so one thread asking
for intermediates while another runs under npbert.no_grad() gets them every time, with the
numbers of a call made alone.  A backward after another thread's forward is refused with a
message, instead of differentiating that other thread's forward.
"""
import threading

import numpy as np
import pytest

import npbert

from modeling.bert_helpers import random_batch, random_model, tiny_config


def test_intermediates_and_no_grad_in_two_threads():
    """200 rounds of two threads released together by a barrier: thread A calls
    model(..., output_intermediates=True), thread B model(...) under no_grad.  Every call of A
    returns its intermediates, and both threads' outputs equal the single-threaded ones exactly
    (the same arithmetic on the same inputs)."""
    model = random_model(tiny_config(num_hidden_layers=2), seed=3).eval()      # on each path (conftest)
    ids_a, types_a, mask_a = random_batch(model.config, 3, 7, seed=1)
    ids_b, types_b, mask_b = random_batch(model.config, 2, 5, seed=2)
    want_a = model(input_ids=ids_a, token_type_ids=types_a, attention_mask=mask_a, output_intermediates=True)
    with npbert.no_grad():
        want_b = model(input_ids=ids_b, token_type_ids=types_b, attention_mask=mask_b)
    rounds = 200
    barrier = threading.Barrier(2)
    problems = []

    def thread_a():
        for i in range(rounds):
            barrier.wait()
            out = model(input_ids=ids_a, token_type_ids=types_a, attention_mask=mask_a, output_intermediates=True)
            if out.intermediates is None:
                problems.append(f"round {i}: A's intermediates lost")
            elif not (np.array_equal(out.last_hidden_state, want_a.last_hidden_state)
                      and np.array_equal(out.intermediates.attentions[1], want_a.intermediates.attentions[1])):
                problems.append(f"round {i}: A's numbers differ")

    def thread_b():
        for i in range(rounds):
            barrier.wait()
            with npbert.no_grad():
                out = model(input_ids=ids_b, token_type_ids=types_b, attention_mask=mask_b)
            if not np.array_equal(out.last_hidden_state, want_b.last_hidden_state):
                problems.append(f"round {i}: B's numbers differ")

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []


def test_a_backward_after_another_threads_forward_is_refused():
    """Thread A runs a forward with labels, then thread B a forward of its own; A's backward()
    refuses, naming the cause and the remedy.  After B's thread ends, B's forward is still the
    last one, so the main thread's backward is refused too; a new forward here makes it work."""
    config = tiny_config(num_hidden_layers=1)
    model = npbert.BertForSequenceClassification(config).train()
    ids, types, mask = random_batch(config, 2, 5, seed=4)
    labels = np.array([0, 1])
    model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    other = threading.Thread(target=lambda: model(input_ids=ids, labels=labels))
    other.start()
    other.join()
    with pytest.raises(RuntimeError, match="the last forward call of this model ran in another thread"):
        model.backward()
    model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels)
    grads = model.backward()
    assert np.abs(grads["classifier.weight"]).max() > 0
