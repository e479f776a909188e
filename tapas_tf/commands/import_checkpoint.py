"""Command line: import a Hugging Face or original (TF1) TAPAS checkpoint as a model directory.

    tapas-tf import --format=hf --source=HF_DIR --model_dir=OUT
    tapas-tf import --format=tf1 --source=RELEASE_DIR_OR_ZIP --model_dir=OUT \\
        --task=SQA --model_options='{"reset_position_index_per_cell": true}'

What is imported, and how strictly: `tapas_tf.checkpoints.importer`. Errors are one line,
`tapas-tf import: error: ...` (exit 2 for a wrong command line, else 1). -v debug: TensorFlow's C++ logs too.
"""

from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.checkpoints import importer

PROG = "import"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_enum("format", None, list(importer.FORMATS), "hf: config.json + model.safetensors; tf1: the original "
                      "release's bert_config.json + model.ckpt*.")
    flags.DEFINE_string("source", None, "Model directory, TF1 checkpoint prefix, or release zip.")
    flags.DEFINE_string("model_dir", None, "The new tapas-tf model directory.")
    flags.DEFINE_bool("skip_heads", False, "Leave heads and pooler missing from the checkpoint fresh; drop unused "
                      "source heads.")
    flags.DEFINE_string("task", None, "tf1 only: task preset of the options (SQA, WTQ, WIKISQL, TABFACT).")
    flags.DEFINE_string("model_options", None, "JSON object of TapasConfig fields, applied last.")
    flags.DEFINE_enum("target", "auto", list(importer.TARGETS), "Model class to build.")
    for name in ("format", "source", "model_dir"):
        flags.mark_flag_as_required(name)


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    try:
        report = importer.import_checkpoint(
            FLAGS.format, FLAGS.source, FLAGS.model_dir, skip_heads=FLAGS.skip_heads, task=FLAGS.task,
            model_options=importer.parse_model_options(FLAGS.model_options), target=FLAGS.target)
    except (ValueError, FileNotFoundError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(f"Wrote {FLAGS.model_dir}: {report['model_class']}, {report['mapped']} weights mapped, "
          f"{len(report['fresh'])} fresh, {len(report['dropped'])} dropped (see {importer.REPORT_FILE}).")


if __name__ == "__main__":  # python -m tapas_tf.commands.import_checkpoint: the same as `tapas-tf import`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
