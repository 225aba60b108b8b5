"""Seed 001 (如何应用一个BERT, transformers 4.4.2's BERT heads): its usage listings as written on
transformers + torch, and with only the mechanical edits on npbert (tests/tutorials/listings.py),
on the same checkpoint; numbers and printed text compared.

float32 on both sides: logits agree to float32 round-off of differently ordered sums (rtol 1e-4,
atol 2e-5 for values of order 1-10); printed answers, tags and rounded percentages exactly.
"""
import numpy as np
import pytest

from listings import as_numpy, edit, run, torch_side as torch_version

LOGITS = dict(rtol=1e-4, atol=2e-5)          # float32, two implementations (see the docstring)

PRETRAINING = '''
from transformers import BertTokenizer, BertForPreTraining
import torch
tokenizer = BertTokenizer.from_pretrained('bert-base-uncased')
model = BertForPreTraining.from_pretrained('bert-base-uncased')
inputs = tokenizer("Hello, my dog is cute", return_tensors="pt")
outputs = model(**inputs)
prediction_logits = outputs.prediction_logits
seq_relationship_logits = outputs.seq_relationship_logits
'''
PRETRAINING_NPBERT = '''
from npbert import BertTokenizer, BertForPreTraining
import numpy as np
tokenizer = BertTokenizer.from_pretrained('bert-base-uncased')
model = BertForPreTraining.from_pretrained('bert-base-uncased')
inputs = tokenizer("Hello, my dog is cute", return_tensors="np")
outputs = model(**inputs)
prediction_logits = outputs.prediction_logits
seq_relationship_logits = outputs.seq_relationship_logits
'''

LM_HEAD = '''
from transformers import BertTokenizer, BertLMHeadModel, BertConfig
import torch
tokenizer = BertTokenizer.from_pretrained('bert-base-uncased')
config = BertConfig.from_pretrained("bert-base-uncased")
config.is_decoder = True
model = BertLMHeadModel.from_pretrained('bert-base-uncased', config=config)
inputs = tokenizer("Hello, my dog is cute", return_tensors="pt")
outputs = model(**inputs)
prediction_logits = outputs.logits
'''

NSP = '''
from transformers import BertTokenizer, BertForNextSentencePrediction
import torch
tokenizer = BertTokenizer.from_pretrained('bert-base-uncased')
model = BertForNextSentencePrediction.from_pretrained('bert-base-uncased')
prompt = "In Italy, pizza served in formal settings, such as at a restaurant, is presented unsliced."
next_sentence = "The sky is blue due to the shorter wavelength of blue light."
encoding = tokenizer(prompt, next_sentence, return_tensors='pt')
outputs = model(**encoding, labels=torch.LongTensor([1]))
logits = outputs.logits
assert logits[0, 0] < logits[0, 1] # next sentence was random
'''
NSP_NPBERT = '''
from npbert import BertTokenizer, BertForNextSentencePrediction
import numpy as np
tokenizer = BertTokenizer.from_pretrained('bert-base-uncased')
model = BertForNextSentencePrediction.from_pretrained('bert-base-uncased')
prompt = "In Italy, pizza served in formal settings, such as at a restaurant, is presented unsliced."
next_sentence = "The sky is blue due to the shorter wavelength of blue light."
encoding = tokenizer(prompt, next_sentence, return_tensors='np')
outputs = model(**encoding, labels=np.array([1]))
logits = outputs.logits
assert logits[0, 0] < logits[0, 1] # next sentence was random
'''

MRPC = '''
import torch
from transformers.models.bert.tokenization_bert import BertTokenizer
from transformers.models.bert.modeling_bert import BertForSequenceClassification
tokenizer = BertTokenizer.from_pretrained("bert-base-cased-finetuned-mrpc")
model = BertForSequenceClassification.from_pretrained("bert-base-cased-finetuned-mrpc")
classes = ["not paraphrase", "is paraphrase"]
sequence_0 = "The company HuggingFace is based in New York City"
sequence_1 = "Apples are especially bad for your health"
sequence_2 = "HuggingFace's headquarters are situated in Manhattan"
# The tokekenizer will automatically add any model specific separators (i.e. <CLS> and <SEP>) and tokens to the sequence, as well as compute the attention masks.
paraphrase = tokenizer(sequence_0, sequence_2, return_tensors="pt")
not_paraphrase = tokenizer(sequence_0, sequence_1, return_tensors="pt")
paraphrase_classification_logits = model(**paraphrase).logits
not_paraphrase_classification_logits = model(**not_paraphrase).logits
paraphrase_results = torch.softmax(paraphrase_classification_logits, dim=1).tolist()[0]
not_paraphrase_results = torch.softmax(not_paraphrase_classification_logits, dim=1).tolist()[0]
# Should be paraphrase
for i in range(len(classes)):
    print(f"{classes[i]}: {int(round(paraphrase_results[i] * 100))}%")
# Should not be paraphrase
for i in range(len(classes)):
    print(f"{classes[i]}: {int(round(not_paraphrase_results[i] * 100))}%")
'''
MRPC_NPBERT = '''
import npbert.functional as F
import numpy as np
from npbert import BertTokenizer
from npbert import BertForSequenceClassification
tokenizer = BertTokenizer.from_pretrained("bert-base-cased-finetuned-mrpc")
model = BertForSequenceClassification.from_pretrained("bert-base-cased-finetuned-mrpc")
classes = ["not paraphrase", "is paraphrase"]
sequence_0 = "The company HuggingFace is based in New York City"
sequence_1 = "Apples are especially bad for your health"
sequence_2 = "HuggingFace's headquarters are situated in Manhattan"
# The tokekenizer will automatically add any model specific separators (i.e. <CLS> and <SEP>) and tokens to the sequence, as well as compute the attention masks.
paraphrase = tokenizer(sequence_0, sequence_2, return_tensors="np")
not_paraphrase = tokenizer(sequence_0, sequence_1, return_tensors="np")
paraphrase_classification_logits = model(**paraphrase).logits
not_paraphrase_classification_logits = model(**not_paraphrase).logits
paraphrase_results = F.softmax(paraphrase_classification_logits, dim=1).tolist()[0]
not_paraphrase_results = F.softmax(not_paraphrase_classification_logits, dim=1).tolist()[0]
# Should be paraphrase
for i in range(len(classes)):
    print(f"{classes[i]}: {int(round(paraphrase_results[i] * 100))}%")
# Should not be paraphrase
for i in range(len(classes)):
    print(f"{classes[i]}: {int(round(not_paraphrase_results[i] * 100))}%")
'''

NER = '''
from transformers import BertForTokenClassification, BertTokenizer
import torch

model = BertForTokenClassification.from_pretrained("dbmdz/bert-large-cased-finetuned-conll03-english")
tokenizer = BertTokenizer.from_pretrained("bert-base-cased")

label_list = [
"O",       # Outside of a named entity
"B-MISC",  # Beginning of a miscellaneous entity right after another miscellaneous entity
"I-MISC",  # Miscellaneous entity
"B-PER",   # Beginning of a person's name right after another person's name
"I-PER",   # Person's name
"B-ORG",   # Beginning of an organisation right after another organisation
"I-ORG",   # Organisation
"B-LOC",   # Beginning of a location right after another location
"I-LOC"    # Location
]

sequence = "Hugging Face Inc. is a company based in New York City. Its headquarters are in DUMBO, therefore very close to the Manhattan Bridge."

# Bit of a hack to get the tokens with the special tokens
tokens = tokenizer.tokenize(tokenizer.decode(tokenizer.encode(sequence)))
inputs = tokenizer.encode(sequence, return_tensors="pt")

outputs = model(inputs).logits
predictions = torch.argmax(outputs, dim=2)

for token, prediction in zip(tokens, predictions[0].numpy()):
    print((token, model.config.id2label[prediction]))
'''
NER_NPBERT = '''
from npbert import BertForTokenClassification, BertTokenizer
import numpy as np

model = BertForTokenClassification.from_pretrained("dbmdz/bert-large-cased-finetuned-conll03-english")
tokenizer = BertTokenizer.from_pretrained("bert-base-cased")

label_list = [
"O",       # Outside of a named entity
"B-MISC",  # Beginning of a miscellaneous entity right after another miscellaneous entity
"I-MISC",  # Miscellaneous entity
"B-PER",   # Beginning of a person's name right after another person's name
"I-PER",   # Person's name
"B-ORG",   # Beginning of an organisation right after another organisation
"I-ORG",   # Organisation
"B-LOC",   # Beginning of a location right after another location
"I-LOC"    # Location
]

sequence = "Hugging Face Inc. is a company based in New York City. Its headquarters are in DUMBO, therefore very close to the Manhattan Bridge."

# Bit of a hack to get the tokens with the special tokens
tokens = tokenizer.tokenize(tokenizer.decode(tokenizer.encode(sequence)))
inputs = tokenizer.encode(sequence, return_tensors="np")

outputs = model(inputs).logits
predictions = np.argmax(outputs, axis=2)

for token, prediction in zip(tokens, predictions[0]):
    print((token, model.config.id2label[prediction]))
'''

QA = '''
from transformers import AutoTokenizer, AutoModelForQuestionAnswering
import torch

tokenizer = AutoTokenizer.from_pretrained("bert-large-uncased-whole-word-masking-finetuned-squad")
model = AutoModelForQuestionAnswering.from_pretrained("bert-large-uncased-whole-word-masking-finetuned-squad")

text = "ğ Transformers (formerly known as pytorch-transformers and pytorch-pretrained-bert) provides general-purpose architectures (BERT, GPT-2, RoBERTa, XLM, DistilBert, XLNet…) for Natural Language Understanding (NLU) and Natural Language Generation (NLG) with over 32+ pretrained models in 100+ languages and deep interoperability between TensorFlow 2.0 and PyTorch."

questions = [
"How many pretrained models are available in ğ Transformers?",
"What does ğ Transformers provide?",
"ğ Transformers provides interoperability between which frameworks?",
]

for question in questions:
    inputs = tokenizer(question, text, add_special_tokens=True, return_tensors="pt")
    input_ids = inputs["input_ids"].tolist()[0]
    outputs = model(**inputs)
    answer_start_scores = outputs.start_logits
    answer_end_scores = outputs.end_logits
    answer_start = torch.argmax(
        answer_start_scores
    )  # Get the most likely beginning of answer with the argmax of the score
    answer_end = torch.argmax(answer_end_scores) + 1  # Get the most likely end of answer with the argmax of the score
    answer = tokenizer.convert_tokens_to_string(tokenizer.convert_ids_to_tokens(input_ids[answer_start:answer_end]))
    print(f"Question: {question}")
    print(f"Answer: {answer}")
'''

ADAMW = '''
# model: a Bert-based-model object
# learning_rate: default 2e-5 for text classification
param_optimizer = list(model.named_parameters())
no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']
optimizer_grouped_parameters = [
    {'params': [p for n, p in param_optimizer if not any(
        nd in n for nd in no_decay)], 'weight_decay': 0.01},
    {'params': [p for n, p in param_optimizer if any(
        nd in n for nd in no_decay)], 'weight_decay': 0.0}
]
optimizer = AdamW(optimizer_grouped_parameters,
                  lr=learning_rate)
'''

SCHEDULERS = '''
from transformers.optimization import (SchedulerType, get_linear_schedule_with_warmup, get_cosine_schedule_with_warmup,
    get_cosine_with_hard_restarts_schedule_with_warmup, get_polynomial_decay_schedule_with_warmup,
    get_constant_schedule, get_constant_schedule_with_warmup, get_scheduler)
TYPE_TO_SCHEDULER_FUNCTION = {
    SchedulerType.LINEAR: get_linear_schedule_with_warmup,
    SchedulerType.COSINE: get_cosine_schedule_with_warmup,
    SchedulerType.COSINE_WITH_RESTARTS: get_cosine_with_hard_restarts_schedule_with_warmup,
    SchedulerType.POLYNOMIAL: get_polynomial_decay_schedule_with_warmup,
    SchedulerType.CONSTANT: get_constant_schedule,
    SchedulerType.CONSTANT_WITH_WARMUP: get_constant_schedule_with_warmup,
}
'''


def _both(torch_side, checkpoints, original, npbert_code, hubs, level="mechanical", torch_names=None):
    """Run `original` on transformers (torch_version: transformers 5's replacements) and
    `npbert_code`, which must be exactly edit(original, level)."""
    assert npbert_code == edit(original, level)
    dirs = {name: checkpoints(kind) for name, kind in hubs.items()}
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # loading messages on both sides
        theirs = run(torch_version(original), dirs, torch_names)
        ours = run(npbert_code, dirs)
    return theirs, ours


def test_pretraining_example(torch_side, checkpoints):
    (t, _), (n, _) = _both(torch_side, checkpoints, PRETRAINING, PRETRAINING_NPBERT, {"bert-base-uncased": "pretraining"})
    assert n["inputs"]["input_ids"].tolist() == as_numpy(t["inputs"]["input_ids"]).tolist() == \
        [[101, 7592, 1010, 2026, 3899, 2003, 10140, 102]]
    for name in ("prediction_logits", "seq_relationship_logits"):
        np.testing.assert_allclose(n[name], as_numpy(t[name]), **LOGITS)


def test_lm_head_model_example(torch_side, checkpoints):
    (t, _), (n, _) = _both(torch_side, checkpoints, LM_HEAD, edit(LM_HEAD), {"bert-base-uncased": "pretraining"})
    assert n["config"].is_decoder and type(n["model"]).__name__ == "BertLMHeadModel"
    np.testing.assert_allclose(n["prediction_logits"], as_numpy(t["prediction_logits"]), **LOGITS)


def test_next_sentence_prediction_example(torch_side, checkpoints):
    """The listing's own assert runs on both sides (the checkpoint's NSP head says "random")."""
    (t, _), (n, _) = _both(torch_side, checkpoints, NSP, NSP_NPBERT, {"bert-base-uncased": "pretraining"})
    np.testing.assert_allclose(n["logits"], as_numpy(t["logits"]), **LOGITS)
    np.testing.assert_allclose(float(n["outputs"].loss), float(t["outputs"].loss), rtol=1e-5)


def test_sequence_classification_mrpc_example(torch_side, checkpoints):
    (t, t_out), (n, n_out) = _both(torch_side, checkpoints, MRPC, MRPC_NPBERT,
                                   {"bert-base-cased-finetuned-mrpc": "mrpc"}, level="numpy")
    assert n_out == t_out and len(n_out.splitlines()) == 4            # the four printed percentages
    np.testing.assert_allclose(n["paraphrase_results"], t["paraphrase_results"], rtol=1e-5, atol=1e-6)


def test_token_classification_ner_example(torch_side, checkpoints):
    (t, t_out), (n, n_out) = _both(torch_side, checkpoints, NER, NER_NPBERT,
                                   {"dbmdz/bert-large-cased-finetuned-conll03-english": "ner",
                                    "bert-base-cased": "ner"}, level="numpy")
    assert n_out == t_out                                              # every (token, tag) line
    assert n_out.startswith("('[CLS]', '") and n_out.rstrip().splitlines()[-1].startswith("('[SEP]', '")
    assert n["tokens"] == t["tokens"] and len(n_out.splitlines()) == len(n["tokens"])
    np.testing.assert_allclose(n["outputs"], as_numpy(t["outputs"]), **LOGITS)


def test_question_answering_example(torch_side, checkpoints):
    """AutoTokenizer / AutoModelForQuestionAnswering and the printed answers, whose spacing is
    transformers' convert_tokens_to_string (clean_up_tokenization_spaces)."""
    code = edit(QA, "numpy")
    (t, t_out), (n, n_out) = _both(torch_side, checkpoints, QA, code,
                                   {"bert-large-uncased-whole-word-masking-finetuned-squad": "qa"}, level="numpy")
    assert n_out == t_out and n_out.count("Answer:") == 3
    assert type(n["model"]).__name__ == "BertForQuestionAnswering"


def test_tied_weights(torch_side, checkpoints):
    """transformers' tie_weights: the decoder's weight is the word embeddings' (one object), on
    both sides, before and after tie_weights(); the parameter count counts it once."""
    code = '''
model = BertForPreTraining.from_pretrained('bert-base-uncased')
model.tie_weights()
print(model.get_output_embeddings().weight is model.get_input_embeddings().weight)
print(model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight)
print(sum(p.numel() for p in model.parameters()))
'''
    torch, transformers = torch_side
    import npbert
    d = {"bert-base-uncased": checkpoints("pretraining")}
    _, theirs = run(code, d, {"BertForPreTraining": transformers.BertForPreTraining})
    _, ours = run(code, d, {"BertForPreTraining": npbert.BertForPreTraining})
    assert ours == theirs and ours.splitlines()[:2] == ["True", "True"]


def test_adamw_no_decay_groups_train_as_torch(torch_side, checkpoints):
    """The listing's groups, then three steps of the torch loop (loss.backward(); optimizer.step();
    optimizer.zero_grad()), in float64 with dropout off on both sides: the parameters agree to
    round-off (1e-10; the updates are ~1e-5, so a wrong rule or group would show 1e5 times over).
    On conftest's small random classifier: the rule and the groups are what is tested, and a step
    of MiniLM in float64 costs seconds on each side."""
    torch, transformers = torch_side
    import npbert
    import npbert.optim
    directory = checkpoints("small_cls")
    batch = dict(input_ids=[[101, 7592, 1010, 2026, 3899, 102], [101, 2026, 3899, 2003, 102, 0]],
                 attention_mask=[[1] * 6, [1] * 5 + [0]], labels=[1, 0])
    loop = "\nfor _ in range(3):\n    loss = model(**batch).loss\n    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n"
    off = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    t_model = transformers.BertForSequenceClassification.from_pretrained(directory, **off).double().train()
    n_model = npbert.BertForSequenceClassification.from_pretrained(directory, dtype=np.float64, **off).train()
    start = n_model.classifier.weight.copy()
    t, _ = run(ADAMW + loop, None, {"model": t_model, "learning_rate": 2e-5, "AdamW": torch.optim.AdamW,
                                    "batch": {k: torch.tensor(v) for k, v in batch.items()}})
    n, _ = run(ADAMW + loop, None, {"model": n_model, "learning_rate": 2e-5, "AdamW": npbert.AdamW,
                                    "batch": {k: np.array(v) for k, v in batch.items()}})
    assert [len(g["params"]) for g in n["optimizer"].param_groups] == [len(g["params"]) for g in t["optimizer"].param_groups]
    for (name, p), (_, q) in zip(n_model.named_parameters(), t_model.named_parameters()):
        np.testing.assert_allclose(p, as_numpy(q), rtol=0, atol=1e-10, err_msg=name)
    assert np.max(np.abs(n_model.classifier.weight - start)) > 1e-5      # the steps did move the parameters


def test_every_scheduler(torch_side):
    """The listing's TYPE_TO_SCHEDULER_FUNCTION table, and get_scheduler for each of its names:
    the learning rate at every step equals transformers'."""
    torch, transformers = torch_side
    from npbert import optim
    t, _ = run(SCHEDULERS)
    n, _ = run(edit(SCHEDULERS))
    assert [k.value for k in n["TYPE_TO_SCHEDULER_FUNCTION"]] == [k.value for k in t["TYPE_TO_SCHEDULER_FUNCTION"]]
    for kind in n["TYPE_TO_SCHEDULER_FUNCTION"]:
        their_opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=2e-5)
        our_opt = optim.AdamW([("w", np.zeros(1))], lr=2e-5)
        theirs = t["get_scheduler"](kind.value, their_opt, num_warmup_steps=3, num_training_steps=10)
        ours = n["get_scheduler"](kind, our_opt, num_warmup_steps=3, num_training_steps=10)
        by_table = n["TYPE_TO_SCHEDULER_FUNCTION"][kind]
        assert by_table.__name__ == t["TYPE_TO_SCHEDULER_FUNCTION"][transformers.SchedulerType(kind.value)].__name__
        for step in range(12):
            assert np.isclose(ours.get_last_lr()[0], theirs.get_last_lr()[0], rtol=1e-12, atol=0), (kind, step)
            their_opt.step()
            our_opt.step({"w": np.zeros(1)})
            theirs.step()
            ours.step()
