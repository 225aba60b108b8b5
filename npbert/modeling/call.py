"""What one call of a model asks of its modules besides the formulas: `model.state.call`.

The modules compute their formulas from their inputs and the parameters.  A few features need
more from a call: which rows the batch is, whether to keep activations, which intermediates to
hand back, an output to replace.  Each reaches the modules through one field here, set for the
length of a call by the feature that owns it (`with state.call.setting(field=value):`) and read
by the few modules named below.  Nothing else is shared between a feature and the core classes.

    field                    set by (the feature)                       read by
    batch_offset             model.batch_offset(a): data parallelism,   every dropout site (Module.dropout_rng,
                             the Trainer's micro-batches                nn.Dropout); multiple choice (rows_times)
    keep_caches              model(...) under npbert.no_grad()          the fast twins (free caches at once),
                                                                        checkpointing (BertEncoder)
    release_caches           model.backward(retain_graph=False)         the fast twins (free each cache once read)
    read_rows                a head reading the pooled output only      FastBertEncoder (its last layer, that row)
                             (heads/base.py)
    keep_intermediates,      model(..., output_intermediates=True),     BertModel (records of every layer)
    intermediates            npbert/modeling/outputs.py
    keep_intermediate_grads, model.backward(return_intermediate_grads=  BertModel._backward
    intermediate_grads       True)
    replaced_outputs         npbert.interpret (layers.py): run the      BertModel.forward, FastBertEncoder (the
                             model from a given embeddings output,      integrated-gradients lines)
                             or the lines of integrated gradients
    need_inputs_embeds_grad  npbert.interpret; a user who wants         BertModel._backward (with frozen layers)
                             model.inputs_embeds_grad with every
                             parameter below frozen
    attention_probs_read     npbert.interpret (inspecting): the         FastBertEncoder (no attention in tiles)
                             probabilities or their gradients will
                             be read after this forward

The fast twins take one more, keyword-only argument, `extra=FastArgs(...)` (below): what the
fast encoder asks of one layer beyond the reference signature (its rows, its attention in tiles).

Freezing is not a call's: it is the parameters' (`requires_grad`, ModelState.frozen).
"""
import contextlib
import dataclasses


class CallOptions:
    """The fields above with their defaults: a call that asks nothing more than the formulas."""

    def __init__(self):
        self.batch_offset = 0              # the global index of this batch's first row
        self.keep_caches = True            # False in a forward under npbert.no_grad()
        self.release_caches = False        # True in a backward that may free each cache once read
        self.read_rows = None              # (a, b): the only rows of the last hidden state the head reads
        self.keep_intermediates = False    # in a forward called with output_intermediates=True
        self.intermediates = None          # what that forward kept, until model(...) hands it over
        self.keep_intermediate_grads = False   # in a backward called with return_intermediate_grads=True
        self.intermediate_grads = None     # what that backward computed, until it returns them
        self.replaced_outputs = {}         # module path -> the array its output is replaced by
        self.need_inputs_embeds_grad = False   # compute model.inputs_embeds_grad even when all below is frozen
        self.attention_probs_read = False  # the attention probabilities (or their gradients) will be read

    @contextlib.contextmanager
    def setting(self, **fields):
        """Within the block the given fields have the given values; after it, their values before."""
        unknown = [name for name in fields if name not in vars(self)]
        if unknown:
            raise AttributeError(f"CallOptions has no field(s) {unknown}; its fields: {list(vars(self))}")
        before = {name: getattr(self, name) for name in fields}
        for name, value in fields.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in before.items():
                setattr(self, name, value)

    def rows_times(self, n):
        """Within the block, batch_offset counts n rows per row of the caller's batch (a multiple
        choice example is n flattened rows)."""
        return self.setting(batch_offset=self.batch_offset * n)


@dataclasses.dataclass(frozen=True)
class FastArgs:
    """What a fast twin's forward takes beyond its reference class's arguments, as the keyword
    `extra=` (npbert/modeling/fast.py): a twin called without it computes what its reference
    class computes, the same way.  The encoder makes one per layer call."""
    first_row: int = None        # the global index of the first row computed (a half of the batch);
                                 # None: model.batch_offset
    rows: tuple = None           # (a, b): compute rows [a, b) of the output only (the last layer,
                                 # when the head reads the [CLS] row alone)
    all_queries: bool = False    # with rows: the attention of every query row (its probabilities are read)
    lines: object = None         # the AffineRows the input's rows are (the first layer under
                                 # integrated gradients, npbert/ops/affine_rows.py)
    tiles: bool = False          # attention in tiles (npbert/fast/tiled_attention.py): no probabilities


NO_EXTRA = FastArgs()
