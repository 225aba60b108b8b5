"""HF's BERT class tree in NumPy: each module a forward/backward pair over one flat parameter dict."""
from .auto import (AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForMultipleChoice,
                   AutoModelForNextSentencePrediction, AutoModelForPreTraining, AutoModelForQuestionAnswering,
                   AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer)
from .attention import BertAttention, BertSelfAttention, BertSelfOutput
from .bert import BertModel
from .embeddings import BertEmbeddings
from .encoder import BertEncoder, BertLayer
from .feed_forward import BertIntermediate, BertOutput
from .heads import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction, BertForPreTraining,
                    BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification,
                    BertLMHeadModel)
from .parameter import Parameter
from .pooler import BertPooler
from .pretrained import BertPreTrainedModel, is_grad_enabled, no_grad
