"""Pre-training instances: google-research/bert's create_pretraining_data.py, read along.

The same functions in the same order, drawing from `rng` (a random.Random) in the same
sequence, so that the same files, vocabulary, arguments and seed give the same instances,
in the same order, as Google's `create_training_instances`:

    create_training_instances    read documents, shuffle them, dupe_factor passes over every
                                 document, shuffle the instances
    create_instances_from_document
                                 cut a document into chunks of about target_seq_length tokens
                                 (max_seq_length - 3, or with probability short_seq_prob a random
                                 length in [2, that]); segment A = the first a_end sentences of the
                                 chunk; segment B = the rest ("IsNext"), or with probability 1/2
                                 (always for a one-sentence chunk) sentences from a random other
                                 document ("NotNext"), the unused sentences of the chunk put back
    truncate_seq_pair            trim the longer segment, from the front or the back at random
    create_masked_lm_predictions 15 % of the tokens (at least 1, at most max_predictions_per_seq)
                                 chosen in random order, whole words with do_whole_word_mask;
                                 80 % -> [MASK], 10 % kept, 10 % a random vocabulary word

Input files: one sentence a line, a blank line between documents (Devlin et al. 2019, A.2).
"""
import collections

from npbert.io.text import read_text


class TrainingInstance:
    """One [CLS] A [SEP] B [SEP] sequence with its masked LM predictions."""

    def __init__(self, tokens, segment_ids, masked_lm_positions, masked_lm_labels, is_random_next):
        self.tokens = tokens
        self.segment_ids = segment_ids
        self.is_random_next = is_random_next
        self.masked_lm_positions = masked_lm_positions
        self.masked_lm_labels = masked_lm_labels

    def __repr__(self):
        return (f"TrainingInstance(tokens={' '.join(self.tokens)!r}, segment_ids={self.segment_ids}, "
                f"is_random_next={self.is_random_next}, masked_lm_positions={self.masked_lm_positions}, "
                f"masked_lm_labels={self.masked_lm_labels})")


def read_documents(input_files, tokenizer):
    """Documents as lists of tokenized sentences: one sentence a line, blank lines between documents.
    A line that tokenizes to nothing adds nothing; empty documents are dropped (as Google)."""
    all_documents = [[]]
    for input_file in input_files:
        try:
            with open(input_file, encoding="utf-8") as reader:
                for line_number, line in enumerate(reader, 1):
                    line = line.strip()
                    if not line:
                        all_documents.append([])           # a blank line ends the document
                    tokens = tokenizer.tokenize(line)
                    if tokens:
                        all_documents[-1].append(tokens)
        except UnicodeDecodeError:
            read_text(input_file, "utf-8")      # raises the error naming the line
            raise
    return [d for d in all_documents if d]


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
                              max_predictions_per_seq, rng, do_whole_word_mask=False):
    """Read `input_files` and return the list of TrainingInstance, as Google's."""
    if isinstance(input_files, str):
        input_files = [input_files]
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP]), got {max_seq_length}")
    for token in ("[CLS]", "[SEP]", "[MASK]"):
        if token not in tokenizer.vocab:
            raise ValueError(f"the vocabulary has no {token} token, which pre-training needs")
    all_documents = read_documents(input_files, tokenizer)
    if len(all_documents) < 2:
        raise ValueError(f"{', '.join(map(str, input_files))}: {len(all_documents)} document(s) with text; next "
                         "sentence prediction needs at least two (separate documents by blank lines)")
    rng.shuffle(all_documents)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(all_documents)):
            instances.extend(create_instances_from_document(
                all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                max_predictions_per_seq, vocab_words, rng, do_whole_word_mask))
    rng.shuffle(instances)
    return instances


def create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                                   max_predictions_per_seq, vocab_words, rng, do_whole_word_mask=False):
    """The instances of one document (a list of tokenized sentences)."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3                     # [CLS], [SEP], [SEP]
    # Mostly full-length sequences; sometimes (short_seq_prob) shorter ones, so that the model
    # also sees the short sequences it meets when fine-tuning.
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk, current_length = [], 0                  # whole sentences, not a token cut
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1                                   # sentences [0, a_end) of the chunk go to A
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = [t for sentence in current_chunk[:a_end] for t in sentence]

                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True                   # B from another document
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):                     # (10 tries to pick another document)
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # the chunk's sentences after A were not used: go back so they start the next chunk
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False                  # B = the rest of the chunk
                    for sentence in current_chunk[a_end:]:
                        tokens_b.extend(sentence)
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                assert len(tokens_a) >= 1 and len(tokens_b) >= 1

                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, masked_lm_positions, masked_lm_labels = create_masked_lm_predictions(
                    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng, do_whole_word_mask)
                instances.append(TrainingInstance(tokens, segment_ids, masked_lm_positions, masked_lm_labels,
                                                  is_random_next))
            current_chunk, current_length = [], 0
        i += 1
    return instances


MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                 do_whole_word_mask=False):
    """Choose the positions to predict and replace them: (output_tokens, positions, labels)."""
    cand_indexes = []                                       # candidate words: lists of positions
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        # Whole word masking: a "##" piece joins the word before it, and the word is masked
        # whole or not at all (the later google-research/bert script).
        if do_whole_word_mask and cand_indexes and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)

    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms, covered_indexes = [], set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:    # a whole word would overshoot: skip it
            continue
        if any(index in covered_indexes for index in index_set):
            continue
        for index in index_set:
            covered_indexes.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"                     # 80 %
            elif rng.random() < 0.5:
                masked_token = tokens[index]                # 10 %: kept
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]   # 10 %: random word
            output_tokens[index] = masked_token
            masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
    masked_lms.sort(key=lambda x: x.index)
    return output_tokens, [p.index for p in masked_lms], [p.label for p in masked_lms]


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trim the longer of the two lists (in place), one token at a time, from the front or the
    back at random (to avoid a bias towards either end), until both fit in max_num_tokens."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()
