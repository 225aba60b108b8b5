"""npbert.interpret: inspect and attribute a BERT without autograd, with the backward npbert has.

Intermediates and their gradients (npbert/modeling/outputs.py):
    out = model(..., output_intermediates=True)          out.intermediates: per layer query, key, value,
                                                         attention_scores, attentions, context_layer,
                                                         attention_output, intermediate_output; hidden_states
    grads, igrads = model.backward(..., return_intermediate_grads=True)
                                                         igrads.hidden_states, .attentions, .head_mask

Attributions, captum's names and semantics (docs/interpret.md derives each):
    saliency, input_x_gradient, integrated_gradients, layer_conductance     gradients.py
    attention_rollout, attention_flow, grad_rollout                        attention.py
    head_importance, pruning_curve                                         heads.py
Pictures and views: pictures.py (PNG with matplotlib, standalone HTML), views.py (bertviz's data).
"""
from .gradients import Attribution, input_x_gradient, integrated_gradients, layer_conductance, saliency
from .layers import layer_names
from .quadrature import METHODS, step_sizes_and_alphas

__all__ = ["Attribution", "saliency", "input_x_gradient", "integrated_gradients", "layer_conductance",
           "layer_names", "METHODS", "step_sizes_and_alphas"]
