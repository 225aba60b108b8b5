"""`npbert create-pretraining-data`: Google's create_pretraining_data.py, writing one .h5 file.

    npbert create-pretraining-data --input_file=sample_text.txt --output_file=train.h5 \\
        --vocab_file=vocab.txt --max_seq_length=128 --max_predictions_per_seq=20 \\
        --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

Google's flags and defaults; the features (input_ids, input_mask, segment_ids,
masked_lm_positions, masked_lm_ids, masked_lm_weights, next_sentence_labels) are those of
Google's tf.train.Examples, as arrays in one HDF5 file (npbert/data/features.py).
"""
import random
import sys

from npbert.cli.common import CliError


def add_parser(subparsers):
    from npbert.cli.pretrain import add_data_arguments
    p = subparsers.add_parser("create-pretraining-data", help="make pre-training instances (Google's script) in an .h5",
                              description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--input_file", required=True, help="comma-separated text files")
    p.add_argument("--output_file", required=True, help="the .h5 to write")
    add_data_arguments(p)
    p.set_defaults(run=run)
    return p


def run(args):
    from npbert.cli.pretrain import check_max_seq_length, load_tokenizer, read_corpus_documents
    from npbert.data.features import write_instances_to_h5
    from npbert.data.pretraining import create_training_instances
    check_max_seq_length(args)
    tokenizer = load_tokenizer(args.vocab_file, args.do_lower_case)
    if "[MASK]" not in tokenizer.vocab:
        raise CliError(f"--vocab_file {args.vocab_file} has no [MASK] token: masked LM needs it")
    documents = read_corpus_documents(args.input_file.split(","), tokenizer)
    try:
        instances = create_training_instances(args.input_file.split(","), tokenizer, args.max_seq_length,
                                              args.dupe_factor, args.short_seq_prob, args.masked_lm_prob,
                                              args.max_predictions_per_seq, random.Random(args.random_seed),
                                              do_whole_word_mask=args.do_whole_word_mask, all_documents=documents)
    except ValueError as e:
        raise CliError(str(e)) from None
    write_instances_to_h5(instances, tokenizer.vocab, args.max_seq_length, args.max_predictions_per_seq,
                          args.output_file)
    print(f"wrote {len(instances)} instances to {args.output_file}", file=sys.stderr)
    return 0
