"""Command line: write the small SQA-format sample data set (`tapas_tf.data.sample_data`).

    tapas-tf sample-data --output_dir=out/sqa_sample
    tapas-tf create-data --task=SQA --input_dir=out/sqa_sample --output_dir=out/sqa_data
"""

import os
from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.data.sample_data import write_sample

PROG = "sample-data"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("output_dir", None, "Where to write the sample (made if missing).")
    flags.mark_flag_as_required("output_dir")


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    for name, count in write_sample(FLAGS.output_dir).items():
        print(f"{os.path.join(FLAGS.output_dir, name)}: {count} questions")


if __name__ == "__main__":  # python -m tapas_tf.commands.sample_data: the same as `tapas-tf sample-data`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
