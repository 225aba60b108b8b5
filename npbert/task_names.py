"""The task names, defined once: `npbert finetune --task`, `npbert predict --task` and
`npbert.pipeline(task)` accept the same names and the same aliases (transformers' pipeline names,
with their aliases, and the name `npbert finetune` used first).

    task                   aliases                                   the head that serves it
    text-classification    sequence-classification, sentiment-analysis  BertForSequenceClassification
    token-classification   ner                                        BertForTokenClassification
    question-answering                                                BertForQuestionAnswering
    multiple-choice                                                   BertForMultipleChoice
    fill-mask                                                         BertForMaskedLM, BertForPreTraining
    feature-extraction                                                any (the encoder's output), BertModel

Each command runs some of the tasks (finetune trains the first four, predict the first five, the
pipelines all but multiple-choice) and names the command that runs the others.  No imports: the
command line reads this table before anything heavy is loaded.
"""

TASKS = ("text-classification", "token-classification", "question-answering", "multiple-choice", "fill-mask",
         "feature-extraction")
TASK_ALIASES = {"sequence-classification": "text-classification", "sentiment-analysis": "text-classification",
                "ner": "token-classification"}

# The tasks each head class serves (from config.json's `architectures`); every checkpoint serves
# feature-extraction too (npbert/pipelines/architectures.py).
ARCHITECTURE_SERVES = {
    "BertForSequenceClassification": ("text-classification",),
    "BertForChunkedSequenceClassification": ("text-classification",),
    "BertForTokenClassification": ("token-classification",),
    "BertForQuestionAnswering": ("question-answering",),
    "BertForMultipleChoice": ("multiple-choice",),
    "BertForMaskedLM": ("fill-mask",),
    "BertForPreTraining": ("fill-mask",),
    "BertForNextSentencePrediction": (),
    "BertLMHeadModel": (),
}
# The task a checkpoint was trained for, by the first architecture its config.json names.
ARCHITECTURE_TASKS = {**{name: tasks[0] for name, tasks in ARCHITECTURE_SERVES.items() if tasks},
                      "BertModel": "feature-extraction"}


def canonical_task(name):
    """The task `name` stands for (an alias resolved); a name that is no task is returned as is."""
    return TASK_ALIASES.get(name, name)


def task_names(tasks=TASKS):
    """Every name accepted for `tasks`: each task followed by its aliases."""
    return [n for task in tasks for n in (task, *sorted(a for a, t in TASK_ALIASES.items() if t == task))]


def describe_tasks(tasks=TASKS):
    """"text-classification (or sequence-classification, sentiment-analysis), token-classification (or ner), ..."."""
    parts = []
    for task in tasks:
        aliases = sorted(a for a, t in TASK_ALIASES.items() if t == task)
        parts.append(f"{task} (or {', '.join(aliases)})" if aliases else task)
    return ", ".join(parts)
