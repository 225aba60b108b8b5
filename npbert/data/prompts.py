"""Fill-mask prompts chosen by a rule fixed before training, so that nobody picks the lines a
model happens to get right afterwards.

    a line qualifies   6 to 14 words (split on spaces), one of them a word to mask, and it fits
                       the model: at most max_tokens tokens with [CLS] and [SEP]
    the word to mask   the line's first word of 4 or more letters (letters only, once its
                       surrounding punctuation is set aside) that is one vocabulary token, so
                       that the model can name it in one guess
    the prompts        n lines taken evenly through the qualifying lines, in the text's order:
                       line k of n is qualifying line floor((k + 1/2) * Q / n) of the Q

The word is replaced by [MASK]; its punctuation stays ("Pray God, sir" -> "Pray [MASK], sir").
"""
import string

RULE = ("held-out lines of 6 to 14 words that fit in {max_tokens} tokens, {n} taken evenly through the held-out "
        "text; in each the masked word is the first one of 4 or more letters that is one vocabulary token")
_PUNCTUATION = string.punctuation + "“”‘’"


def word_to_mask(line, vocab, min_words=6, max_words=14, min_letters=4):
    """(index of the word, the word lower-cased, its leading and trailing punctuation) of the word
    the rule masks in `line`, or None when the line does not qualify."""
    words = line.split()
    if not min_words <= len(words) <= max_words:
        return None
    for k, w in enumerate(words):
        bare = w.strip(_PUNCTUATION)
        if len(bare) >= min_letters and bare.isalpha() and bare.lower() in vocab:
            start = w.index(bare)
            return k, bare.lower(), (w[:start], w[start + len(bare):])
    return None


def choose_fill_mask_prompts(lines, tokenizer, n=10, max_tokens=512):
    """[(prompt, answer, line)] for n lines of `lines` (strings, in order) by the module's rule
    (RULE.format(n=n, max_tokens=max_tokens)).  Fewer than n when fewer qualify."""
    qualifying = []
    for line in lines:
        found = word_to_mask(line, tokenizer.vocab)
        if found is not None and len(tokenizer.tokenize(line)) + 2 <= max_tokens:
            qualifying.append((line, found))
    picks = sorted({int((k + 0.5) * len(qualifying) / n) for k in range(n)}) if qualifying else []
    prompts = []
    for i in picks:
        line, (k, answer, (before, after)) = qualifying[i]
        words = line.split()
        prompts.append((" ".join(words[:k] + [before + tokenizer.mask_token + after] + words[k + 1:]), answer, line))
    return prompts
