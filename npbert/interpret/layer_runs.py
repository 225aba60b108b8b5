"""Run a model from a named layer's output and get the gradient there: what captum's layer methods
do with forward hooks, done with the model's own forward and backward.

    layer name (a head's; BertModel's without "bert.")   its output            how the model runs from it
    "bert.embeddings.word_embeddings"                    inputs_embeds (B,T,H)  model(inputs_embeds=...)
    "bert.embeddings"                                    embedding_output       the embeddings' output replaced
                                                         (after LayerNorm and   (model.state.call.replaced_outputs),
                                                         dropout) (B, T, H)     as captum's forward hook does
    "bert.encoder.layer.i"                               hidden state i+1       read only (layer_conductance)

The gradient at "bert.embeddings.word_embeddings" is `model.inputs_embeds_grad`, and so is the
gradient at "bert.embeddings" when its output is replaced (BertModel._backward returns the
replacement's gradient then); at an encoder layer it is a hidden state's gradient, from
`model.backward(..., return_intermediate_grads=True)`.  Every run is in eval mode (no dropout) and
computes no parameter gradient (everything frozen for the call, as torch.autograd.grad(F, inputs)
computes none); the model's mode and frozen set are restored afterwards.

    B = examples, S = copies of them (integration steps), R = S B rows, T = tokens, H = hidden size
"""
import contextlib
from collections import namedtuple

import numpy as np

from npbert.modeling import no_grad

from .affine_rows import AffineRows
from .targets import check_output_shapes

Layer = namedtuple("Layer", ["name", "kind", "index"])   # kind: "word_embeddings" | "embeddings" | "encoder"

INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def base_model(model):
    """The BertModel inside `model` (a head's `bert`, or the model itself)."""
    return getattr(model, "bert", model)


def layer_names(model):
    """The layer names this model has, in its own spelling ("bert.embeddings" or "embeddings")."""
    p = base_model(model).prefix
    return ([f"{p}embeddings.word_embeddings", f"{p}embeddings"]
            + [f"{p}encoder.layer.{i}" for i in range(model.config.num_hidden_layers)])


def resolve_layer(model, name, kinds=("word_embeddings", "embeddings", "encoder")):
    """A layer name -> Layer.  A BertModel also accepts a head's spelling ("bert.embeddings"); an
    unknown name, or one this method cannot use, is an error listing the names it can."""
    if not isinstance(name, str):
        raise TypeError(f"layer must be a module path such as 'bert.embeddings', got {name!r}")
    prefix = base_model(model).prefix
    short = name[len(prefix):] if prefix and name.startswith(prefix) else name
    if not prefix and short.startswith("bert."):
        short = short[len("bert."):]
    found = None
    if short == "embeddings.word_embeddings":
        found = Layer(prefix + short, "word_embeddings", None)
    elif short == "embeddings":
        found = Layer(prefix + short, "embeddings", None)
    elif short.startswith("encoder.layer."):
        i = short[len("encoder.layer."):]
        if i.isdigit() and int(i) < model.config.num_hidden_layers:
            found = Layer(prefix + short, "encoder", int(i))
    usable = [n for n in layer_names(model) if resolve_layer_kind(n) in kinds]
    if found is None:
        raise ValueError(f"layer {name!r} does not exist in {type(model).__name__}: use one of "
                         f"{_listing(usable)}")
    if found.kind not in kinds:
        raise ValueError(f"layer {name!r} cannot be used here: use one of {_listing(usable)}")
    return found


def resolve_layer_kind(name):
    return ("word_embeddings" if name.endswith("word_embeddings") else
            "embeddings" if name.endswith("embeddings") else "encoder")


def _listing(names):
    if len(names) > 5:
        return ", ".join(repr(n) for n in names[:3]) + f", ..., {names[-1]!r}"
    return ", ".join(repr(n) for n in names)


def prepare_inputs(model, inputs):
    """`inputs`: what the tokenizer returns (a mapping with input_ids, attention_mask,
    token_type_ids, optionally position_ids and special_tokens_mask) or an input_ids array.
    Returns ({name: (B, T) int64 or None} of INPUT_KEYS, special_tokens_mask (B, T) or None)."""
    if model.attribution_targets is None:           # the model's declaration (npbert/modeling/loss_terms.py)
        raise TypeError(model.attribution_refusal or f"npbert.interpret does not handle {type(model).__name__}")
    if not hasattr(inputs, "keys"):
        inputs = {"input_ids": inputs}
    if inputs.get("inputs_embeds") is not None:
        raise ValueError("inputs: give input_ids (the layer named by `layer` is what gets attributed), "
                         "not inputs_embeds")
    if inputs.get("input_ids") is None:
        raise ValueError("inputs must hold input_ids (B, T), as the tokenizer returns them")
    out = {}
    for key in INPUT_KEYS:
        v = inputs.get(key)
        if v is not None:
            v = np.asarray(v)
            if v.ndim == 1:
                v = v[None]                                      # one example: (T,) -> (1, T)
            if v.dtype == object or not (np.issubdtype(v.dtype, np.integer) or v.dtype == bool):
                raise TypeError(f"inputs[{key!r}] must be integers, got dtype {v.dtype}")
            v = v.astype(np.int64)
        out[key] = v
    B, T = out["input_ids"].shape
    if out["position_ids"] is not None and out["position_ids"].shape == (1, T):
        out["position_ids"] = np.repeat(out["position_ids"], B, axis=0)    # one row for all: (B, T)
    for key in INPUT_KEYS[1:]:
        if out[key] is not None and out[key].shape != (B, T):
            raise ValueError(f"inputs[{key!r}] has shape {out[key].shape}, input_ids has ({B}, {T})")
    special = inputs.get("special_tokens_mask")
    if special is not None:
        special = np.asarray(special).reshape(B, T).astype(bool)
    return out, special


def tiled(inputs, S):
    """The B examples' inputs repeated S times, step-major: row s B + b is example b (as captum
    concatenates the scaled inputs)."""
    return {k: None if v is None else np.tile(v, (S, 1)) for k, v in inputs.items()}


@contextlib.contextmanager
def inspecting(model):
    """Eval mode and no parameter gradient for the block, and the attention's probabilities kept
    (never in tiles: npbert/modeling/call.py); the model's mode and its frozen set (model.freeze)
    restored afterwards."""
    was_training = model.training
    frozen = [n for n, _ in model.named_parameters() if not model.is_trainable(n)]
    model.eval()
    model.freeze()
    try:
        with model.state.call.setting(attention_probs_read=True):
            yield model
    finally:
        model.unfreeze()
        if frozen:
            model.freeze(*frozen)
        model.train(was_training)


@contextlib.contextmanager
def needing_inputs_embeds_grad(model):
    """model.inputs_embeds_grad computed in the block's backward even with every parameter frozen
    (inspecting freezes them); the model's own setting restored afterwards."""
    before = model.state.need_inputs_embeds_grad
    model.state.need_inputs_embeds_grad = True
    try:
        yield model
    finally:
        model.state.need_inputs_embeds_grad = before


def layer_output(model, inputs, layer, input_ids=None):
    """The output of `layer` (B, T, H) for `inputs` (their input_ids replaced by `input_ids` if
    given, e.g. a baseline's), in eval mode, no gradient."""
    ids = inputs["input_ids"] if input_ids is None else input_ids
    base = base_model(model)
    with inspecting(model), no_grad():
        if layer.kind == "word_embeddings":
            ids, _, _, _ = base.embeddings.prepare_inputs(ids, inputs["token_type_ids"], inputs["position_ids"])
            return base.embeddings.p("word_embeddings.weight")[ids]                  # (B, T, H)
        if layer.kind == "embeddings":
            return base.embeddings(ids, inputs["token_type_ids"], inputs["position_ids"])   # (B, T, H)
        out = model(**{**inputs, "input_ids": ids}, output_hidden_states=True)
        return out.hidden_states[layer.index + 1]


def run_from(model, inputs, layer, values, target, B, with_grad=True, read_layer=None, row_weights=None):
    """Run `model` on the S copies of `inputs` (already tiled to R = S B rows) with `layer`'s output
    replaced by `values` (R, T, H).  Returns (F (R,), dF/dvalues (R, T, H), read) where `read`,
    when `read_layer` (an encoder Layer) is given, is (its output (R, T, H), dF/d it (R, T, H));
    with_grad=False: only F (the gradients None).

    values may be an AffineRows (npbert/interpret/affine_rows.py: the points of integrated gradients
    at "bert.embeddings"); the gradient is then sum over each example's S rows of
    row_weights[r] dF_r/dvalues[r], (B, T, H): the backward is linear in its upstream gradient,
    so each row's upstream is scaled by its weight and the model sums."""
    base = base_model(model)
    kwargs = {k: v for k, v in inputs.items() if k != "input_ids"}
    if layer.kind == "word_embeddings":
        kwargs["inputs_embeds"] = values
    else:
        kwargs["input_ids"] = inputs["input_ids"]
    flags = {"output_hidden_states": True} if read_layer is not None else {}
    replace = layer.kind == "embeddings"
    lines = values if isinstance(values, AffineRows) else None
    if lines is not None:
        values = lines.materialize()                                                 # (R, T, H)
    with inspecting(model), (contextlib.nullcontext() if with_grad else no_grad()):
        replaced = {base.prefix + "embeddings": values} if replace else {}
        with model.state.call.setting(replaced_outputs=replaced):
            out = model(**kwargs, **flags)
        check_output_shapes(target, out, B)
        F = target.values(out, B)                                                    # (R,)
        if not with_grad:
            return F, None, None
        upstream = target.upstream(out, B)
        if row_weights is not None:                  # row r's upstream times its weight
            upstream = {name: u * np.asarray(row_weights, u.dtype).reshape((-1,) + (1,) * (u.ndim - 1))
                        for name, u in upstream.items()}
        with needing_inputs_embeds_grad(model):
            if read_layer is None:
                model.backward(**upstream)
            else:
                _, igrads = model.backward(**upstream, return_intermediate_grads=True)
    dvalues = model.inputs_embeds_grad          # with the embeddings' output replaced: that output's gradient
    if lines is not None:
        dvalues = lines.sum_by_example(dvalues)                                      # (B, T, H)
    read = None
    if read_layer is not None:
        j = read_layer.index + 1
        read = (out.hidden_states[j], igrads.hidden_states[j])
    return F, dvalues, read
