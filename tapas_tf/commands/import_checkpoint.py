"""Command line: import a Hugging Face or original (TF1) TAPAS checkpoint as a model directory.

    tapas-tf import --format=hf --source=HF_DIR --model_dir=OUT
    tapas-tf import --format=tf1 --source=RELEASE_DIR_OR_ZIP --model_dir=OUT \\
        --task=SQA --model_options='{"reset_position_index_per_cell": true}'
    tapas-tf import --format=tf1 --source=tapas_nq_hn_retriever_tiny --model_dir=OUT   # a retriever

A TF1 checkpoint with a question tower (`bert_1/`: Google's table retrievers, the dual encoders
tapas_nq_hn_retriever_*, tapas_nq_retriever_*, tapas_dual_encoder_proj_*) becomes a dual-encoder
directory (`tapas_tf.checkpoints.retriever`); `--target=retriever` forces that. A retriever is also
found by its released name, downloaded once per import. Its `--model_options` are TapasConfig fields
and max_query_length, max_table_length; --task and --skip_heads do not apply to it.

What is imported, and how strictly: `tapas_tf.checkpoints.importer`. Errors are one line,
`tapas-tf import: error: ...` (exit 2 for a wrong command line, else 1). -v debug: TensorFlow's C++ logs too.
"""

from typing import Any, Dict, List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.checkpoints import importer, retriever

PROG = "import"
FLAGS = flags.FLAGS
TARGETS = list(importer.TARGETS) + [retriever.TARGET]


def define_flags() -> None:
    flags.DEFINE_enum("format", None, list(importer.FORMATS), "hf: config.json + model.safetensors; tf1: the original "
                      "release's bert_config.json + model.ckpt* (a QA, pre-trained or retriever checkpoint).")
    flags.DEFINE_string("source", None, "Model directory, TF1 checkpoint prefix, or release zip; or the name of one "
                        "of Google's retrievers (tapas_nq_hn_retriever_tiny, ...).")
    flags.DEFINE_string("model_dir", None, "The new tapas-tf model directory.")
    flags.DEFINE_bool("skip_heads", False, "Leave heads and pooler missing from the checkpoint fresh; drop unused "
                      "source heads.")
    flags.DEFINE_string("task", None, "tf1 only: task preset of the options (SQA, WTQ, WIKISQL, TABFACT).")
    flags.DEFINE_string("model_options", None, "JSON object of TapasConfig fields, applied last (a retriever: also "
                        "max_query_length, max_table_length).")
    flags.DEFINE_enum("target", "auto", TARGETS, "Model class to build; auto: a masked-LM model for a checkpoint "
                      "with its head, a dual encoder for one with a question tower (bert_1/), else QA.")
    for name in ("format", "source", "model_dir"):
        flags.mark_flag_as_required(name)


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    try:
        if _is_retriever():
            report = _import_retriever()
        else:
            report = importer.import_checkpoint(
                FLAGS.format, FLAGS.source, FLAGS.model_dir, skip_heads=FLAGS.skip_heads, task=FLAGS.task,
                model_options=importer.parse_model_options(FLAGS.model_options), target=FLAGS.target)
    except (ValueError, FileNotFoundError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(f"Wrote {FLAGS.model_dir}: {report['model_class']}, {report['mapped']} weights mapped, "
          f"{len(report['fresh'])} fresh, {len(report['dropped'])} dropped (see {importer.REPORT_FILE}).")


def _is_retriever() -> bool:
    """--target=retriever, or a TF1 source with a question tower (or a retriever's name) under auto."""
    if FLAGS.target == retriever.TARGET:
        if FLAGS.format != "tf1":
            raise ValueError("--target=retriever needs --format=tf1: Google's retrievers are TF1 checkpoints.")
        return True
    return FLAGS.format == "tf1" and FLAGS.target == "auto" and retriever.is_retriever_source(FLAGS.source)


def _import_retriever() -> Dict[str, Any]:
    for flag in ("task", "skip_heads"):
        if FLAGS[flag].value:
            raise ValueError(f"--{flag} does not apply to a retriever (a dual encoder has no task heads).")
    return retriever.import_retriever(FLAGS.source, FLAGS.model_dir,
                                      model_options=retriever.parse_retriever_options(FLAGS.model_options))


if __name__ == "__main__":  # python -m tapas_tf.commands.import_checkpoint: the same as `tapas-tf import`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
