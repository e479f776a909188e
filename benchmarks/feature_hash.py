"""One SHA-256 over every converted example of SQA and WikiTableQuestions: a conversion change that
should not change the features is checked by running this before and after it.

    python benchmarks/feature_hash.py --sqa_dir=../shared/datasets/sqa --wtq_dir=../shared/datasets/wtq \
        --limit=3000 [--drop_rows_to_fit]

Interactions are read and annotated as `convert_bench.py` reads them (grouped by table), converted
at 512 tokens, and each example's tf.Example, serialised deterministically, goes into the hash; a
conversion error adds its reason. Prints one line per data set: name, examples, hex digest.
"""

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import convert_bench  # noqa: E402

from tapas_tf.features.classifier_examples import ExampleConverter  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError  # noqa: E402
from tapas_tf.features.example_features import to_tf_example  # noqa: E402


def feature_hash(name: str, args, config: ConversionConfig):
    """(examples converted, the hex SHA-256 over them and the errors' reasons) of data set `name`."""
    digest, examples = hashlib.sha256(), 0
    converter = ExampleConverter(config)
    for annotated in convert_bench.annotate_by_table(convert_bench._read(name, args)):  # pylint: disable=protected-access
        for _, result in converter.convert_interaction(annotated):
            if isinstance(result, ConversionError):
                digest.update(result.reason.value.encode())
            else:
                digest.update(to_tf_example(result.features).SerializeToString(deterministic=True))
                examples += 1
    return examples, digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqa_dir", default="../shared/datasets/sqa")
    parser.add_argument("--wtq_dir", default="../shared/datasets/wtq")
    parser.add_argument("--vocab_file", default=None)
    parser.add_argument("--limit", type=int, default=3000, help="interactions per data set (0: all)")
    parser.add_argument("--drop_rows_to_fit", action="store_true")
    args = parser.parse_args()
    config = ConversionConfig.from_options(args.vocab_file, max_seq_length=512, drop_rows_to_fit=args.drop_rows_to_fit)
    for name in ("SQA", "WTQ"):
        examples, digest = feature_hash(name, args, config)
        print(name, examples, digest)


if __name__ == "__main__":
    main()
