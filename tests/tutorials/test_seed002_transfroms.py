"""Seed 002 (transfroms: study notes on transformers): the tokenizer calls, the outputs of a
classifier, parameter counts with numel(), freezing with requires_grad, the embeddings and hidden
states, the pooler and the first attention head by hand from `...query.weight`, the masked-LM
example.  Each listing as written runs on transformers + torch, and with the mechanical edits
(tests/tutorials/listings.py) on npbert, on the same checkpoint; numbers and printed text compared.

Checkpoints: bert-base-uncased -> all-MiniLM-L6-v2 (the same vocabulary, so every token id the
notes print is reproduced exactly); the fine-tuned SST-2 classifier -> MiniLM with a seeded head;
the listings that write 64 (bert-base's head size) into their code -> `tiny64`, a random BERT with
64-dimensional heads.  float32 on both sides: rtol 1e-4 / atol 2e-5 on values of order 1-10
(round-off of differently ordered sums); ids, tokens, counts and printed labels exactly.
"""
import numpy as np
import pytest

from listings import as_numpy, edit, run, torch_shapes

LOGITS = dict(rtol=1e-4, atol=2e-5)


def _sides(torch_side, code, hubs, level="mechanical", setup=None, npbert_code=None):
    """(torch namespace, printed), (npbert namespace, printed) for `code` as written and edited."""
    import warnings
    torch, _ = torch_side
    npbert_code = edit(code, level) if npbert_code is None else npbert_code
    assert npbert_code == edit(code, level)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = run(code, hubs, dict((setup or (lambda side: {}))("torch")))
        ours = run(npbert_code, hubs, dict((setup or (lambda side: {}))("npbert")))
    return theirs, ours


TOKENIZER_CALLS = '''
from transformers import BertTokenizer
tokenizer = BertTokenizer.from_pretrained("bert-base-uncased", cache_dir = cache_dir)
test_senteces = ['today is not that bad', 'today is so bad', 'so good']
test_sentences = test_senteces
batch_input = tokenizer(test_senteces, truncation = True, padding = True, return_tensors = "pt")
tokens = tokenizer.tokenize(test_senteces[0],)
ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(test_sentences[0],))
encoded = tokenizer.encode(test_senteces[0],)
decoded = tokenizer.decode([101, 2651, 2003, 2025, 2008, 2919,  102])
fixed = tokenizer(test_sentences, max_length = 32, truncation = True, padding = 'max_length', return_tensors = 'pt')
longest = tokenizer(test_sentences, truncation = True, padding = True, return_tensors = 'pt')
'''


def test_tokenizer_calls(torch_side, minilm):
    (t, _), (n, _) = _sides(torch_side, TOKENIZER_CALLS, {"bert-base-uncased": minilm},
                            setup=lambda side: {"cache_dir": "/nonexistent/hub-cache"})
    assert n["tokens"] == t["tokens"] == ['today', 'is', 'not', 'that', 'bad']           # as the notes print
    assert n["ids"] == t["ids"] == [2651, 2003, 2025, 2008, 2919]
    assert n["encoded"] == t["encoded"] == [101, 2651, 2003, 2025, 2008, 2919, 102]
    assert n["decoded"] == t["decoded"] == '[CLS] today is not that bad [SEP]'
    for name in ("batch_input", "fixed", "longest"):
        assert list(n[name].keys()) == list(t[name].keys())
        for key in n[name]:
            assert n[name][key].dtype == np.int64 and np.array_equal(n[name][key], as_numpy(t[name][key])), (name, key)
    assert n["fixed"]["input_ids"].shape == (3, 32)
    assert n["tokenizer"].special_tokens_map == t["tokenizer"].special_tokens_map
    assert n["tokenizer"].vocab == t["tokenizer"].vocab
    # (transformers 5's BertTokenizer, the Rust one, has no ids_to_tokens; 4.x's had: the inverse of vocab)
    assert dict(n["tokenizer"].ids_to_tokens) == {i: w for w, i in t["tokenizer"].vocab.items()}


WORDPIECE = '''
s1 = 'albums sold 124443286539 copies'				# 数字偋
s2 = 'technically perfect, melodically correct'		# melodically 将形容词转换成副词
s3 = 'featuring a previously unheard track'			# 中太常见的拼来前缀 unheard
s4 = 'best-selling music artist'					# 短横线形式（尽量规避这种形式）
s5 = 's1 d1 o1 and o2'								# �袋
s6 = 'asbofwheohwbeif'								# 无意义的字符
for s in (s1, s2, s3, s4, s5, s6):
    inputs = tokenizer(s)
    print(inputs)
    print(tokenizer.convert_ids_to_tokens(inputs["input_ids"]))
'''


def test_wordpiece_cases_print_as_transformers(torch_side, minilm):
    """print(inputs) and the tokens, for the notes' six kinds of words: the same text on both sides,
    and the notes' own printed lines (124 ##44 ##32 ..., melodic ##ally, un ##heard, ...)."""
    torch, transformers = torch_side
    import npbert
    _, theirs = run(WORDPIECE, None, {"tokenizer": transformers.BertTokenizer.from_pretrained(minilm)})
    _, ours = run(WORDPIECE, None, {"tokenizer": npbert.BertTokenizer.from_pretrained(minilm)})
    assert ours == theirs
    assert ("{'input_ids': [101, 4042, 2853, 13412, 22932, 16703, 20842, 22275, 2683, 4809, 102], 'token_type_ids': "
            "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 'attention_mask': [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}") in ours
    for piece in ("'124', '##44', '##32', '##86', '##53', '##9'", "'melodic', '##ally'", "'un', '##heard'",
                  "'best', '-', 'selling'", "'as', '##bo', '##f', '##w', '##he', '##oh', '##w', '##bei', '##f'"):
        assert piece in ours


SENTIMENT = '''
with torch.no_grad():
    outputs = model(**batch_input)
    print(outputs)
    scores = F.softmax(outputs.logits, dim = 1)
    print(scores)
    labels = torch.argmax(scores, dim = 1)
    print(labels)
    # tensor的数据中能直来偻做索引。要么 .item() 转换要么 .tolist()
    labels = [model.config.id2label[id] for id in labels.tolist()]
    print(labels)
'''
SENTIMENT_NPBERT = '''
import numpy as np
import npbert
import npbert.functional as F
with npbert.no_grad():
    outputs = model(**batch_input)
    print(outputs)
    scores = F.softmax(outputs.logits, dim = 1)
    print(scores)
    labels = np.argmax(scores, axis = 1)
    print(labels)
    # tensor的数据中能直来偻做索引。要么 .item() 转换要么 .tolist()
    labels = [model.config.id2label[id] for id in labels.tolist()]
    print(labels)
'''


def test_classifier_outputs_print_and_labels(torch_side, checkpoints):
    """print(outputs) lists every field as transformers' SequenceClassifierOutput does; softmax,
    argmax and id2label give the same labels."""
    torch, transformers = torch_side
    import npbert
    import npbert.functional
    directory = checkpoints("sst2")
    sentences = ['today is not that bad', 'today is so bad', 'so good']

    def setup(side):
        if side == "torch":
            tok = transformers.BertTokenizer.from_pretrained(directory)
            return {"torch": torch, "F": torch.nn.functional, "batch_input": tok(sentences, padding=True, return_tensors="pt"),
                    "model": transformers.BertForSequenceClassification.from_pretrained(directory).eval()}
        tok = npbert.BertTokenizer.from_pretrained(directory)
        return {"npbert": npbert, "np": np, "F": npbert.functional,
                "batch_input": tok(sentences, padding=True, return_tensors="np"),
                "model": npbert.BertForSequenceClassification.from_pretrained(directory)}
    (t, t_out), (n, n_out) = _sides(torch_side, SENTIMENT, None, "numpy", setup, npbert_code=SENTIMENT_NPBERT)
    np.testing.assert_allclose(n["outputs"].logits, as_numpy(t["outputs"].logits), **LOGITS)
    assert n["labels"] == t["labels"] and set(n["labels"]) <= {"NEGATIVE", "POSITIVE"}
    first = n_out.splitlines()[0]
    assert first.startswith("SequenceClassifierOutput(loss=None, logits=array([[")
    assert t_out.splitlines()[0].startswith("SequenceClassifierOutput(loss=None, logits=tensor([[")
    assert "hidden_states=None, attentions=None)" in n_out and "hidden_states=None, attentions=None)" in t_out


PARAMETER_COUNT = '''
total_params = 0
total_learnable_params = 0
total_embedding_params = 0
total_encoder_params = 0
total_pooler_params = 0

for name, param in model.named_parameters():
    print(name, "->", param.shape, "->", param.numel())

    if "embedding" in name:
        total_embedding_params += param.numel()

    if "encode" in name:
        total_encoder_params += param.numel()

    if "pooler" in name:
        total_pooler_params += param.numel()

    if param.requires_grad:
        total_learnable_params += param.numel()

    total_params += param.numel()

print(total_params)
print(total_learnable_params)
params = [total_embedding_params, total_encoder_params, total_pooler_params]
for param in params:
    print(param/sum(params))
'''


def test_parameter_counts_with_numel(torch_side, minilm):
    """The notes' loop on MiniLM gives transformers' numbers (name, shape, numel per parameter, the
    totals and shares); on a bert-base-sized model the numbers the notes print for bert-base."""
    torch, transformers = torch_side
    import npbert
    _, theirs = run(PARAMETER_COUNT, None, {"model": transformers.BertModel.from_pretrained(minilm)})
    _, ours = run(PARAMETER_COUNT, None, {"model": npbert.BertModel.from_pretrained(minilm)})
    assert torch_shapes(ours) == theirs                                  # shapes print as tuples
    _, base = run(PARAMETER_COUNT, None, {"model": npbert.BertModel(npbert.BertConfig())})
    lines = base.splitlines()
    assert lines[0] == "embeddings.word_embeddings.weight -> (30522, 768) -> 23440896"
    assert lines[5] == "encoder.layer.0.attention.self.query.weight -> (768, 768) -> 589824"
    assert lines[-5:] == ["109482240", "109482240", "0.21772649152958506", "0.776879099295009",
                          "0.005394409175405983"]                      # the notes' printed output


FREEZING = '''
def calc_learnable_params(model):
    total_params = 0
    for name, param in model.named_parameters():
        if param.requires_grad:
            total_params += param.numel()
    return total_params

print(calc_learnable_params(bert))	# 输出109482240

with torch.no_grad():
    print(calc_learnable_params(bert))	# 输出109482240，说恘在该灯境下中会该边模偋参数 requires_grad 的屏性


for name, param in bert.named_parameters():
    if param.requires_grad:
        param.requires_grad = False
print(calc_learnable_params(bert))		# frozen过程，输出 0
'''


def test_freezing_with_requires_grad(torch_side, minilm):
    torch, transformers = torch_side
    import npbert
    code = "import torch\n" + FREEZING
    _, theirs = run(code, None, {"bert": transformers.BertModel.from_pretrained(minilm)})
    ns, ours = run(edit(code, "numpy"), None, {"bert": npbert.BertModel.from_pretrained(minilm)})
    assert ours == theirs and ours.split() == ["22713216", "22713216", "0"]
    bert = ns["bert"]
    assert bert.state.frozen == set(bert.state.params) and bert.num_parameters(only_trainable=True) == 0
    bert(input_ids=np.array([[101, 2651, 102]]))
    assert bert.backward(last_hidden_state=np.ones((1, 3, 384), np.float32)) == {}     # nothing to train


HIDDEN_STATES = '''
outputs = model(**token_input)
for i in range(len(outputs[2])):
    print(i, outputs[2][i].shape)
same_last = torch.equal(outputs[0], outputs[2][-1])
same_pooled = torch.allclose(outputs[1], model.pooler(outputs[0]))
same_embedded = torch.allclose(outputs[2][0], model.embeddings(token_input["input_ids"], token_input["token_type_ids"]))
'''


def test_hidden_states_and_the_notes_three_guesses(torch_side, minilm):
    """outputs[0] == outputs[2][-1], outputs[1] == model.pooler(outputs[0]), outputs[2][0] ==
    model.embeddings(ids, types): True on both sides; L + 1 hidden states of (1, T, H)."""
    torch, transformers = torch_side
    import npbert
    text = "After Abraham Lincoln won the November 1860 presidential election on an anti-slavery platform"

    def setup(side):
        lib = transformers if side == "torch" else npbert
        tok = lib.BertTokenizer.from_pretrained(minilm)
        model = lib.BertModel.from_pretrained(minilm, output_hidden_states=True).eval()
        return {"torch": torch, "model": model, "token_input": tok(text, return_tensors="pt" if side == "torch" else "np")}
    (t, t_out), (n, n_out) = _sides(torch_side, HIDDEN_STATES, None, "numpy", setup)
    assert len(n["outputs"]) == 3 and len(n["outputs"][2]) == 7
    assert torch_shapes(n_out) == t_out
    assert n["same_last"] and n["same_pooled"] and n["same_embedded"]
    assert t["same_last"] and t["same_pooled"] and t["same_embedded"]
    np.testing.assert_allclose(n["outputs"][1], as_numpy(t["outputs"][1]), **LOGITS)


FIRST_HEAD_WEIGHTS = '''
model.encoder.layer[0].attention.self.query.weight.T[:, : 64]
'''

CONFIG_AND_LOAD = '''
config = BertConfig.from_pretrained(model_name, output_attentions=True,
                                    output_hidden_states=True,
                                    return_dict=True,
                                    cache_dir = cache_dir)
config.max_position_embeddings = max_length

model = BertModel(config).from_pretrained(model_name, cache_dir = cache_dir)
'''

FIRST_HEAD = '''
import torch
import torch.nn.functional as F
# 这里注意取第一个头 [: 64]
Q_first_head_first_layer = torch.matmul(emb_output[0], model.encoder.layer[0].attention.self.query.weight.T[:, : 64]) + model.encoder.layer[0].attention.self.query.bias[: 64]
K_first_head_first_layer = torch.matmul(emb_output[0], model.encoder.layer[0].attention.self.key.weight.T[:, : 64]) + model.encoder.layer[0].attention.self.key.bias[: 64]
V_first_head_first_layer = torch.matmul(emb_output[0], model.encoder.layer[0].attention.self.value.weight.T[:, : 64]) + model.encoder.layer[0].attention.self.value.bias[: 64]

scores = torch.matmul(Q_first_head_first_layer, K_first_head_first_layer.T) / math.sqrt(64)
scores = F.softmax(scores, dim = -1)

print(scores)
print(torch.allclose(scores, model_output[-1][0]['attn'][0, 0, :, :]))		# (N, N)
'''


def test_first_attention_head_by_hand(torch_side, checkpoints):
    """8_attn_01: Q, K, V of head 0 of layer 0 from `...query.weight.T[:, :64]`, the softmax of
    their scores, compared with the model's attention probabilities.  The notes read those from
    bertviz's neuron-view model (`model_output[-1][0]['attn']`); with transformers' (and npbert's)
    BertModel they are `model_output.attentions[0]`: that one edit besides the mechanical ones."""
    torch, transformers = torch_side
    import math

    import npbert
    directory = checkpoints("tiny64")
    hubs = {"bert-base-uncased": directory}
    code = FIRST_HEAD.replace("model_output[-1][0]['attn']", "model_output.attentions[0]")

    def setup(side):
        lib = transformers if side == "torch" else npbert
        names = {"BertConfig": lib.BertConfig, "BertModel": lib.BertModel, "model_name": directory,
                 "cache_dir": "/nonexistent/hub-cache", "max_length": 512, "math": math}
        ns, _ = run(CONFIG_AND_LOAD, hubs, names)
        model = ns["model"]
        if side == "torch":
            model.set_attn_implementation("eager")      # transformers 5's default (sdpa) returns no attentions
        tok = lib.BertTokenizer.from_pretrained(directory)
        inputs = tok("the cat sat on the mat", return_tensors="pt" if side == "torch" else "np")
        ns.update(model_output=model(**inputs, output_attentions=True),
                  emb_output=model.embeddings(inputs["input_ids"], inputs["token_type_ids"]))
        return ns
    (t, t_out), (n, n_out) = _sides(torch_side, code, hubs, "numpy", setup)
    assert n["config"].output_attentions and n["config"].max_position_embeddings == 512
    assert n_out.splitlines()[-1] == t_out.splitlines()[-1] == "True"   # allclose(scores, the model's probabilities)
    np.testing.assert_allclose(n["scores"], as_numpy(t["scores"]), rtol=1e-5, atol=1e-7)
    (t, t_out), (n, n_out) = _sides(torch_side, FIRST_HEAD_WEIGHTS, hubs, "numpy", setup)
    assert n["_"].shape == (128, 64) and type(n["_"]) is np.ndarray
    np.testing.assert_array_equal(n["_"], as_numpy(t["_"]))        # the stored weights themselves


POOLER = '''
bert.eval()
with torch.no_grad():
    output = bert(**inputs)
    # output.keys() odict_keys(['last_hidden_state', 'pooler_output'])
    print(output["pooler_output"].shape)
print(bert.pooler)
my_output = bert.pooler.activation(bert.pooler.dense(output["last_hidden_state"][0, 0, :]))
print(my_output.shape)
torch.equal(my_output, output["pooler_output"][0])
'''


def test_pooler_from_scratch(torch_side, minilm):
    """11_bert_head_pooler_output: print(bert.pooler) as torch prints it, and the pooler computed
    by hand from bert.pooler.dense and bert.pooler.activation equal to pooler_output."""
    torch, transformers = torch_side
    import npbert

    def setup(side):
        lib = transformers if side == "torch" else npbert
        tok = lib.BertTokenizer.from_pretrained(minilm)
        return {"torch": torch, "bert": lib.BertModel.from_pretrained(minilm),
                "inputs": tok("the cat sat on the mat", return_tensors="pt" if side == "torch" else "np")}
    (t, t_out), (n, n_out) = _sides(torch_side, POOLER, None, "numpy", setup)
    assert torch_shapes(n_out) == t_out
    assert "BertPooler(\n  (dense): Linear(in_features=384, out_features=384, bias=True)\n  (activation): Tanh()\n)" in n_out
    np.testing.assert_allclose(n["my_output"], as_numpy(t["my_output"]), **LOGITS)


MLM_LOAD = '''
mlm = BertForMaskedLM.from_pretrained(model_name, output_hidden_states=True, cache_dir = cache_dir)
mlm
'''
MASKING = '''
# 以其中的第一个句�为例
inputs["labels"] = inputs["input_ids"].detach().clone()
mask = torch.rand(inputs["labels"].shape) < 0.15
mask_arr = (mask) * (inputs["labels"] != 101) * (inputs["labels"] != 102)	# 中能将开始和结损符设置为恩码
selection = torch.flatten(mask_arr[0].nonzero()).tolist()	# 取第一个句�
inputs["input_ids"][0][selection] = 103
inputs
'''
MLM_FORWARD = '''
mlm.eval()
with torch.no_grad():
    output = mlm(**inputs)
output.keys()
'''
MLM_CLS = '''
tmp = mlm.cls(output["hidden_states"][-1])
torch.equal(tmp, output["logits"])
'''
MLM_DECODER = '''
mlm.eval()
with torch.no_grad():
    transformed = mlm.cls.predictions.transform(last_hidden_state)
    print(transformed.shape)
    logits = mlm.cls.predictions.decoder(transformed)
    print(logits.shape)
logits == output["logits"]
'''


def test_masked_lm_example(torch_side, checkpoints):
    """12_masked_lm: print(mlm)'s head as torch's, the masking (the same random draws on both
    sides: torch.rand is fed NumPy's stream), the loss, and mlm.cls / cls.predictions.transform /
    cls.predictions.decoder called by hand equal to the model's logits."""
    torch, transformers = torch_side
    import npbert
    directory = checkpoints("pretraining")
    hubs = {"bert-base-uncased": directory}
    text = ("After Abraham Lincoln won the November 1860 presidential election on an anti-slavery platform, "
            "an initial seven slave states declared their secession from the country")
    results = {}
    for side in ("torch", "npbert"):
        lib = transformers if side == "torch" else npbert
        names = {"BertForMaskedLM": lib.BertForMaskedLM, "model_name": directory,
                 "cache_dir": "/nonexistent/hub-cache", "torch": torch}
        level = "mechanical" if side == "torch" else "numpy"
        tr = (lambda c: c) if side == "torch" else (lambda c: edit(c, level))
        np.random.seed(12)
        rand = lambda shape: torch.tensor(np.random.rand(*shape))        # noqa: E731  torch.rand, drawn by NumPy
        ns, printed = run(tr(MLM_LOAD), hubs, names)
        tok = lib.BertTokenizer.from_pretrained(directory)
        ns["inputs"] = dict(tok(text, return_tensors="pt" if side == "torch" else "np"))
        if side == "torch":
            ns["torch"] = type("torch_with_numpy_rand", (), {"rand": staticmethod(rand), "flatten": torch.flatten,
                                                              "no_grad": torch.no_grad, "equal": torch.equal})
        for code in (MASKING, MLM_FORWARD, MLM_CLS):
            ns, out = run(tr(code), hubs, ns)
            printed += out
        ns["cls_equal"] = ns["_"]                                         # torch.equal(tmp, output["logits"])
        ns["last_hidden_state"] = ns["output"]["hidden_states"][-1]
        ns, out = run(tr(MLM_DECODER), hubs, ns)
        results[side] = (ns, printed + out)
    (t, t_out), (n, n_out) = results["torch"], results["npbert"]
    head = n_out[n_out.index("  (cls): BertOnlyMLMHead("):n_out.index("{'input_ids'")]
    assert head in t_out and "(decoder): Linear(in_features=384, out_features=30522, bias=True)" in head
    assert n["selection"] == t["selection"] and len(n["selection"]) > 0
    assert np.array_equal(n["inputs"]["input_ids"], as_numpy(t["inputs"]["input_ids"]))
    assert list(n["output"].keys()) == list(t["output"].keys()) == ["loss", "logits", "hidden_states"]
    np.testing.assert_allclose(float(n["output"]["loss"]), float(t["output"]["loss"]), rtol=1e-5)
    assert n["cls_equal"] and t["cls_equal"]                            # mlm.cls(h) is the model's logits
    np.testing.assert_allclose(n["tmp"], as_numpy(t["tmp"]), **LOGITS)
    assert n["_"].all() and as_numpy(t["_"]).all()                     # logits == output["logits"], everywhere
