"""Command line: export a table-retrieval dual encoder for TF Serving, and its query tower for LiteRT.

    tapas-tf export-retriever --model_dir=my_retriever --export_dir=export/retriever        # export/retriever/1
    tapas-tf export-retriever --model_dir=my_retriever --export_dir=export/retriever --version=7 --nolite

`--model_dir` is a dual-encoder directory (`tapas-tf import` of a Google retriever, `tapas-tf
init-from-bert --target=retriever`, `tapas-tf train-retriever`). EXPORT_DIR/<version>/ gets a
SavedModel with the signatures `query_embedding` (input_ids, input_mask -> embeddings),
`table_embedding` (the table tower's nine features -> embeddings) and `serving_default` (=
query_embedding), and assets.extra/ with dual_encoder.json, vocab.txt and embedder.json (the
model_id and dimension). The version is the next free one unless `--version` is given; an existing
version is never overwritten. The checkpoint is the one embedder.json records (else the newest)
unless `--checkpoint` is given.

Unless `--nolite`, MODEL_DIR/query_tower.tflite (and query_tower.tflite.json) is written too: the
question tower for LiteRT, checked against TensorFlow before it is written. The last line printed
is one JSON object: {"export", "lite", "model_id", "dimension"}.
"""

import json
import os
import sys
from typing import List

from absl import flags

import tapas_tf.cli as cli

PROG = "export-retriever"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("model_dir", None, "The dual-encoder directory to export.")
    flags.DEFINE_string("export_dir", None, "The base directory of the versions (TF Serving's --model_base_path).")
    flags.DEFINE_integer("version", None, "The version to write (default: the next free one).", lower_bound=1)
    flags.DEFINE_string("checkpoint", None, "A checkpoint prefix (default: the one embedder.json records, else "
                        "the newest).")
    flags.DEFINE_boolean("lite", True, "Also write MODEL_DIR/query_tower.tflite, the query tower for LiteRT.")


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    for name in ("model_dir", "export_dir"):
        if not getattr(FLAGS, name):
            cli.fail(PROG, f"--{name} is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    cli.warnings_only_unless_asked()
    import tensorflow as tf

    from tapas_tf.serving import retriever_export

    try:
        path = retriever_export.export_retriever(FLAGS.model_dir, FLAGS.export_dir, version=FLAGS.version,
                                                 checkpoint=FLAGS.checkpoint, lite=FLAGS.lite)
        with tf.io.gfile.GFile(os.path.join(path, "assets.extra", "embedder.json")) as f:  # gs:// too.
            record = json.load(f)
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    lite = os.path.join(FLAGS.model_dir, retriever_export.LITE_FILE) if FLAGS.lite else None
    print(json.dumps({"export": path, "lite": lite, "model_id": record["model_id"],
                      "dimension": record["dimension"]}))


if __name__ == "__main__":
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
