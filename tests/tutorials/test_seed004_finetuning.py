"""Seed 004 (BERT 精调实战, a fine-tuning course): loading with the course's keywords, the
tokenizer on Chinese text, the training loop with loss.backward(), the evaluation loop, the
parameter groups (no_decay, a larger rate for the head, layer-wise rates over
`model.bert.encoder.layer[i].parameters()`), BERTAdam with warmup.  Each listing as written runs
on transformers + torch and, with the mechanical edits (tests/tutorials/listings.py), on npbert.

The training comparisons run on a small random classifier saved by npbert (the course's Chinese
checkpoint is not available; conftest.py's `small_cls`), in float64 with dropout off on both sides (the model classes the
course's MODEL_CLASSES table binds are given dtype float64 and dropout 0, outside the listings):
then the parameters after the steps agree to round-off, 1e-10 (a step moves them by ~lr = 2e-5,
so a wrong learning rate, group or update rule shows a million times over).
"""
import types
import warnings

import numpy as np
import pytest

from listings import as_numpy, edit, run, torch_side as torch_version

TRAIN = [  # two small batches of TNEWS-like classification: (input_ids, attention_mask, token_type_ids, labels)
    ([[101, 2651, 2003, 2025, 2008, 2919, 102, 0], [101, 2651, 2003, 2061, 2919, 102, 0, 0]],
     [[1] * 7 + [0], [1] * 6 + [0, 0]], [[0] * 8, [0] * 8], [1, 0]),
    ([[101, 2061, 2204, 102, 0, 0, 0, 0], [101, 1996, 4937, 2938, 2006, 1996, 13523, 102]],
     [[1] * 4 + [0] * 4, [1] * 8], [[0] * 8, [0] * 8], [1, 1]),
]

LOAD = '''
tokenizer = BertTokenizer.from_pretrained(pretrained_weights)
model = BertForTokenClassification.from_pretrained(pretrained_weights)
'''
ENCODE = '''
input_ids = torch.tensor([tokenizer.encode("夕小瑶的卖萌屋", add_special_tokens=True)])
with torch.no_grad():
    last_hidden_states = model(input_ids)[0]
    print(last_hidden_states)
'''
CHINESE = '''
tokens = tokenizer.tokenize("欢迎来到本次课程")
input_ids = tokenizer.convert_tokens_to_ids(tokens)
a = tokenizer.tokenize('我爱中国！')  #['我', '爱', '中', '国', '!']
b = tokenizer.tokenize('Massachusetts ASTON MAGNA Great Barrington')
'''
PREPRO = '''
# prepro.py
tokens = tokenizer.tokenize(text, add_special_tokens=True)
tokens = ["[CLS]"]+tokens[:max_length-2]+["[SEP]"]
text_len = len(tokens)
input_ids = tokenizer.convert_tokens_to_ids(tokens+["[PAD]"]*(max_length-text_len))
attention_mask = [1]*text_len+[0]*(max_length-text_len)
token_type_ids = [0]*max_length
'''


def test_loading_encoding_and_chinese_tokens(torch_side, checkpoints):
    """The course's first lines: from_pretrained on a local directory, encode a Chinese title,
    the model's first output under no_grad; tokenize Chinese and cased English; prepro.py's ids."""
    torch, transformers = torch_side
    import npbert
    hubs = {"chinese_wwm_pytorch": checkpoints("ner")}
    sides = {}
    for side, lib in (("torch", transformers), ("npbert", npbert)):
        tr = (lambda c: c) if side == "torch" else (lambda c: edit(c, "numpy"))
        ns = {"BertTokenizer": lib.BertTokenizer, "BertForTokenClassification": lib.BertForTokenClassification,
              "pretrained_weights": "chinese_wwm_pytorch", "torch": torch, "text": "欢迎来到本次课程 hello world",
              "max_length": 16}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns, _ = run("pretrained_weights = 'chinese_wwm_pytorch'\n" + LOAD, hubs, ns)
        for code in (ENCODE, CHINESE, PREPRO):
            ns, out = run(tr(code), hubs, ns)
            if code is CHINESE:
                ns["chinese"] = ns["tokens"]
        sides[side] = ns
    t, n = sides["torch"], sides["npbert"]
    assert edit(ENCODE, "numpy").startswith("\nimport numpy as np\nimport npbert\ninput_ids = np.array([tokenizer.encode(")
    np.testing.assert_allclose(n["last_hidden_states"], as_numpy(t["last_hidden_states"]), rtol=1e-4, atol=2e-5)
    assert n["chinese"] == t["chinese"] and len(n["chinese"]) == 8       # one token per character (some [UNK]:
    #                                                                    bert-base-uncased's vocabulary, not a Chinese one)
    assert n["a"] == t["a"] and len(n["a"]) == 5     # the course prints ['我', '爱', '中', '国', '!'] with a Chinese vocabulary
    assert n["b"] == t["b"]                           # uncased here: 'massachusetts', 'aston', ...
    assert n["input_ids"] == t["input_ids"] and len(n["input_ids"]) == 16


MODEL_CLASSES = '''
MODEL_CLASSES = {
    "classification": (BertConfig, BertForSequenceClassification, BertTokenizer),
    "matching": (BertConfig, BertForSequenceClassification, BertTokenizer),
    "ner": (BertConfig, BertForTokenClassification, BertTokenizer),
}
config_class, model_class, tokenizer_class = MODEL_CLASSES[args.model_type]
'''
SETUP = '''
# main.py
# 加载配置项，num_labels是分类的类别数量
config = config_class.from_pretrained(
        args.config_name if args.config_name else args.model_name_or_path,
        num_labels=num_labels,
        finetuning_task=args.task_name,
        cache_dir=args.cache_dir if args.cache_dir else None,
    )
tokenizer = tokenizer_class.from_pretrained(
    args.tokenizer_name if args.tokenizer_name else args.model_name_or_path,
    do_lower_case=args.do_lower_case,
    cache_dir=args.cache_dir if args.cache_dir else None,
)
model = model_class.from_pretrained(
        args.model_name_or_path,
        from_tf=bool(".ckpt" in args.model_name_or_path),
        config=config,
        cache_dir=args.cache_dir if args.cache_dir else None,
    )

# 优化器和学习率设置
no_decay = ["bias", "LayerNorm.weight"]
optimizer_grouped_parameters = [
{"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": args.weight_decay,},
{"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
"weight_decay": 0.0},]
optimizer = AdamW(optimizer_grouped_parameters, lr=args.learning_rate, eps=args.adam_epsilon)
scheduler = get_linear_schedule_with_warmup(
optimizer, num_warmup_steps=args.warmup_steps, num_training_steps=t_total
)
'''
TRAIN_LOOP = '''
# main.py
global_step = 0
tr_loss, logging_loss = 0.0, 0.0
model.zero_grad()
train_iterator = trange(0, int(args.num_train_epochs), desc="Epoch")
set_seed(args)
# train
for _ in train_iterator:
    epoch_iterator = tqdm(train_dataloader, desc="Iteration", disable=args.local_rank not in [-1, 0])
    for step, batch in enumerate(epoch_iterator):
        model.train()
        batch = tuple(t.to(args.device) for t in batch)
        # inputs
        inputs = {"input_ids": batch[0], "attention_mask": batch[1], "token_type_ids":batch[2], "labels": batch[3]}
        outputs = model(**inputs)
        loss = outputs[0]
        # BP
        loss.backward()
        tr_loss += loss.item()
        optimizer.step()
        scheduler.step()
        model.zero_grad()
        global_step += 1
'''
EVAL_LOOP = '''
# main.py
eval_loss = 0.0
nb_eval_steps = 0
preds = None
out_label_ids = None
#eval
for batch in tqdm(eval_dataloader, desc="Evaluating"):
    model.eval()
    batch = tuple(t.to(args.device) for t in batch)
    with torch.no_grad():
        inputs = {"input_ids": batch[0], "attention_mask": batch[1], "token_type_ids":batch[2], "labels": batch[3]}
        outputs = model(**inputs)
        tmp_eval_loss, logits = outputs[:2]
        eval_loss += tmp_eval_loss.mean().item()
        nb_eval_steps += 1
        # copy "logits" to cpu
        if preds is None:
            preds = logits.detach().cpu().numpy()
            out_label_ids = inputs["labels"].detach().cpu().numpy()
        else:
            preds = np.append(preds, logits.detach().cpu().numpy(), axis=0)
            out_label_ids = np.append(out_label_ids, inputs["labels"].detach().cpu().numpy(), axis=0)
# average
eval_loss = eval_loss / nb_eval_steps
if args.output_mode == "classification":
    preds = np.argmax(preds, axis=1)

#differant metrics based on different task
result = compute_metrics(preds, out_label_ids)
'''
# main.py's imports (BertForSequenceClassification comes from the test: the float64 class, below)
IMPORTS = "from transformers import AdamW, get_linear_schedule_with_warmup, BertConfig, BertTokenizer, " \
          "BertForTokenClassification\nfrom tqdm import tqdm, trange\n"


def _float64_without_dropout(cls, dtype):
    """The class the course's MODEL_CLASSES binds, loading in float64 with dropout off (outside the
    listing: it is how the two sides are made comparable, not what the course runs)."""
    class Loaded(cls):
        @classmethod
        def from_pretrained(klass, *args, **kwargs):
            if "config" in kwargs:
                kwargs["config"].hidden_dropout_prob = kwargs["config"].attention_probs_dropout_prob = 0.0
            else:
                kwargs.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
            model = cls.from_pretrained(*args, **kwargs, **({"dtype": np.float64} if dtype is None else {}))
            return model if dtype is None else model.to(dtype)
    Loaded.__name__ = cls.__name__
    return Loaded


def _course(side, torch, directory, epochs=2):
    """The course's namespace: its args, MODEL_CLASSES' classes, its data as batches of tensors."""
    import npbert
    import transformers
    args = types.SimpleNamespace(model_type="classification", config_name="", model_name_or_path=directory,
                                 task_name="tnews", cache_dir="", tokenizer_name="", do_lower_case=True,
                                 weight_decay=0.01, learning_rate=2e-5, adam_epsilon=1e-8, warmup_steps=1,
                                 num_train_epochs=epochs, local_rank=-1, device="cpu", output_mode="classification")
    make = (lambda v: torch.tensor(v)) if side == "torch" else np.array
    batches = [tuple(make(x) for x in b) for b in TRAIN]
    ns = {"args": args, "num_labels": 2, "t_total": epochs * len(batches), "train_dataloader": batches,
          "eval_dataloader": batches, "set_seed": lambda args: None, "torch": torch, "np": np,
          "compute_metrics": lambda preds, labels: {"acc": float((preds == labels).mean())}}
    lib = transformers if side == "torch" else npbert
    dtype = torch.float64 if side == "torch" else None
    ns["BertForSequenceClassification"] = _float64_without_dropout(lib.BertForSequenceClassification, dtype)
    return ns


def test_training_and_evaluation_loops_as_torch(torch_side, checkpoints):
    """main.py: MODEL_CLASSES, loading with num_labels / finetuning_task / cache_dir / from_tf /
    do_lower_case, the no_decay groups, AdamW + linear warmup, two epochs of the course's loop
    (loss = outputs[0]; loss.backward(); tr_loss += loss.item(); optimizer.step(); scheduler.step();
    model.zero_grad()), then its evaluation loop."""
    torch, transformers = torch_side
    directory = checkpoints("small_cls")
    code = IMPORTS + MODEL_CLASSES + SETUP + TRAIN_LOOP + EVAL_LOOP
    start = None
    sides = {}
    for side in ("torch", "npbert"):
        ns = _course(side, torch, directory)
        listing = code if side == "torch" else edit(code, "numpy")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns, _ = run(torch_version(listing) if side == "torch" else listing, None, ns)
        sides[side] = ns
        if side == "npbert":
            start = ns["BertForSequenceClassification"].from_pretrained(directory).classifier.weight
    t, n = sides["torch"], sides["npbert"]
    assert type(n["model"]).__name__ == "BertForSequenceClassification" and n["model"].dtype == np.float64
    assert n["config"].finetuning_task == "tnews" and n["global_step"] == t["global_step"] == 4
    np.testing.assert_allclose(n["tr_loss"], t["tr_loss"], rtol=1e-12)
    for (name, p), (_, q) in zip(n["model"].named_parameters(), t["model"].named_parameters()):
        np.testing.assert_allclose(p, as_numpy(q), rtol=0, atol=1e-10, err_msg=name)
    assert np.max(np.abs(n["model"].classifier.weight - start)) > 1e-5       # the loop did train
    assert all(p.grad is None for p in n["model"].parameters())              # model.zero_grad()
    np.testing.assert_allclose(n["eval_loss"], t["eval_loss"], rtol=1e-12)
    assert np.array_equal(n["preds"], t["preds"]) and n["result"] == t["result"]


# The course shows the `+=` line (its model names the base `BERT.`, transformers `bert.`); the groups
# before it are its weight-decay groups, over the base model's parameters.
HEAD_LR = '''
param_optimizer = list(model.named_parameters())
no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']
optimizer_grouped_parameters = [
        {'params': [p for n, p in param_optimizer if not any(nd in n for nd in no_decay) and 'bert' in n], 'weight_decay': 0.01},
        {'params': [p for n, p in param_optimizer if any(nd in n for nd in no_decay) and 'bert' in n], 'weight_decay': 0.0}]
optimizer_grouped_parameters += [{'params': [p for n, p in param_optimizer if 'bert' not in n], 'lr': 1e-4}]
optimizer = AdamW(optimizer_grouped_parameters, lr=2e-5)
'''
LAYERWISE = '''
lr = 2e-5
decay = 0.95
num_layers = model.config.num_hidden_layers
params = []
params += [{'params': model.bert.embeddings.parameters(), 'lr': lr * decay ** num_layers}]
for i in range(num_layers):
    params += [{'params': model.bert.encoder.layer[i].parameters(), 'lr': lr * decay ** (num_layers - 1 - i)}]
params += [{'params': model.bert.pooler.parameters(), 'lr': lr}]
params += [{'params': model.classifier.parameters(), 'lr': 1e-4}]
solver = Adam(params=params)
optimizer = solver
'''
STEPS = '''
for batch in train_dataloader:
    inputs = {"input_ids": batch[0], "attention_mask": batch[1], "token_type_ids": batch[2], "labels": batch[3]}
    loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
'''


@pytest.mark.parametrize("listing", ["head_lr", "layerwise"])
def test_learning_rate_groups_train_as_torch(torch_side, checkpoints, listing):
    """A larger rate for the head (the course's `'BERT' not in n` group; transformers names the base
    model `bert`), and the layer-wise rates the course's Net5 example sets per block, written for
    BERT over model.bert.embeddings / model.bert.encoder.layer[i] / ...parameters() (with torch's
    key 'params': the Net5 listing's 'param' is an error in torch too)."""
    torch, transformers = torch_side
    import npbert
    import npbert.optim
    directory = checkpoints("small_cls")
    code = (HEAD_LR if listing == "head_lr" else LAYERWISE) + STEPS
    sides = {}
    for side in ("torch", "npbert"):
        ns = _course(side, torch, directory)
        cls = ns["BertForSequenceClassification"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns["model"] = cls.from_pretrained(directory).train()
        ns["AdamW"] = torch.optim.AdamW if side == "torch" else npbert.optim.AdamW
        ns["Adam"] = torch.optim.Adam if side == "torch" else npbert.optim.Adam
        ns, _ = run(code, None, ns)
        sides[side] = ns
    t, n = sides["torch"], sides["npbert"]
    assert [g["lr"] for g in n["optimizer"].param_groups] == [g["lr"] for g in t["optimizer"].param_groups]
    assert [len(g["params"]) for g in n["optimizer"].param_groups] == [len(g["params"]) for g in t["optimizer"].param_groups]
    if listing == "layerwise":
        assert n["optimizer"].param_groups[1]["params"][0] == "bert.encoder.layer.0.attention.self.query.weight"
        assert len(n["optimizer"].param_groups) == n["model"].config.num_hidden_layers + 3 == 2 + 3
    for (name, p), (_, q) in zip(n["model"].named_parameters(), t["model"].named_parameters()):
        np.testing.assert_allclose(p, as_numpy(q), rtol=0, atol=1e-10, err_msg=name)


BERTADAM = '''
param_optimizer = list(model.named_parameters())
no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']
optimizer_grouped_parameters = [
        {'params': [p for n, p in param_optimizer if not any(nd in n for nd in no_decay)], 'weight_decay': 0.01},
        {'params': [p for n, p in param_optimizer if any(nd in n for nd in no_decay)], 'weight_decay': 0.0}]
optimizer = BERTAdam(optimizer_grouped_parameters,
                         lr=config.learning_rate,
                         warmup=0.05,
                         t_total=len(train_iter) * config.num_epochs)
'''


def test_bertadam_with_warmup_trains_as_pytorch_pretrained_bert(torch_side, checkpoints, bert_adam_reference):
    """The course's BERTAdam (pytorch-pretrained-bert 0.6.2's BertAdam) on its weight-decay groups,
    warmup 0.05 over t_total, stepped from the parameters' .grad as the course's loop does."""
    torch, transformers = torch_side
    import npbert
    directory = checkpoints("small_cls")
    sides = {}
    for side in ("torch", "npbert"):
        ns = _course(side, torch, directory)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns["model"] = ns["BertForSequenceClassification"].from_pretrained(directory).train()
        ns.update(BERTAdam=bert_adam_reference if side == "torch" else npbert.optim.BertAdam, train_iter=TRAIN,
                  config=types.SimpleNamespace(learning_rate=5e-5, num_epochs=2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # pytorch-pretrained-bert's deprecated torch calls
            ns, _ = run(BERTADAM + STEPS + STEPS, None, ns)
        sides[side] = ns
    t, n = sides["torch"], sides["npbert"]
    for (name, p), (_, q) in zip(n["model"].named_parameters(), t["model"].named_parameters()):
        np.testing.assert_allclose(p, as_numpy(q), rtol=0, atol=1e-10, err_msg=name)
    assert n["optimizer"].get_lr()[0] == pytest.approx(t["optimizer"].get_lr()[0], rel=1e-12)
