"""Attention-based relevance: how much each input token feeds each output token, through all layers.

    attention_rollout  Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers":
                           A_l = renormalise(0.5 W_l + 0.5 I),  W_l = layer l's attention, heads averaged
                           rollout = A_{L-1} ... A_1 A_0                           (B, T, T)
                       (the identity stands for the residual connection: half of a token's
                       representation is itself, half what it attends to)
    attention_flow     the same paper's max-flow variant: a graph with a node per (layer boundary l,
                       token t), an edge (l+1, i) -> (l, j) of capacity A_l[i, j]; flow[i, j] = the
                       maximum flow from output token i (top) to input token j (bottom), each row
                       normalised to sum to 1.  T^2 max-flows per example: meant for short inputs.
    grad_rollout       Chefer, Gur & Wolf 2021, "Generic Attention-model Explainability":
                           Abar_l = mean over heads of max(dF/dW_l * W_l, 0)      (B, T, T)
                           R = I;  R = R + Abar_l R  for l = 0 .. L-1
                       dF/dW_l: the gradient of the target with respect to layer l's attention
                       probabilities (model.backward(..., return_intermediate_grads=True)).

Row i of the result is output token i's relevance over the input tokens; `token_attributions`
is the [CLS] row (position 0), what classification heads read.

    B = examples, L = layers, N = heads, T = tokens
"""
import time
from collections import deque

import numpy as np

from npbert.modeling import no_grad

from .layer_runs import inspecting, prepare_inputs
from .targets import check_output_shapes, resolve_target


class AttentionRelevance:
    """relevance (B, T, T): row i, output token i over input tokens; token_attributions (B, T): row 0."""

    def __init__(self, relevance, method):
        self.relevance = relevance
        self.token_attributions = relevance[:, 0, :]
        self.method = method

    def __repr__(self):
        return f"AttentionRelevance(method={self.method!r}, relevance={self.relevance.shape})"


def _model_inputs(model, inputs):
    inputs, _ = prepare_inputs(model, inputs)
    return inputs


def _attentions(model, inputs):
    """Every layer's attention probabilities, L arrays (B, N, T, T), in eval mode."""
    with inspecting(model), no_grad():
        return model(**inputs, output_attentions=True).attentions


def augmented(attention):
    """renormalise(0.5 mean_heads(W) + 0.5 I): (B, N, T, T) -> (B, T, T), rows summing to 1."""
    W = attention.mean(axis=1)                                                  # (B, T, T)
    A = 0.5 * W + 0.5 * np.eye(W.shape[-1], dtype=W.dtype)
    return A / A.sum(axis=-1, keepdims=True)


def rollout(attentions):
    """A_{L-1} ... A_0 for the L layers' attentions (B, N, T, T) each: (B, T, T)."""
    B, _, T, _ = attentions[0].shape
    joint = np.broadcast_to(np.eye(T, dtype=attentions[0].dtype), (B, T, T))
    for attention in attentions:                                                # layer 0 first
        joint = augmented(attention) @ joint
    return joint


def attention_rollout(model, inputs):
    """Abnar & Zuidema's attention rollout of `inputs` (the tokenizer's output). AttentionRelevance."""
    return AttentionRelevance(rollout(_attentions(model, _model_inputs(model, inputs))), "attention_rollout")


def attention_flow(model, inputs, max_tokens=64, progress=None):
    """Abnar & Zuidema's attention flow of `inputs`: AttentionRelevance.  Inputs longer than
    `max_tokens` are refused (T^2 max-flows on a graph of (L+1) T nodes each).  `progress`: called
    as progress(examples done, B, seconds, text) after each example."""
    inputs = _model_inputs(model, inputs)
    T = inputs["input_ids"].shape[1]
    if T > max_tokens:
        raise ValueError(f"attention_flow solves T^2 = {T * T} max-flow problems per example; the inputs have "
                         f"T = {T} tokens, more than max_tokens={max_tokens} (raise it to wait longer)")
    layers = [augmented(a) for a in _attentions(model, inputs)]                 # L x (B, T, T)
    B, flows, t0 = len(layers[0]), [], time.perf_counter()
    for b in range(B):
        flows.append(flow([a[b] for a in layers]))
        if progress is not None:
            progress(b + 1, B, time.perf_counter() - t0, "examples")
    return AttentionRelevance(np.stack(flows), "attention_flow")


def flow(layers):
    """Max-flow relevance for one example: layers[l] (T, T) the augmented attention of layer l.
    Returns (T, T): [i, j] the maximum flow from top node i to bottom node j, rows normalised."""
    L, T = len(layers), layers[0].shape[0]
    graph = _Network((L + 1) * T)
    for l, A in enumerate(layers):                       # node (l, t) is l T + t; edges go down a level
        for i in range(T):
            for j in range(T):
                if A[i, j] > 0:
                    graph.add_edge((l + 1) * T + i, l * T + j, float(A[i, j]))
    out = np.zeros((T, T))
    for i in range(T):
        for j in range(T):
            out[i, j] = graph.max_flow(L * T + i, j)
        out[i] /= out[i].sum()
    return out


class _Network:
    """A flow network with real capacities; max_flow(s, t) by Dinic's algorithm (BFS levels, then
    blocking flows along them by DFS), each call from zero flow."""

    def __init__(self, n):
        self.n = n
        self.head = [[] for _ in range(n)]     # node -> edge ids leaving it
        self.to, self.cap = [], []             # edge e and its reverse e ^ 1

    def add_edge(self, u, v, capacity):
        for a, b, c in ((u, v, capacity), (v, u, 0.0)):
            self.head[a].append(len(self.to))
            self.to.append(b)
            self.cap.append(c)

    def max_flow(self, s, t):
        residual = list(self.cap)
        eps = 1e-15 * max(self.cap, default=0.0)
        total = 0.0
        while True:
            level = self._levels(s, residual, eps)
            if level[t] < 0:
                return total
            pointer = [0] * self.n
            while True:
                pushed = self._push(s, t, float("inf"), level, pointer, residual, eps)
                if pushed <= eps:
                    break
                total += pushed

    def _levels(self, s, residual, eps):
        level = [-1] * self.n
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                v = self.to[e]
                if residual[e] > eps and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level

    def _push(self, u, t, limit, level, pointer, residual, eps):
        if u == t:
            return limit
        edges = self.head[u]
        while pointer[u] < len(edges):
            e = edges[pointer[u]]
            v = self.to[e]
            if residual[e] > eps and level[v] == level[u] + 1:
                pushed = self._push(v, t, min(limit, residual[e]), level, pointer, residual, eps)
                if pushed > eps:
                    residual[e] -= pushed
                    residual[e ^ 1] += pushed
                    return pushed
            pointer[u] += 1
        return 0.0


def grad_rollout(model, inputs, target):
    """Chefer et al.'s gradient-weighted rollout for `target` (targets.py). AttentionRelevance."""
    inputs = _model_inputs(model, inputs)
    B, T = inputs["input_ids"].shape
    target = resolve_target(model, target, B, T)
    with inspecting(model):
        out = model(**inputs, output_attentions=True)
        check_output_shapes(target, out, B)
        _, igrads = model.backward(**target.upstream(out, B), return_intermediate_grads=True)
    return AttentionRelevance(gradient_rollout(out.attentions, igrads.attentions), "grad_rollout")


def gradient_rollout(attentions, gradients):
    """R = I; R = R + mean_heads(max(grad * attention, 0)) R, layer 0 first: (B, T, T)."""
    B, _, T, _ = attentions[0].shape
    R = np.broadcast_to(np.eye(T, dtype=attentions[0].dtype), (B, T, T))
    for A, dA in zip(attentions, gradients):
        cam = np.maximum(dA * A, 0).mean(axis=1)                                # (B, T, T)
        R = R + cam @ R
    return R
