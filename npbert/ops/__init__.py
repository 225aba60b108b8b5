"""Leaf ops: pure forward/backward function pairs with no model knowledge.

    <op>_forward(inputs..., params...) -> (out, cache)
    <op>_backward(dout, cache)         -> dinput, or (dinput, {param name: dparam})

Every op computes in its input's dtype (float32 or float64) and never mutates its arguments.
"""
from npbert.ops.parallel import get_num_threads, set_num_threads
