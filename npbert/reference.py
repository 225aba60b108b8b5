"""BERT on a few screens: the whole forward and the hand-written backward as plain functions over
a transformers-named state dict (picoGPT's gpt2.py, llm.c's train_gpt2.py), built from the
reference ops of npbert/ops.  The same numbers as npbert.BertModel (tested to 1e-12 in float64,
dropout off and on: tests/modeling/test_reference_functions.py); BertModel adds the input checks, the
options (head mask, 3-D and causal masks, freezing, ...), the heads and the fast path.

    params = npbert.BertModel.from_pretrained(path).state_dict()   # {"encoder.layer.0.attention.self.query.weight": ...}
    out, cache = bert_forward(params, config, input_ids, attention_mask)
    out["last_hidden_state"], out["pooler_output"]                   # (B, T, H), (B, H)
    grads, dinputs_embeds = bert_backward(params, config, cache, dlast_hidden_state, dpooler_output)

    B = batch, T = sequence length, H = hidden size, N = heads, D = H / N, I = intermediate, L = layers

Dropout: `dropout=(step_seed, first_row)` draws the masks a training BertModel draws in the step
whose seed is `step_seed` (its one draw from model.state.rng, npbert/modeling/module.py), keyed by
the same site names (npbert/ops/dropout.py); None is eval mode.

Each forward's cache holds, besides what its backward needs, every activation it made under a
name (`cache["acts"]`, llm.c's ActivationTensors); each backward, given a `grads_acts` dict, puts
the gradient of every one of them there under the same name (llm.c's `grads_acts` beside `acts`).
`activations(cache)` gathers the forward's, and `bert_backward(..., grads_acts={})` fills the same
structure with the gradients: npbert.explain shows both, stage by stage, and computes neither.

    acts["embeddings"]  word, token_type, position, sum, embeddings                       (B, T, H)
    acts["layers"][i]   query, key, value (B, N, T, D); scores, probs (B, N, F, T); context,
                        attention_dense, attention_output, output_dense, layer_output (B, T, H);
                        intermediate_dense, intermediate (B, T, I)
    acts["pooler"]      first, dense, pooled (B, H); None without a pooler
"""
import numpy as np

from npbert.ops.activations import get_activation, tanh_backward, tanh_forward
from npbert.ops.attention import attention_backward, attention_forward
from npbert.ops.dropout import DropoutKey, dropout_backward, dropout_forward
from npbert.ops.embedding import embedding_backward, embedding_forward
from npbert.ops.layer_norm import layer_norm_backward, layer_norm_forward
from npbert.ops.linear import linear_backward, linear_forward
from npbert.ops.softmax import softmax_backward


def _drop(x, p, dropout, site):
    """dropout_forward at one site: keyed masks in training (dropout = (seed, first_row)), identity in eval."""
    key = None if dropout is None else DropoutKey(dropout[0], site, dropout[1])
    return dropout_forward(x, p, key, dropout is not None)


def _linear(p, name, x):
    return linear_forward(x, p[name + ".weight"], p[name + ".bias"])


def _linear_back(p, name, dy, cache, grads):
    """The backward of nn.Linear `name`; its weight and bias gradients go into grads."""
    dx, g = linear_backward(dy, cache)
    grads[name + ".weight"], grads[name + ".bias"] = g["weight"], g["bias"]
    return dx


def _layer_norm(p, name, x, config):
    return layer_norm_forward(x, p[name + ".weight"], p[name + ".bias"], config.layer_norm_eps)


def _layer_norm_back(name, dy, cache, grads):
    dx, g = layer_norm_backward(dy, cache)
    grads[name + ".weight"], grads[name + ".bias"] = g["weight"], g["bias"]
    return dx


# ---- embeddings: LayerNorm(word[ids] + token_type[types] + position[positions]) -------------------
def embeddings_forward(p, config, input_ids, token_type_ids, position_ids, dropout=None):
    """(B, T) ids, types, positions -> (B, T, H)."""
    c = {}
    word, c["word"] = embedding_forward(input_ids, p["embeddings.word_embeddings.weight"])               # (B, T, H)
    types, c["type"] = embedding_forward(token_type_ids, p["embeddings.token_type_embeddings.weight"])  # (B, T, H)
    positions, c["pos"] = embedding_forward(position_ids, p["embeddings.position_embeddings.weight"])   # (B, T, H)
    summed = word + types + positions                                                                 # (B, T, H)
    x, c["ln"] = _layer_norm(p, "embeddings.LayerNorm", summed, config)                               # (B, T, H)
    x, c["drop"] = _drop(x, config.hidden_dropout_prob, dropout, "embeddings.dropout")
    c["acts"] = dict(word=word, token_type=types, position=positions, sum=summed, embeddings=x)
    return x, c


def embeddings_backward(p, config, dx, c, grads, grads_acts=None):
    """Returns d inputs_embeds (B, T, H); the tables' gradients go into grads, the activations'
    into grads_acts (when given) under the names of c["acts"]."""
    de = dropout_backward(dx, c["drop"])
    de = _layer_norm_back("embeddings.LayerNorm", de, c["ln"], grads)              # (B, T, H), to all three
    if grads_acts is not None:                                                     # summed = word + types + positions
        grads_acts.update(embeddings=dx, sum=de, word=de, token_type=de, position=de)
    grads["embeddings.word_embeddings.weight"] = embedding_backward(de, c["word"], config.pad_token_id)
    grads["embeddings.token_type_embeddings.weight"] = embedding_backward(de, c["type"])
    grads["embeddings.position_embeddings.weight"] = embedding_backward(de, c["pos"])
    return de


# ---- one encoder layer ------------------------------------------------------------------------
def bert_layer_forward(p, config, i, x, mask=None, dropout=None):
    """Layer i: (B, T, H) -> ((B, T, H), probs (B, N, T, T), cache).  mask: additive (B, 1, 1, T) or None."""
    pre, c = f"encoder.layer.{i}.", {}
    B, T, H = x.shape
    N = config.num_attention_heads

    def heads(t):                                                                  # (B, T, H) -> (B, N, T, D)
        return t.reshape(B, T, N, H // N).transpose(0, 2, 1, 3)
    q, c["q"] = _linear(p, pre + "attention.self.query", x)                        # (B, T, H)
    k, c["k"] = _linear(p, pre + "attention.self.key", x)
    v, c["v"] = _linear(p, pre + "attention.self.value", x)
    key = None if dropout is None else DropoutKey(dropout[0], pre + "attention.self.dropout", dropout[1])
    scores = {}                                                                    # the softmax's input, kept
    ctx, c["attn"] = attention_forward(heads(q), heads(k), heads(v), mask, None,   # softmax(q k^T / sqrt(D) + mask) v
                                       config.attention_probs_dropout_prob, key, dropout is not None, record=scores)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(B, T, H)                               # (B, T, H), heads merged
    dense, c["ao"] = _linear(p, pre + "attention.output.dense", ctx)
    a, c["ao_drop"] = _drop(dense, config.hidden_dropout_prob, dropout, pre + "attention.output.dropout")
    a, c["ao_ln"] = _layer_norm(p, pre + "attention.output.LayerNorm", a + x, config)   # (B, T, H)
    act_forward, _ = get_activation(config.hidden_act)
    h, c["inter"] = _linear(p, pre + "intermediate.dense", a)                      # (B, T, I)
    inter, c["act"] = act_forward(h)
    out, c["out"] = _linear(p, pre + "output.dense", inter)                        # (B, T, H)
    y, c["out_drop"] = _drop(out, config.hidden_dropout_prob, dropout, pre + "output.dropout")
    y, c["out_ln"] = _layer_norm(p, pre + "output.LayerNorm", y + a, config)        # (B, T, H)
    attn = c["attn"]
    c["acts"] = dict(query=attn["q"], key=attn["k"], value=attn["v"], scores=scores["attention_scores"],
                     probs=attn["probs"], context=ctx,
                     attention_dense=dense, attention_output=a, intermediate_dense=h, intermediate=inter,
                     output_dense=out, layer_output=y)
    return y, attn["probs"], c


def bert_layer_backward(p, config, i, dy, c, grads, dprobs=None, grads_acts=None):
    """Layer i's backward, each step undoing one forward line from the bottom up.  dy: (B, T, H);
    dprobs: an optional upstream gradient of the returned probs.  Returns dx (B, T, H).
    grads_acts: a dict that gets the gradient of each of c["acts"], under its name."""
    pre = f"encoder.layer.{i}."
    B, T, H = dy.shape
    N = config.num_attention_heads
    g = {"layer_output": dy}                                                       # grads_acts of this layer
    # y = LayerNorm(dropout(output.dense(h)) + a)
    dsum = _layer_norm_back(pre + "output.LayerNorm", dy, c["out_ln"], grads)
    g["output_dense"] = dropout_backward(dsum, c["out_drop"])                      # (B, T, H)
    g["intermediate"] = _linear_back(p, pre + "output.dense", g["output_dense"], c["out"], grads)   # (B, T, I)
    # h = act(intermediate.dense(a))
    _, act_backward = get_activation(config.hidden_act)
    g["intermediate_dense"] = act_backward(g["intermediate"], c["act"])            # (B, T, I)
    da = _linear_back(p, pre + "intermediate.dense", g["intermediate_dense"], c["inter"], grads)
    g["attention_output"] = da = da + dsum                                         # a fed the FFN and its residual
    # a = LayerNorm(dropout(attention.output.dense(ctx)) + x)
    dsum = _layer_norm_back(pre + "attention.output.LayerNorm", da, c["ao_ln"], grads)
    g["attention_dense"] = dropout_backward(dsum, c["ao_drop"])                    # (B, T, H)
    g["context"] = _linear_back(p, pre + "attention.output.dense", g["attention_dense"], c["ao"], grads)
    # ctx = merge_heads(attention(q, k, v))
    dctx = g["context"].reshape(B, T, N, H // N).transpose(0, 2, 1, 3)             # (B, N, T, D)
    record = {}
    g["query"], g["key"], g["value"] = attention_backward(dctx, c["attn"], dprobs, record)   # (B, N, T, D) each
    g["probs"] = record["attentions"]                                              # (B, N, F, T)
    if grads_acts is not None:
        # probs = dropout(softmax(scores)): attention_backward takes this step inside; for the reader
        attn = c["attn"]
        g["scores"] = softmax_backward(dropout_backward(g["probs"], attn["dropout"]), attn["softmax"])
        grads_acts.update(g)
    dq, dk, dv = (d.transpose(0, 2, 1, 3).reshape(B, T, H) for d in (g["query"], g["key"], g["value"]))
    # q, k, v = query(x), key(x), value(x): x fed all three and the residual
    dx = _linear_back(p, pre + "attention.self.query", dq, c["q"], grads)
    dx = dx + _linear_back(p, pre + "attention.self.key", dk, c["k"], grads)
    dx = dx + _linear_back(p, pre + "attention.self.value", dv, c["v"], grads)
    return dx + dsum


# ---- the pooler: tanh(dense(h[:, 0])) -----------------------------------------------------------
def pooler_forward(p, h):
    """(B, T, H) -> (B, H)."""
    dense, dense_cache = _linear(p, "pooler.dense", h[:, 0])                       # (B, H), the [CLS] position
    pooled, tanh_cache = tanh_forward(dense)
    return pooled, (dense_cache, tanh_cache, h.shape, dict(first=h[:, 0], dense=dense, pooled=pooled))


def pooler_backward(p, dpooled, c, grads, grads_acts=None):
    """dpooled (B, H) -> d last_hidden_state (B, T, H), nonzero at [CLS] only."""
    dense_cache, tanh_cache, shape, _ = c
    ddense = tanh_backward(dpooled, tanh_cache)                                    # (B, H)
    dfirst = _linear_back(p, "pooler.dense", ddense, dense_cache, grads)          # (B, H)
    if grads_acts is not None:
        grads_acts.update(pooled=dpooled, dense=ddense, first=dfirst)
    dh = np.zeros(shape, dtype=dpooled.dtype)                                      # (B, T, H)
    dh[:, 0] = dfirst                                                              # only [CLS] fed the pooler
    return dh


# ---- the model ----------------------------------------------------------------------------------
def bert_forward(params, config, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                 dropout=None):
    """input_ids (B, T) -> ({"last_hidden_state", "pooler_output", "hidden_states", "attentions"},
    cache).  attention_mask: 1/0 (B, T) or None; token types default to 0, positions to 0..T-1."""
    B, T = input_ids.shape
    dtype = params["embeddings.word_embeddings.weight"].dtype
    token_type_ids = np.zeros((B, T), dtype=np.int64) if token_type_ids is None else token_type_ids
    position_ids = np.broadcast_to(np.arange(T), (B, T)) if position_ids is None else position_ids
    mask = None
    if attention_mask is not None:                                                 # 0 attended, finfo.min masked
        mask = (1.0 - np.asarray(attention_mask, dtype)[:, None, None, :]) * np.finfo(dtype).min   # (B, 1, 1, T)
    x, emb_cache = embeddings_forward(params, config, input_ids, token_type_ids, position_ids, dropout)
    hidden_states, attentions, layer_caches = [x], [], []
    for i in range(config.num_hidden_layers):
        x, probs, c = bert_layer_forward(params, config, i, x, mask, dropout)
        hidden_states.append(x)
        attentions.append(probs)
        layer_caches.append(c)
    pooled, pooler_cache = None, None
    if "pooler.dense.weight" in params:                                            # a head's BERT may have none
        pooled, pooler_cache = pooler_forward(params, x)
    out = {"last_hidden_state": x, "pooler_output": pooled,
           "hidden_states": tuple(hidden_states), "attentions": tuple(attentions)}
    return out, (emb_cache, layer_caches, pooler_cache)


def activations(cache):
    """Every activation of a bert_forward, from its cache: {"embeddings": {...}, "layers": [{...}, ...],
    "pooler": {...} or None} (the names in the module docstring)."""
    emb_cache, layer_caches, pooler_cache = cache
    return {"embeddings": emb_cache["acts"], "layers": [c["acts"] for c in layer_caches],
            "pooler": None if pooler_cache is None else pooler_cache[-1]}


def bert_backward(params, config, cache, dlast_hidden_state, dpooler_output=None, grads_acts=None):
    """The gradients of sum(last_hidden_state * dlast_hidden_state) + sum(pooler_output *
    dpooler_output).  Returns ({parameter name: gradient}, d inputs_embeds (B, T, H)).
    grads_acts: a dict that gets the gradient of every activation, the structure of activations(cache)."""
    emb_cache, layer_caches, pooler_cache = cache
    L = config.num_hidden_layers
    g = {"embeddings": {}, "layers": [{} for _ in range(L)], "pooler": None}
    grads = {}
    dx = dlast_hidden_state.copy()
    if dpooler_output is not None:
        g["pooler"] = {}
        dx += pooler_backward(params, dpooler_output, pooler_cache, grads, g["pooler"])   # last_hidden_state fed it
    for i in reversed(range(L)):
        dx = bert_layer_backward(params, config, i, dx, layer_caches[i], grads, grads_acts=g["layers"][i])
    dinputs_embeds = embeddings_backward(params, config, dx, emb_cache, grads, g["embeddings"])
    if grads_acts is not None:
        grads_acts.update(g)
    return {name: grads.get(name, np.zeros_like(p)) for name, p in params.items()}, dinputs_embeds
