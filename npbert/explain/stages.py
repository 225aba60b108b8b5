"""The stages the page shows, in the order of the forward pass: every activation npbert/reference.py
keeps under a name (reference.activations), with its transformers module, formula, dims, docs page and
the line of reference.py that computes it (found in the source: source_line).  Their gradients are
reference.bert_backward's grads_acts, under the same names: read, not computed here.

    B = batch, T = sequence length (keys), F = sequence length (queries),
    H = hidden size, N = attention heads, D = H / N head size, I = intermediate size
"""
import inspect

import numpy as np

from npbert import reference

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
    ("first", "pooler", "last_hidden_state[:, 0]  ([CLS]; its gradient: the pooler's part)", "h[:, 0]", "B,H",
     "encoder.md", reference.pooler_forward, 'h[:, 0])'),
    ("dense", "pooler.dense", "pooler dense", "h[:, 0] W_p^T + b_p", "B,H", "encoder.md", reference.pooler_forward,
     '_linear(p, "pooler.dense"'),
    ("pooled", "pooler.activation", "tanh  (pooler_output)", "pooler_output = tanh(dense)", "B,H", "encoder.md",
     reference.pooler_forward, "pooled, tanh_cache = tanh_forward"),
]
SECTIONS = (("embeddings", EMBEDDINGS), ("layer", LAYER), ("pooler", POOLER))   # the head's: heads.py


def source_line(function, piece):
    """The 1-based line of `function`'s file (npbert/reference.py, or the head's module) that
    contains `piece`, in `function` (read from the source, so the links follow the file)."""
    lines, start = inspect.getsourcelines(function)
    for k, line in enumerate(lines):
        if piece in line:
            return start + k
    raise LookupError(f"{inspect.getsourcefile(function)}: no line with {piece!r} in {function.__qualname__}: "
                      "update npbert/explain/stages.py")


def forward(bert, ids, token_type_ids):
    """reference.bert_forward on `bert`'s own arrays (eval: no dropout), attention over all T tokens.
    Returns (out, cache, acts): out as reference.bert_forward's, acts = reference.activations(cache)."""
    out, cache = reference.bert_forward(bert.state_dict(), bert.config, ids, np.ones_like(ids), token_type_ids)
    return out, cache, reference.activations(cache)


def backward(bert, cache, dlast_hidden_state, dpooler_output=None):
    """reference.bert_backward of sum(last_hidden_state * dlast_hidden_state) + sum(pooler_output *
    dpooler_output).  Returns ({parameter: gradient}, d inputs_embeds, grads_acts)."""
    grads_acts = {}
    grads, dembeds = reference.bert_backward(bert.state_dict(), bert.config, cache, dlast_hidden_state,
                                             dpooler_output, grads_acts=grads_acts)
    return grads, dembeds, grads_acts
