"""What one call of a model asks of its modules besides the formulas: `model.state.call`.

The modules compute their formulas from their arguments and the parameters.  A few features
need more from a whole call, through modules that do not take an argument for it (a head of
your own calls `self.bert.forward(...)` with transformers' arguments only): which rows the
batch is, whether to keep activations, which intermediates to hand back, an output to
replace.  Each reaches the modules through one field here, set for the length of a call by
the feature that owns it (`with state.call.setting(field=value):`) and read by the few
modules named below.

    field                    set by (the feature)                       read by
    batch_offset             model.batch_offset(a): data parallelism,   every dropout site (Module.dropout_rng,
                             the Trainer's micro-batches, the fast      nn.Dropout)
                             encoder's halves (halves.py); multiple
                             choice (rows_times)
    keep_caches              model(...) under npbert.no_grad()          the fast twins (free caches at once),
                                                                        BertLayer, BertEncoder (checkpointing)
    release_caches           model.backward(retain_graph=False)         the fast twins, BertEncoder (free each
                                                                        cache once read)
    intermediates            model(..., output_intermediates=True):     BertModel.forward, which appends the
                             a new list, read back when the forward     Intermediates of its layers
                             returns
    intermediate_grads       model.backward(return_intermediate_grads=  BertModel._backward, which appends the
                             True): a new list, read back when the      IntermediateGrads it computed
                             backward returns
    replaced_outputs         npbert.interpret (layers.py): run the      BertModel.forward
                             model from a given embeddings output
    attention_probs_read     npbert.interpret (inspecting): the         FastBertSelfAttention (no attention in tiles)
                             probabilities or their gradients will
                             be read after this forward

The options are the calling thread's own, and each `setting(...)` block sees a new options
object (the fields given changed, the rest as outside it): `model(...)` and `model.backward()`
open one, and the lists in `intermediates` and `intermediate_grads` are made by that one call,
which reads them back and returns what was appended.  Two threads calling one model never
see each other's fields; the fast encoder's two halves run in threads of their own and take
their caller's options (`adopted`).  What a model keeps between a forward and its backward
(its activations, `model.head_loss`) is the model's, not a call's: npbert/modeling/pretrained.py
says what happens when two threads share one model.

Freezing is not a call's: it is the parameters' (`requires_grad`, ModelState.frozen).
"""
import contextlib
import threading


class CallOptions:
    """The fields above with their defaults: a call that asks nothing more than the formulas."""

    __slots__ = ("batch_offset", "keep_caches", "release_caches", "intermediates", "intermediate_grads",
                 "replaced_outputs", "attention_probs_read")

    def __init__(self):
        self.batch_offset = 0              # the global index of this batch's first row
        self.keep_caches = True            # False in a forward under npbert.no_grad()
        self.release_caches = False        # True in a backward that may free each cache once read
        self.intermediates = None          # a list (model(..., output_intermediates=True)): BertModel appends to it
        self.intermediate_grads = None     # a list (model.backward(return_intermediate_grads=True)): the same
        self.replaced_outputs = {}         # module path -> the array its output is replaced by
        self.attention_probs_read = False  # the attention probabilities (or their gradients) will be read

    def copy(self, **fields):
        unknown = [name for name in fields if name not in self.__slots__]
        if unknown:
            raise AttributeError(f"CallOptions has no field(s) {unknown}; its fields: {list(self.__slots__)}")
        new = CallOptions.__new__(CallOptions)
        for name in self.__slots__:
            setattr(new, name, fields[name] if name in fields else getattr(self, name))
        return new


class CallScope:
    """`state.call`: the calling thread's CallOptions, one stack per thread and per model."""

    def __init__(self):
        self._local = threading.local()

    def __reduce__(self):                       # a copied model starts with no call running
        return CallScope, ()

    def _stack(self):
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = [CallOptions()]
        return stack

    @property
    def options(self):
        """The options in force in this thread now."""
        return self._stack()[-1]

    def __getattr__(self, name):
        if name in CallOptions.__slots__:
            return getattr(self._stack()[-1], name)
        raise AttributeError(f"state.call has no field {name!r}; its fields: {list(CallOptions.__slots__)}")

    def __setattr__(self, name, value):
        if name == "_local":
            object.__setattr__(self, name, value)
        elif name in CallOptions.__slots__:
            setattr(self._stack()[-1], name, value)     # this thread's innermost options only
        else:
            raise AttributeError(f"state.call has no field {name!r}; its fields: {list(CallOptions.__slots__)}")

    @contextlib.contextmanager
    def setting(self, **fields):
        """Within the block this thread sees new options, the given fields set and the rest as
        outside it; the block's options object is yielded."""
        return (yield from self._pushed(self.options.copy(**fields)))

    @contextlib.contextmanager
    def adopted(self, options, **fields):
        """Within the block this thread (a worker running part of another thread's call: the fast
        encoder's halves) sees a copy of that call's `options`, the given fields changed."""
        return (yield from self._pushed(options.copy(**fields)))

    def _pushed(self, options):
        stack = self._stack()
        stack.append(options)
        try:
            yield options
        finally:
            stack.pop()

    def rows_times(self, n):
        """Within the block, batch_offset counts n rows per row of the caller's batch (a multiple
        choice example is n flattened rows)."""
        return self.setting(batch_offset=self.batch_offset * n)
