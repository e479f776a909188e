"""Writes a fine-tuned model directory as the model bundled with the package.

    python experiments/bundle_model.py --model_dir=/tmp/exp/mix_main --checkpoint=... --note="..." \
        --command="experiments/minilm_sqa_wtq.sh data" --command="..."

The bundle (`tapas_tf.checkpoints.bundled.BUNDLED_DIR`) is a compact directory: float16 (or, with
--weights=int8, int8) weights,
the model config, the vocabulary (the source's own, else the default BERT one it was trained with),
and in `compact.json` the commands that made it and its dev evaluations, read from the source's
`predictions/`: SQA with the model's own previous answers (`dev_metrics.json`) and the gold ones
(`dev_gold_previous_metrics.json`), and WTQ's denotation accuracy (`wtq_dev_metrics.json`) when
there is one. Every bundled model together must stay within MAX_BYTES.
"""

import json
import os
import shutil
from typing import Any, Dict, List

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "The fine-tuned model directory, evaluated on SQA dev both ways.")
flags.DEFINE_string("checkpoint", None, "The checkpoint to bundle (the one evaluated); default the newest.")
flags.DEFINE_string("out_dir", None, "Where to write; default the package's bundled model directory.")
flags.DEFINE_multi_string("command", [], "The commands that made the model, in order.")
flags.DEFINE_string("note", "", "A sentence on what the model is.")
flags.DEFINE_enum("weights", "float16", ["float16", "int8"], "How the weights are stored: int8 (weight-only, "
                  "a scale per row or column) is half the size; check its dev answers against float16's.")
flags.mark_flag_as_required("model_dir")

MAX_BYTES = 60 * 1000 * 1000  # All bundled weights together: the repository carries them.


def _metrics(model_dir: str, run: str) -> Dict[str, Any]:
    path = os.path.join(model_dir, "predictions", f"{run}_metrics.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: evaluate the model on dev first (run_task.py --mode=predict_and_evaluate)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv: List[str]) -> None:
    del argv
    from tapas_tf.checkpoints import compact, model_dir
    from tapas_tf.checkpoints.bundled import BUNDLED_DIR
    from tapas_tf.features.vocab import resolve_vocab_file

    out_dir = FLAGS.out_dir or BUNDLED_DIR
    notes = {"about": FLAGS.note, "commands": FLAGS.command,
             "sqa_dev_predicted_previous": _metrics(FLAGS.model_dir, "dev"),
             "sqa_dev_gold_previous": _metrics(FLAGS.model_dir, "dev_gold_previous")}
    if os.path.exists(os.path.join(FLAGS.model_dir, "predictions", "wtq_dev_metrics.json")):
        notes["wtq_dev"] = _metrics(FLAGS.model_dir, "wtq_dev")
    info = compact.write_compact_model_dir(FLAGS.model_dir, out_dir, checkpoint=FLAGS.checkpoint, notes=notes,
                                          weights=FLAGS.weights)
    # The bundle carries its vocabulary either way, so that it never depends on where the default
    # BERT vocabulary comes from on the user's machine.
    vocab = os.path.join(FLAGS.model_dir, "vocab.txt")
    shutil.copy(vocab if os.path.exists(vocab) else resolve_vocab_file(None), os.path.join(out_dir, "vocab.txt"))
    sizes = {name: os.path.getsize(os.path.join(out_dir, name)) for name in sorted(os.listdir(out_dir))}
    print(json.dumps({"out_dir": out_dir, "files": sizes, "weights_bytes": info["weights_bytes"],
                      "max_abs_rounding_error": info["max_abs_rounding_error"]}, indent=2))
    bundled = os.path.dirname(out_dir)
    total = sum(os.path.getsize(model_dir.compact_weights_path(os.path.join(bundled, name)))
                for name in os.listdir(bundled) if model_dir.has_compact_weights(os.path.join(bundled, name)))
    if total > MAX_BYTES:
        raise SystemExit(f"{bundled}: bundled weights of {total:,} bytes exceed {MAX_BYTES:,}")


if __name__ == "__main__":
    app.run(main)
