"""The stages `npbert explain --html` shows: every tensor of the forward pass as npbert/reference.py
computes it from the parameters (the activations its functions keep under a name, the ones the text
`explain` prints), and the gradient of the same loss with respect to each of them, stage by stage,
from the top down (the steps of reference.bert_layer_backward, one named tensor per line).

    B = batch, T = sequence length (keys), F = sequence length (queries),
    H = hidden size, N = attention heads, D = H / N head size, I = intermediate size

Forward: run_forward(p, config, ids, types) -> (acts, caches); acts["embeddings"][name],
acts["layers"][i][name], acts["pooler"][name] (None without a pooler).  Backward: run_backward(...) ->
grads of the same
structure.  STAGES lists the stages in order with their transformers module, formula, dims and the
text of the reference.py line that computes them (found in the source: source_line).
"""
import inspect

import numpy as np

from npbert import reference
from npbert.ops.activations import get_activation, tanh_backward
from npbert.ops.attention import attention_backward
from npbert.ops.dropout import dropout_backward
from npbert.ops.layer_norm import layer_norm_backward
from npbert.ops.linear import linear_backward
from npbert.ops.softmax import softmax_backward

# (key, transformers module path ("{i}": the layer), label, formula, dims, docs page, the
#  reference.py function and a piece of the line in it that computes the stage)
EMBEDDINGS = [
    ("word", "embeddings.word_embeddings", "word embeddings", "word_embeddings.weight[input_ids]",
     "B,T,H", "embeddings.md", reference.embeddings_forward, 'word, c["word"]'),
    ("token_type", "embeddings.token_type_embeddings", "token type embeddings",
     "token_type_embeddings.weight[token_type_ids]", "B,T,H", "embeddings.md", reference.embeddings_forward,
     'types, c["type"]'),
    ("position", "embeddings.position_embeddings", "position embeddings",
     "position_embeddings.weight[position_ids]", "B,T,H", "embeddings.md", reference.embeddings_forward,
     'positions, c["pos"]'),
    ("sum", "embeddings", "sum of the three", "word + token_type + position", "B,T,H", "embeddings.md",
     reference.embeddings_forward, "summed = word"),
    ("embeddings", "embeddings.LayerNorm", "embeddings LayerNorm  (hidden_states[0])",
     "LayerNorm(sum) = gamma (sum - mean) / sqrt(var + eps) + beta", "B,T,H", "embeddings.md",
     reference.embeddings_forward, 'x, c["ln"]'),
]
LAYER = [
    ("query", "encoder.layer.{i}.attention.self.query", "Q, per head", "Q = x W_q^T + b_q, split into N heads",
     "B,N,F,D", "attention.md", reference.bert_layer_forward, 'q, c["q"]'),
    ("key", "encoder.layer.{i}.attention.self.key", "K, per head", "K = x W_k^T + b_k, split into N heads",
     "B,N,T,D", "attention.md", reference.bert_layer_forward, 'k, c["k"]'),
    ("value", "encoder.layer.{i}.attention.self.value", "V, per head", "V = x W_v^T + b_v, split into N heads",
     "B,N,T,D", "attention.md", reference.bert_layer_forward, 'v, c["v"]'),
    ("scores", "encoder.layer.{i}.attention.self", "attention scores", "scores = Q K^T / sqrt(D) + mask",
     "B,N,F,T", "attention.md", reference.bert_layer_forward, 'ctx, c["attn"] = attention_forward'),
    ("probs", "encoder.layer.{i}.attention.self", "attention probabilities  (attentions[i])",
     "probs = softmax(scores) over T", "B,N,F,T", "attention.md", reference.bert_layer_forward,
     'ctx, c["attn"] = attention_forward'),
    ("context", "encoder.layer.{i}.attention.self", "context, heads merged",
     "context = probs V, then (B, N, F, D) -> (B, F, H)", "B,F,H", "attention.md", reference.bert_layer_forward,
     "ctx = ctx.transpose"),
    ("attention_dense", "encoder.layer.{i}.attention.output.dense", "attention output dense",
     "context W_o^T + b_o", "B,T,H", "attention.md", reference.bert_layer_forward, 'dense, c["ao"]'),
    ("attention_output", "encoder.layer.{i}.attention.output.LayerNorm", "attention output LayerNorm",
     "a = LayerNorm(dense + x)   (residual)", "B,T,H", "attention.md", reference.bert_layer_forward,
     'a, c["ao_ln"]'),
    ("intermediate_dense", "encoder.layer.{i}.intermediate.dense", "intermediate dense",
     "a W_1^T + b_1", "B,T,I", "feed_forward.md", reference.bert_layer_forward, 'h, c["inter"]'),
    ("intermediate", "encoder.layer.{i}.intermediate.intermediate_act_fn", "activation  (hidden_act)",
     "act(intermediate dense)", "B,T,I", "gelu.md", reference.bert_layer_forward, 'inter, c["act"]'),
    ("output_dense", "encoder.layer.{i}.output.dense", "output dense", "act(...) W_2^T + b_2", "B,T,H",
     "feed_forward.md", reference.bert_layer_forward, 'out, c["out"]'),
    ("layer_output", "encoder.layer.{i}.output.LayerNorm", "output LayerNorm  (hidden_states[i+1])",
     "y = LayerNorm(output dense + a)   (residual)", "B,T,H", "encoder.md", reference.bert_layer_forward,
     'y, c["out_ln"]'),
]
POOLER = [
    ("first", "pooler", "last_hidden_state[:, 0]  ([CLS]; its gradient: the pooler's part)", "h[:, 0]", "B,H", "encoder.md",
     reference.pooler_forward, 'h[:, 0])'),
    ("dense", "pooler.dense", "pooler dense", "h[:, 0] W_p^T + b_p", "B,H", "encoder.md", reference.pooler_forward,
     '_linear(p, "pooler.dense"'),
    ("pooled", "pooler.activation", "tanh  (pooler_output)", "pooler_output = tanh(dense)", "B,H", "encoder.md",
     reference.pooler_forward, "pooled, tanh_cache = tanh_forward"),
]
SECTIONS = (("embeddings", EMBEDDINGS), ("layer", LAYER), ("pooler", POOLER))   # the head: explain_heads.py


def source_line(function, piece):
    """The 1-based line of `function`'s file (npbert/reference.py, or the head's module) that
    contains `piece`, in `function` (read from the source, so the links follow the file)."""
    lines, start = inspect.getsourcelines(function)
    for k, line in enumerate(lines):
        if piece in line:
            return start + k
    raise LookupError(f"{inspect.getsourcefile(function)}: no line with {piece!r} in {function.__qualname__}: "
                      "update npbert/cli/explain_stages.py")


# ---- the forward ------------------------------------------------------------------------------

def run_forward(p, config, ids, token_type_ids):
    """Every stage's tensor, computed from the parameters p by npbert/reference.py (eval: no
    dropout); attention over all T tokens (one sentence or one pair, no padding).
    Returns (acts, caches) with acts = {"embeddings": {...}, "layers": [{...}, ...], "pooler": {...}}."""
    B, T = ids.shape
    dtype = p["embeddings.word_embeddings.weight"].dtype
    D = config.hidden_size // config.num_attention_heads
    position_ids = np.arange(T)[None, :].repeat(B, axis=0)                          # (B, T)
    x, emb_cache = reference.embeddings_forward(p, config, ids, token_type_ids, position_ids)   # (B, T, H)
    mask = np.zeros((B, 1, 1, T), dtype=dtype)                                       # (B, 1, 1, T): all attended
    acts = {"embeddings": dict(emb_cache["acts"]), "layers": [], "pooler": None}
    layer_caches = []
    for i in range(config.num_hidden_layers):
        x, _, cache = reference.bert_layer_forward(p, config, i, x, mask)
        a = dict(cache["acts"])
        a["scores"] = a["query"] @ a["key"].transpose(0, 1, 3, 2) * dtype.type(D ** -0.5) + mask   # (B, N, F, T)
        acts["layers"].append(a)
        layer_caches.append(cache)
    pooler_cache = None                                                              # a checkpoint without a pooler
    if "pooler.dense.weight" in p:
        pooled, pooler_cache = reference.pooler_forward(p, x)                        # (B, H)
        acts["pooler"] = dict(pooler_cache[-1])
    return acts, (emb_cache, layer_caches, pooler_cache)


# ---- the backward, one named gradient per stage ------------------------------------------------

def _layer_backward(p, config, i, dy, c):
    """Layer i's backward as reference.bert_layer_backward computes it (eval), keeping the gradient of
    each stage.  dy: d layer_output (B, T, H).  Returns ({stage: gradient}, dx (B, T, H))."""
    B, T, H = dy.shape
    N = config.num_attention_heads
    g = {"layer_output": dy}
    # y = LayerNorm(output.dense(h) + a)
    dsum, _ = layer_norm_backward(dy, c["out_ln"])                                   # (B, T, H)
    g["output_dense"] = dropout_backward(dsum, c["out_drop"])                        # (B, T, H)
    # output_dense = h W_2^T + b_2
    g["intermediate"], _ = linear_backward(g["output_dense"], c["out"])             # (B, T, I)
    # h = act(intermediate.dense(a))
    _, act_backward = get_activation(config.hidden_act)
    g["intermediate_dense"] = act_backward(g["intermediate"], c["act"])              # (B, T, I)
    da, _ = linear_backward(g["intermediate_dense"], c["inter"])                     # (B, T, H)
    g["attention_output"] = da + dsum                                                # a fed the FFN and its residual
    # a = LayerNorm(attention.output.dense(ctx) + x)
    dsum, _ = layer_norm_backward(g["attention_output"], c["ao_ln"])                 # (B, T, H)
    g["attention_dense"] = dropout_backward(dsum, c["ao_drop"])
    g["context"], _ = linear_backward(g["attention_dense"], c["ao"])                 # (B, F, H)
    # context = probs V, heads merged; probs = softmax(scores)
    attn = c["attn"]
    dctx = g["context"].reshape(B, T, N, H // N).transpose(0, 2, 1, 3)              # (B, N, F, D)
    g["probs"] = dctx @ attn["v"].transpose(0, 1, 3, 2)                              # (B, N, F, T)
    g["scores"] = softmax_backward(dropout_backward(g["probs"], attn["dropout"]), attn["softmax"])   # (B, N, F, T)
    dq, dk, dv = attention_backward(dctx, attn)                                     # (B, N, F|T, D), the op itself
    g["query"], g["key"], g["value"] = dq, dk, dv
    dx = sum(linear_backward(d.transpose(0, 2, 1, 3).reshape(B, T, H), c[name])[0]   # x fed Q, K, V
             for d, name in ((dq, "q"), (dk, "k"), (dv, "v")))
    return g, dx + dsum                                                              # ... and the residual


def run_backward(p, config, caches, dpooler_output, dlast_hidden_state):
    """The gradient of loss = sum(pooler_output * dpooler_output) + sum(last_hidden_state *
    dlast_hidden_state) with respect to every stage (dpooler_output None: the loss does not read
    the pooler).  Returns (grads, layer_inputs) with grads shaped like run_forward's acts and
    layer_inputs[i] = (dy, dx) of layer i, for checking."""
    emb_cache, layer_caches, pooler_cache = caches
    grads = {"pooler": None, "layers": [None] * config.num_hidden_layers}
    dx = dlast_hidden_state.copy()                                                   # (B, T, H)
    if pooler_cache is not None:
        dense_cache, tanh_cache, _, _ = pooler_cache
        if dpooler_output is None:
            dpooler_output = np.zeros((dx.shape[0], dx.shape[2]), dtype=dx.dtype)   # (B, H)
        grads["pooler"] = {"pooled": dpooler_output}
        # pooler_output = tanh(dense(h[:, 0]))
        grads["pooler"]["dense"] = tanh_backward(dpooler_output, tanh_cache)        # (B, H)
        grads["pooler"]["first"], _ = linear_backward(grads["pooler"]["dense"], dense_cache)   # (B, H)
        dx[:, 0] += grads["pooler"]["first"]                                         # [CLS] fed the pooler
    layer_io = [None] * config.num_hidden_layers
    for i in reversed(range(config.num_hidden_layers)):
        g, dx_below = _layer_backward(p, config, i, dx, layer_caches[i])
        grads["layers"][i], layer_io[i] = g, (dx, dx_below)
        dx = dx_below
    # embeddings = LayerNorm(word + token_type + position)
    dsum, _ = layer_norm_backward(dropout_backward(dx, emb_cache["drop"]), emb_cache["ln"])   # (B, T, H)
    grads["embeddings"] = dict(embeddings=dx, sum=dsum, word=dsum, token_type=dsum, position=dsum)
    return grads, layer_io
