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
Pictures and views: pictures.py (PNG with matplotlib, standalone HTML), attention_picture.py (one
layer's attention as a picture: `npbert attention`, `npbert predict --attention`), views.py
(bertviz's data).  Running a model from a named layer's output: layer_runs.py.
"""
from .attention import AttentionRelevance, attention_flow, attention_rollout, grad_rollout
from .baselines import default_baseline_ids
from .gradients import Attribution, input_x_gradient, integrated_gradients, layer_conductance, saliency
from .heads import HeadImportance, PruningCurve, evaluate, head_importance, pruning_curve
from .layer_runs import layer_names
from .pictures import (head_importance_png, pruning_curve_png, relevance_map_png, token_heatmap_html,
                       token_heatmap_png)
from .quadrature import METHODS, step_sizes_and_alphas
from .targets import OutputMax, OutputSoftmax, OutputSum
from .views import head_view_data, neuron_view_data

__all__ = ["OutputMax", "OutputSum", "OutputSoftmax",
           "saliency", "input_x_gradient", "integrated_gradients", "layer_conductance", "Attribution",
           "attention_rollout", "attention_flow", "grad_rollout", "AttentionRelevance",
           "head_importance", "pruning_curve", "evaluate", "HeadImportance", "PruningCurve",
           "default_baseline_ids", "layer_names", "METHODS", "step_sizes_and_alphas",
           "token_heatmap_html", "token_heatmap_png", "relevance_map_png", "head_importance_png",
           "pruning_curve_png", "head_view_data", "neuron_view_data"]
