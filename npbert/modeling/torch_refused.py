"""torch.nn.Module / transformers PreTrainedModel methods npbert's models refuse by name, each
with what to write instead (npbert.unsupported; docs/compatibility.md lists them all)."""

_HOOKS = ("npbert's modules have no hooks: ask the model for its intermediates and their gradients "
          "(model(..., output_intermediates=True), model.backward(..., return_intermediate_grads=True); "
          "docs/interpret.md)")
_ASSIGN = "assign the module (npbert.nn.Linear, ...) as an attribute of the model (docs/custom_heads.md)"
_INIT = "weights are drawn when the model is built: Model(config, seed=...) (transformers' _init_weights)"
_EMBEDDINGS = ("resize with model.resize_token_embeddings(n), or write into "
               "model.get_input_embeddings().weight.data")
_POSITIONS = "BERT's absolute position table has a fixed size: config.max_position_embeddings (as transformers)"
_INPUT_GRADS = "the gradient of the loss with respect to the input embeddings is model.inputs_embeds_grad (docs/backward.md)"

REFUSED_METHODS = {
    "register_forward_hook": _HOOKS, "register_forward_pre_hook": _HOOKS, "register_full_backward_hook": _HOOKS,
    "register_full_backward_pre_hook": _HOOKS, "register_backward_hook": _HOOKS,
    "register_state_dict_pre_hook": _HOOKS, "register_state_dict_post_hook": _HOOKS,
    "register_load_state_dict_pre_hook": _HOOKS, "register_load_state_dict_post_hook": _HOOKS,
    "add_module": _ASSIGN, "register_module": _ASSIGN, "set_submodule": _ASSIGN,
    "register_parameter": "a module's parameters are its add_param(name, shape, init) (docs/custom_heads.md)",
    "register_buffer": "npbert's models keep no buffers: keep the array as a plain attribute",
    "init_weights": _INIT, "initialize_weights": _INIT,
    "set_input_embeddings": _EMBEDDINGS, "set_output_embeddings": _EMBEDDINGS,
    "resize_position_embeddings": _POSITIONS, "get_position_embeddings": _POSITIONS,
    "enable_input_require_grads": _INPUT_GRADS, "disable_input_require_grads": _INPUT_GRADS,
    "bfloat16": "npbert models compute in float32 or float64: model.float() or model.double()",
}
