"""Everything the page shows, as the dict embedded in it (docs/explain.md, "The data block"), for
any model object (a BertModel, or a head around one: npbert's or your own) and any tokenizer.

    B = batch (1), T = sequence length, H = hidden size, N = heads, L = layers
"""
import io

import numpy as np

from npbert import reference

from . import heads, rows, stages
from .checks import Checks, compare, concat, gradient_check
from .errors import ExplainError
from .models import as_float64, describe, has_head, standalone_bert
from .tokens import encode
from .walk import forward_tolerance

SCHEMA = "npbert-explain/2"
DIMS = {"B": "batch", "T": "tokens (keys)", "F": "tokens (queries; F = T here)", "H": "hidden size",
        "N": "attention heads", "D": "head size H / N", "I": "intermediate size", "L": "layers",
        "V": "vocab size", "P": "max positions", "Y": "token types"}
HEAD_DIMS = {"K": "the head's classes (num_labels; 2 for next sentence prediction)", "C": "choices"}
TOL = heads.BACKWARD_TOL


def page_upstream(seed, B, T, H):
    """U (B, T, H) ~ N(0, 1) from the seed: the page's loss without a head's, sum(last_hidden_state * U)."""
    return np.random.default_rng(seed).standard_normal((B, T, H))


def _forward_checks(checks, acts, own, tol):
    """The stages that are outputs of the model, against the model's own (output_hidden_states, ...)."""
    return {"embeddings": {"embeddings": compare(checks, "hidden_states[0]", acts["embeddings"]["embeddings"],
                                                 own.hidden_states[0], tol)},
            "layers": [{"probs": compare(checks, f"attentions[{i}]", a["probs"], own.attentions[i], tol),
                        "layer_output": compare(checks, f"hidden_states[{i + 1}]", a["layer_output"],
                                                own.hidden_states[i + 1], tol)}
                       for i, a in enumerate(acts["layers"])],
            "pooler": {} if acts["pooler"] is None else
            {"pooled": compare(checks, "pooler_output", acts["pooler"]["pooled"], own.pooler_output, tol)}}


def _backward_checks(checks, gacts, igrads, dembeds, cache):
    """The stages' gradients (reference.py's grads_acts) against the model's public backward: its
    IntermediateGrads (hidden states, attention probabilities) and inputs_embeds_grad; the scores'
    through d scores K / sqrt(D) against the d query of npbert.ops' attention_backward."""
    result = {"embeddings": {
        "embeddings": compare(checks, "d hidden_states[0]", gacts["embeddings"]["embeddings"], igrads.hidden_states[0],
                              TOL, "= d hidden_states[0] of the model's backward (its intermediate gradients)"),
        "sum": compare(checks, "model.inputs_embeds_grad", gacts["embeddings"]["sum"], dembeds, TOL,
                       "= model.inputs_embeds_grad after the model's backward")}, "layers": [], "pooler": {}}
    for i, g in enumerate(gacts["layers"]):
        attn = cache[1][i]["attn"]
        result["layers"].append({
            "layer_output": compare(checks, f"d hidden_states[{i + 1}]", g["layer_output"], igrads.hidden_states[i + 1],
                                    TOL, f"= d hidden_states[{i + 1}] of the model's backward"),
            "probs": compare(checks, f"d attentions[{i}]", g["probs"], igrads.attentions[i], TOL,
                             f"= d attentions[{i}] of the model's backward"),
            "scores": compare(checks, f"attention_backward({i}) d query", (g["scores"] * attn["scale"]) @ attn["k"],
                              g["query"], TOL, "d scores K / sqrt(D) = d query of npbert.ops attention_backward")})
    return result


def _loss(model64, bert64, plain, hin, labels, seed, shape, acts64, checks):
    """The page's loss and its backward through the model's public backward.  Returns a dict: what
    reaches BERT (dlast, dpooled), the model's BERT gradients ({name without prefix: gradient}),
    its IntermediateGrads and inputs_embeds_grad, and what the data block's loss holds."""
    if labels is None:                                  # sum(last_hidden_state * U)
        U = page_upstream(seed, *shape)
        out = bert64(**plain)
        grads, igrads = bert64.backward(last_hidden_state=U, return_intermediate_grads=True)
        return dict(U=U, dlast=U, dpooled=None, bert_grads=grads, igrads=igrads, dembeds=bert64.inputs_embeds_grad,
                    value=float(np.sum(out.last_hidden_state * U)), checks=[], dout=None, terms=None, means=None)
    hout = model64(**hin, **labels, output_hidden_states=True)
    r = heads.loss_backward(model64, {**hin, **labels}, hout, checks)
    prefix, tied = model64.base_model_prefix + ".", heads.tied_names(model64)
    bert_grads = {n[len(prefix):]: g for n, g in r["grads"].items() if n.startswith(prefix) and n not in tied}
    return dict(U=None, dlast=r["dlast"], dpooled=r["dpooled"], bert_grads=bert_grads, igrads=r["igrads"],
                dembeds=r["dembeds"], value=r["loss"], checks=r["loss_checks"], dout=r["dout"], terms=r["terms"],
                means=r["means"], output_check=r["output_check"], tied=sorted(n[len(prefix):] for n in tied))


def build_page_data(model, tokenizer, text, text_pair=None, labels=None, seed=0, page_dir=".", description=None,
                    tokenizer_description=None):
    """(the data block as a dict, Checks) for `text` (and `text_pair`) through `model`: a BertModel or
    a head (npbert's or your own, docs/custom_heads.md); with `labels` ({label argument: array for
    one example}, as the head's forward takes them) its loss, else sum(last_hidden_state * U)."""
    c = model.config
    if getattr(c, "is_decoder", False):
        raise ExplainError("is_decoder=True (causal attention): the page draws BERT's bidirectional attention only")
    if labels is not None and not has_head(model):
        raise ExplainError(f"labels need a model with a task head; {type(model).__name__} computes no loss")
    tokens, ids, types, cut = encode(tokenizer, text, text_pair, c)
    B, T = ids.shape
    H, N, L = c.hidden_size, c.num_attention_heads, c.num_hidden_layers
    checks = Checks()
    # Forward, in the model's dtype: reference.py's stages checked against the model's own outputs.
    bert = standalone_bert(model, model.dtype)
    _, _, acts = stages.forward(bert, ids, types)
    own = bert(input_ids=ids, attention_mask=np.ones_like(ids), token_type_ids=types, output_hidden_states=True,
               output_attentions=True)
    fchecks = _forward_checks(checks, acts, own, forward_tolerance(bert.dtype))
    # Backward, in float64: the model's public backward, and reference.py's of the same upstream.
    model64 = as_float64(model)
    bert64 = standalone_bert(model64, np.float64)                       # model64 itself when it has no head
    _, cache64, acts64 = stages.forward(bert64, ids, types)
    plain = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": types}   # (B, T) each
    hin = heads.head_inputs(model64, ids, types) if has_head(model) else plain
    head_check = {"forward": None, "backward": None}
    if has_head(model):
        hout = model64(**hin, output_hidden_states=True)
        head_check["forward"] = compare(
            checks, f"{type(model).__name__}.hidden_states[{L}]", acts["layers"][-1]["layer_output"],
            hout.hidden_states[-1].reshape(B, T, H), forward_tolerance(bert.dtype),
            f"the encoder output {type(model).__name__} read (its hidden_states[{L}], float64) = the last layer's "
            "output above")
    loss = _loss(model64, bert64, plain, hin, labels, seed, (B, T, H), acts64, checks)
    dpooled, dlast = loss["dpooled"], loss["dlast"]
    if dpooled is not None:                             # what the head hands to last_hidden_state itself
        dlast = dlast - reference.pooler_backward(bert64.state_dict(), dpooled, cache64[2], {})
    elif acts64["pooler"] is not None:
        dpooled = np.zeros((B, H))                      # the loss does not read pooler_output
    ref_grads, _, gacts = stages.backward(bert64, cache64, dlast, dpooled)
    names = list(loss["bert_grads"])
    what = "every BERT parameter's gradient from reference.bert_backward of what reaches BERT = the model's backward"
    if loss.get("tied"):
        what += f" (but {', '.join(loss['tied'])}: the head uses it too, so its gradient there holds both uses)"
    loss["checks"].append(compare(checks, "reference.bert_backward", concat(ref_grads, names),
                                  concat(loss["bert_grads"], names), TOL, what))
    bchecks = _backward_checks(checks, gacts, loss["igrads"], loss["dembeds"], cache64)
    if labels is not None:
        head_check["backward"] = loss["output_check"]
    # The gradient check of the same loss, npbert.gradcheck's, its table kept as text.
    text_out, gchecks = io.StringIO(), Checks()
    if labels is None:
        n_checked = gradient_check(bert64, plain, {"last_hidden_state": loss["U"]}, text_out, gchecks, seed,
                                   "last_hidden_state=U")
    else:
        n_checked = gradient_check(model64, {**hin, **labels}, {"loss": 1.0}, text_out, gchecks, seed)
    checks.failed += [f"gradient check: {name}" for name in gchecks.failed]
    checks.count += gchecks.count

    stage_list = _bert_stages(L, acts, gacts, fchecks, bchecks, page_dir)
    head_info, sizes = None, {}
    if has_head(model):
        head_stages, head_info, sizes = _head_stages(model64, hout, loss["dout"], head_check, bert.pooler, page_dir)
        stage_list += head_stages
    data = {
        "schema": SCHEMA,
        "npbert_version": _version(),
        "model": {"description": description or describe(model), "num_parameters": int(model.num_parameters()),
                  "dtype": np.dtype(model.dtype).name, "head": head_info,
                  "config": {"L": L, "H": H, "N": N, "D": H // N, "I": c.intermediate_size, "V": c.vocab_size,
                             "P": c.max_position_embeddings, "Y": c.type_vocab_size, "hidden_act": c.hidden_act,
                             "K": sizes.get("K"), "C": sizes.get("C")}},
        "text": text, "text_pair": text_pair,
        "tokenizer": (tokenizer_description or getattr(tokenizer, "description", type(tokenizer).__name__)) + cut,
        "tokens": tokens, "input_ids": ids[0].tolist(), "token_type_ids": types[0].tolist(),
        "attention_mask": [1] * T,
        "dims": {**DIMS, **{d: HEAD_DIMS[d] for d in ("K", "C") if d in sizes}},
        "loss": _loss_data(loss, labels, seed, dlast),
        "stages": stage_list,
        "gradient_check": {"tensors": n_checked, "count": gchecks.count, "failed": gchecks.failed,
                           "ok": not gchecks.failed, "text": text_out.getvalue(),
                           "of": "BertModel" if labels is None else type(model).__name__},
        "checks": {"count": checks.count, "failed": checks.failed, "ok": not checks.failed},
    }
    return data, checks


def _bert_stages(L, acts, gacts, fchecks, bchecks, page_dir):
    """The rows of BERT's stages, in forward order: each activation with its gradient and checks."""
    stage_list = []
    for section, table in stages.SECTIONS:
        if section == "layer":
            for i in range(L):
                stage_list += rows.stage_rows("layer", table, acts["layers"][i], gacts["layers"][i], i,
                                              rows.split_checks(fchecks["layers"][i], bchecks["layers"][i]), page_dir)
        elif acts[section] is not None:
            stage_list += rows.stage_rows(section, table, acts[section], gacts[section], None,
                                          rows.split_checks(fchecks[section], bchecks[section]), page_dir)
    return stage_list


def _head_stages(head, hout, dout, head_check, pooler, page_dir):
    """(the rows of the head's outputs, the data block's model.head, {"K" or "C": size})."""
    outputs = heads.head_outputs(hout)
    dout = dout or {n: np.zeros(v.shape) for n, v in outputs}          # without labels the loss does not read them
    head_rows = rows.head_rows(head, outputs, dout, head_check, page_dir)
    sizes = {d: n for r in head_rows for d, n in zip(r["dims"], r["shape"]) if d in ("K", "C")}
    info = {"class": type(head).__name__, "outputs": [n for n, _ in outputs], "pooler": pooler is not None}
    return head_rows, info, sizes


def _loss_data(loss, labels, seed, dlast):
    """The data block's "loss": what the gradients are of, and what reaches BERT."""
    terms = loss["terms"]
    return {"formula": ("loss = sum(last_hidden_state * U)" if labels is None else
                        "loss = " + " + ".join(f"{t.weight:g} * mean_{t.name}" for t in terms)),
            "value": loss["value"], "seed": seed, "dtype": "float64",
            "labels": None if labels is None else {k: np.asarray(v).tolist() for k, v in labels.items()},
            "terms": None if terms is None else [
                {"name": t.name, "weight": t.weight, "count": t.count, "mean": loss["means"][t.name]} for t in terms],
            "U": None if loss["U"] is None else rows.tensor(loss["U"]),
            "upstream": {"last_hidden_state": rows.tensor(dlast),
                         "pooler_output": None if loss["dpooled"] is None else rows.tensor(loss["dpooled"])},
            "checks": loss["checks"]}


def _version():
    import npbert           # a named cycle: the top namespace ranks above npbert.explain (it is read once npbert is whole)
    return npbert.__version__
