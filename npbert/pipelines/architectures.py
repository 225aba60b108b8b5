"""Which tasks a checkpoint's head serves, from its config.json's `architectures`.

A head's weights can fit another task's class: a sequence classifier's `classifier.*` has
the shape of a token tagger's with the same labels, so loading it as a tagger gives every
token the sentence's labels with no warning (transformers does the same).  The class that
saved a checkpoint is in its config.json (`architectures`, written by save_pretrained), so a
pipeline or `npbert predict` refuses a task the head was not trained for, naming the
architecture and the tasks it serves.

    BertForSequenceClassification        text-classification
    BertForTokenClassification           token-classification
    BertForQuestionAnswering             question-answering
    BertForMultipleChoice                multiple-choice
    BertForMaskedLM, BertForPreTraining  fill-mask
    any of them, BertModel               feature-extraction (the encoder's output needs no head)

A config with no `architectures`, or one naming BertModel (a body with no head) or a class
npbert does not know, is not checked: loading it for a task initialises the head fresh, and
the loader's "newly initialized" warning says so, as before.
"""
import os

from npbert.config import BertConfig, find_config_file
from npbert.task_names import ARCHITECTURE_SERVES       # (the one table of tasks: npbert/task_names.py)

ALWAYS = ("feature-extraction",)          # the encoder's hidden states: every checkpoint has them


def check_architectures(task, architectures, where, how="task={task!r}", override=None):
    """Raise ValueError when every architecture named (a list, or None) has a head that does not
    serve `task` (a canonical task name).  `where` names the checkpoint in the message; `how`
    formats the way to ask for another task (e.g. "--task {task}"); `override` names the flag
    or keyword that runs the mismatch anyway."""
    known = [a for a in (architectures or ()) if a in ARCHITECTURE_SERVES]
    if not known or task in ALWAYS or any(task in ARCHITECTURE_SERVES[a] for a in known):
        return
    serves = sorted({t for a in known for t in ARCHITECTURE_SERVES[a]})
    name = known[0]
    instead = (" or ".join(how.format(task=t) for t in serves) if serves
               else "no task of npbert's pipelines but feature-extraction")
    raise ValueError(f"{where} is a {name} (config.json's architectures): its head was trained for "
                     f"{', '.join(serves) or 'another task'}, not {task}, and would give {task} answers from "
                     f"weights that mean something else. Use {instead}, or a checkpoint fine-tuned for {task}"
                     + (f" (or {override} to run it anyway)" if override else ""))


def check_model_for_task(task, model, ignore_architectures=False):
    """npbert.pipeline's check: `model` a checkpoint directory (its config.json is read) or an
    npbert model (its class and config.architectures)."""
    if ignore_architectures:
        return
    if isinstance(model, (str, os.PathLike)):
        try:
            find_config_file(os.fspath(model))
        except (OSError, ValueError):
            return                                  # no config: the loader reports it
        architectures = getattr(BertConfig.from_pretrained(os.fspath(model)), "architectures", None)
        where = os.fspath(model)
    else:
        architectures = [type(model).__name__] + list(getattr(model.config, "architectures", None) or [])
        where = f"the model ({type(model).__name__})"
        if type(model).__name__ in ARCHITECTURE_SERVES:
            architectures = [type(model).__name__]
    check_architectures(task, architectures, where, how="pipeline({task!r}, ...)",
                        override="ignore_architectures=True")
