"""Pre-training instances, read along google-research/bert's `create_pretraining_data.py`.

The same functions, in the same order, with the same names:

    TrainingInstance                 one [CLS] A [SEP] B [SEP] example with its masked positions
    create_training_instances        files -> documents -> dupe_factor passes of instances, shuffled
    create_instances_from_document   one document -> instances (segments A/B, random next 50 %)
    create_masked_lm_predictions     15 % of the tokens: 80 % [MASK], 10 % kept, 10 % a random token
    truncate_seq_pair                trim the longer of A/B from the front or back at random

Every random draw is made by the `rng` passed in (a `random.Random`), in Google's order, so that
the same files, vocabulary, arguments and `random.Random(seed)` give the same instances in the
same order as Google's script (tests/data/test_pretraining_parity.py checks every field).

Input format (Google's): one sentence per line, a blank line between documents.  Whole-word
masking (`do_whole_word_mask=True`) follows the current google-research/bert script: a word's
"##" continuation pieces join the candidate of the piece before them, and a word is masked only
when all of its pieces fit under the prediction budget.

Notation: T = max_seq_length, P = max_predictions_per_seq.
"""
import collections

SPECIAL_CLS, SPECIAL_SEP, SPECIAL_MASK = "[CLS]", "[SEP]", "[MASK]"


class TrainingInstance:
    """A single training instance (sentence pair), as Google's.

    tokens: ["[CLS]", A..., "[SEP]", B..., "[SEP]"] after masking (len <= T);
    segment_ids: 0 for [CLS] A [SEP], 1 for B [SEP];
    masked_lm_positions / masked_lm_labels: sorted positions and their original tokens (len <= P);
    is_random_next: True when B was taken from another document (NSP label 1).
    """

    def __init__(self, tokens, segment_ids, masked_lm_positions, masked_lm_labels, is_random_next):
        self.tokens = tokens
        self.segment_ids = segment_ids
        self.is_random_next = is_random_next
        self.masked_lm_positions = masked_lm_positions
        self.masked_lm_labels = masked_lm_labels

    def __str__(self):
        return (f"tokens: {' '.join(self.tokens)}\nsegment_ids: {' '.join(map(str, self.segment_ids))}\n"
                f"is_random_next: {self.is_random_next}\n"
                f"masked_lm_positions: {' '.join(map(str, self.masked_lm_positions))}\n"
                f"masked_lm_labels: {' '.join(self.masked_lm_labels)}\n\n")

    __repr__ = __str__


def read_documents(input_files, tokenizer):
    """Google's reading loop: one sentence a line, blank lines end a document.
    Returns a list of documents, each a list of sentences, each a list of WordPiece tokens.
    Empty documents are dropped (before shuffling, as Google)."""
    all_documents = [[]]
    for input_file in input_files:
        for line in _lines(input_file):
            line = line.strip()
            # Empty lines are used as document delimiters
            if not line:
                all_documents.append([])
            tokens = tokenizer.tokenize(line)
            if tokens:
                all_documents[-1].append(tokens)
    # Remove empty documents
    return [x for x in all_documents if x]


def _lines(input_file):
    """The lines of a UTF-8 text file; a file that is not text raises ValueError naming it."""
    with open(input_file, "rb") as f:
        data = f.read()
    if b"\x00" in data[:65536]:
        offset = data.index(b"\x00")
        raise ValueError(f"{input_file}: a NUL byte at offset {offset}: this is a binary file, "
                         "not a text corpus (one sentence a line, blank lines between documents)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_no = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{input_file}:{line_no}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    # Google reads with readline() in text mode: lines end at \n, \r\n or \r (not at \x0c etc.)
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def create_training_instances(input_files, tokenizer, max_seq_length, dupe_factor, short_seq_prob,
                              masked_lm_prob, max_predictions_per_seq, rng, do_whole_word_mask=False,
                              all_documents=None):
    """Create `TrainingInstance`s from raw text (Google's function).

    input_files: paths of text files (one sentence a line, blank line between documents);
    or pass `all_documents` (lists of sentences of tokens, as `read_documents` returns) directly.
    rng: random.Random.  Returns the instances of `dupe_factor` passes over the documents, each
    pass with different masks and pairs, shuffled together.
    """
    if all_documents is None:
        all_documents = read_documents(input_files, tokenizer)
    else:
        all_documents = [d for d in all_documents if d]
    check_documents(all_documents, input_files)
    rng.shuffle(all_documents)

    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(all_documents)):
            instances.extend(
                create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob,
                                               masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                               do_whole_word_mask=do_whole_word_mask))
    rng.shuffle(instances)
    return instances


def check_documents(all_documents, input_files=None):
    """The errors Google's script would hit later (an empty randint range, an assert): said up front."""
    where = ", ".join(map(str, input_files or [])) or "the documents"
    if not all_documents:
        raise ValueError(f"{where}: no text: the corpus has no non-empty line")
    if len(all_documents) < 2:
        raise ValueError(f"{where}: one document only; next sentence prediction draws its random B segments "
                         "from another document: separate documents with a blank line")


def create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                                   max_predictions_per_seq, vocab_words, rng, do_whole_word_mask=False):
    """Creates `TrainingInstance`s for a single document (Google's function, same draws)."""
    document = all_documents[document_index]

    # Account for [CLS], [SEP], [SEP]
    max_num_tokens = max_seq_length - 3
    if max_num_tokens < 2:
        raise ValueError(f"max_seq_length={max_seq_length}: needs at least 5 ([CLS] A [SEP] B [SEP])")

    # Most of the time the sequences fill max_seq_length; with probability short_seq_prob a
    # shorter target, so that the model also sees the short sequences of fine-tuning.
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    # Whole segments (sentences) are packed into `current_chunk` until target_seq_length is
    # reached; then A = the first a_end of them, B = the rest (or a random document's text).
    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                # `a_end` is how many segments from `current_chunk` go into the `A` (first) sentence.
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)

                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])

                tokens_b = []
                # Random next
                is_random_next = False
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)

                    # Ten tries at a document other than this one (Google's loop; with many
                    # documents the tenth try being this one again is negligible).
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break

                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # The segments of current_chunk not used for A are put back, not wasted.
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                # Actual next
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)

                assert len(tokens_a) >= 1
                assert len(tokens_b) >= 1

                tokens = []
                segment_ids = []
                tokens.append(SPECIAL_CLS)
                segment_ids.append(0)
                for token in tokens_a:
                    tokens.append(token)
                    segment_ids.append(0)
                tokens.append(SPECIAL_SEP)
                segment_ids.append(0)

                for token in tokens_b:
                    tokens.append(token)
                    segment_ids.append(1)
                tokens.append(SPECIAL_SEP)
                segment_ids.append(1)

                (tokens, masked_lm_positions, masked_lm_labels) = create_masked_lm_predictions(
                    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                    do_whole_word_mask=do_whole_word_mask)
                instance = TrainingInstance(
                    tokens=tokens,
                    segment_ids=segment_ids,
                    is_random_next=is_random_next,
                    masked_lm_positions=masked_lm_positions,
                    masked_lm_labels=masked_lm_labels)
                instances.append(instance)
            current_chunk = []
            current_length = 0
        i += 1

    return instances


MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng,
                                 do_whole_word_mask=False):
    """Creates the predictions for the masked LM objective (Google's function, same draws).

    num_to_predict = min(P, max(1, round(len(tokens) * masked_lm_prob)))
    Each chosen position: 80 % "[MASK]", 10 % the original token, 10 % a random vocabulary word.
    Returns (output_tokens, masked_lm_positions (sorted), masked_lm_labels).
    """
    cand_indexes = []
    for (i, token) in enumerate(tokens):
        if token == SPECIAL_CLS or token == SPECIAL_SEP:
            continue
        # Whole Word Masking: all the WordPieces of a word are masked together ("##" pieces
        # join the candidate before them).  Without it each piece is a candidate of its own;
        # the random draws are the same in both cases for a piece-level list.
        if do_whole_word_mask and len(cand_indexes) >= 1 and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])

    rng.shuffle(cand_indexes)

    output_tokens = list(tokens)

    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))

    masked_lms = []
    covered_indexes = set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        # If adding a whole-word mask would exceed the maximum number of predictions, skip
        # this candidate.
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        is_any_index_covered = False
        for index in index_set:
            if index in covered_indexes:
                is_any_index_covered = True
                break
        if is_any_index_covered:
            continue
        for index in index_set:
            covered_indexes.add(index)

            masked_token = None
            # 80% of the time, replace with [MASK]
            if rng.random() < 0.8:
                masked_token = SPECIAL_MASK
            else:
                # 10% of the time, keep original
                if rng.random() < 0.5:
                    masked_token = tokens[index]
                # 10% of the time, replace with random word
                else:
                    masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]

            output_tokens[index] = masked_token

            masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
    assert len(masked_lms) <= num_to_predict
    masked_lms = sorted(masked_lms, key=lambda x: x.index)

    masked_lm_positions = []
    masked_lm_labels = []
    for p in masked_lms:
        masked_lm_positions.append(p.index)
        masked_lm_labels.append(p.label)

    return (output_tokens, masked_lm_positions, masked_lm_labels)


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Truncates a pair of sequences to a maximum sequence length, in place (Google's function):
    the longer one loses a token at the front or at the back (one coin each), until they fit."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_num_tokens:
            break

        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1

        # We want to sometimes truncate from the front and sometimes from the back to add
        # more randomness and avoid biases.
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()
