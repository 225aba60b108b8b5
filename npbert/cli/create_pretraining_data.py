"""`npbert create-pretraining-data`: google-research/bert's create_pretraining_data.py, its flags,
writing the instances' features to one .h5 file (npbert/data)."""
import glob
import os
import random
import sys

import npbert
from npbert.cli.common import CliError, UsageError, non_negative_int, positive_int
from npbert.cli.outputs import refuse_overwriting_inputs
from npbert.data import create_training_instances, instances_to_features, write_features


def _bool(s):
    return s.lower() in ("1", "true", "yes")


def add_parser(commands):
    p = commands.add_parser("create-pretraining-data",
                            help="masked LM / next sentence instances from text (Google's script, same flags)",
                            description="google-research/bert's create_pretraining_data.py: input files hold one "
                                        "sentence a line and a blank line between documents; the instances' "
                                        "features go to one .h5 file that `npbert pretrain` reads.")
    p.add_argument("--input_file", required=True,
                   help="input text files, comma-separated (globs allowed): one sentence a line, a blank line between "
                        "documents")
    p.add_argument("--output_file", required=True, help="the .h5 features file to write")
    p.add_argument("--vocab_file", required=True, help="vocab.txt (e.g. from `npbert build-vocab`)")
    p.add_argument("--do_lower_case", type=_bool, default=True, help="lower-case the text and strip accents")
    p.add_argument("--do_whole_word_mask", type=_bool, default=False,
                   help="mask all the WordPieces of a word together (Google's whole word masking)")
    add_instance_arguments(p, dupe_factor=10)
    p.set_defaults(run=run)


def add_instance_arguments(group, dupe_factor):
    """Google's flags that shape the instances (also `npbert pretrain`'s, for a text corpus)."""
    group.add_argument("--max_seq_length", type=positive_int, default=128,
                       help="tokens per instance, [CLS] and the two [SEP] included (the model needs at least as many "
                            "max_position_embeddings)")
    group.add_argument("--max_predictions_per_seq", type=positive_int, default=20,
                       help="masked positions per instance at most")
    group.add_argument("--random_seed", type=non_negative_int, default=12345,
                       help="seed of the document shuffling, the random next sentences and the masks")
    group.add_argument("--dupe_factor", type=positive_int, default=dupe_factor,
                       help="times the input is turned into instances, each time with other masks")
    group.add_argument("--masked_lm_prob", type=float, default=0.15, help="fraction of the tokens masked")
    group.add_argument("--short_seq_prob", type=float, default=0.1,
                       help="probability of an instance shorter than max_seq_length (to train on short inputs too)")


def expand_inputs(pattern):
    files = []
    for part in pattern.split(","):
        matched = sorted(glob.glob(part))
        if not matched:
            raise UsageError(f"--input_file {part}: no such file")
        files.extend(matched)
    return files


def make_features(files, tokenizer, args, rng_seed=None):
    """(features dict, number of instances) for the input files, Google's algorithm."""
    try:
        instances = create_training_instances(files, tokenizer, args.max_seq_length, args.dupe_factor,
                                              args.short_seq_prob, args.masked_lm_prob, args.max_predictions_per_seq,
                                              random.Random(args.random_seed if rng_seed is None else rng_seed),
                                              args.do_whole_word_mask)
    except ValueError as e:
        raise CliError(str(e)) from None
    return instances_to_features(instances, tokenizer, args.max_seq_length, args.max_predictions_per_seq), instances


def run(args):
    if not os.path.isfile(args.vocab_file):
        raise UsageError(f"--vocab_file {args.vocab_file}: no such file")
    if not 0.0 <= args.masked_lm_prob <= 1.0 or not 0.0 <= args.short_seq_prob <= 1.0:
        raise UsageError("--masked_lm_prob and --short_seq_prob are probabilities in [0, 1]")
    files = expand_inputs(args.input_file)
    refuse_overwriting_inputs([("--output_file", args.output_file)],
                              [("--vocab_file", args.vocab_file)] + [("--input_file", f) for f in files])
    tokenizer = npbert.BertTokenizer(args.vocab_file, do_lower_case=args.do_lower_case)
    print(f"reading {len(files)} file(s), dupe_factor {args.dupe_factor} ...", file=sys.stderr)
    feats, instances = make_features(files, tokenizer, args)
    write_features(args.output_file, feats, len(tokenizer), args.max_seq_length, args.max_predictions_per_seq)
    random_next = sum(i.is_random_next for i in instances)
    print(f"wrote {args.output_file}: {len(instances)} instances ({random_next} with a random next sentence), "
          f"max_seq_length {args.max_seq_length}")
    return 0
