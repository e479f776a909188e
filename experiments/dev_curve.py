"""SQA dev accuracy of every kept checkpoint of a model directory: the learning curve of a run.

    python experiments/dev_curve.py --model_dir=/tmp/exp/ft_pre --output_dir=/tmp/exp/sqa_data \
        --curve_dir=/tmp/exp/curve_pre

For each checkpoint under MODEL_DIR/checkpoints/ (oldest first), predicts the dev split in one
process, each question seeing the model's own previous answer (as `run_task.py --mode=
predict_and_evaluate` does), into CURVE_DIR/step_N/ (a model directory holding the config, so that
MODEL_DIR's own predictions/ stay those of its final checkpoint). Prints a markdown table and writes
CURVE_DIR/curve.json.
"""

import json
import os
import shutil
from typing import Dict, List

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A trained SQA model directory.")
flags.DEFINE_string("output_dir", None, "create_data's output folder; dev is interactions/dev.tfrecord.")
flags.DEFINE_string("curve_dir", None, "Where the per-checkpoint predictions go.")
flags.DEFINE_string("split", "dev", "The split to predict.")
flags.mark_flags_as_required(["model_dir", "output_dir", "curve_dir"])

COLUMNS = ("ALL", "SEQ", "Q1", "Q2", "Q3", "Q4+")


def checkpoints(model_dir: str) -> List[str]:
    """Checkpoint prefixes under model_dir/checkpoints, by step."""
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(os.path.join(model_dir, "checkpoints"))
    if state is None:
        raise FileNotFoundError(f"{model_dir}/checkpoints: no checkpoints")
    from tapas_tf.inference.sequential import checkpoint_step

    return sorted(state.all_model_checkpoint_paths, key=checkpoint_step)


def main(argv: List[str]) -> None:
    del argv
    from tapas_tf.checkpoints import model_dir as model_dir_lib
    from tapas_tf.features.conversion_config import ConversionConfig
    from tapas_tf.inference.sequential import checkpoint_step, predict_model_dir

    config = ConversionConfig.from_options(max_seq_length=512)
    interactions = os.path.join(FLAGS.output_dir, "interactions", f"{FLAGS.split}.tfrecord")
    rows: List[Dict] = []
    for checkpoint in checkpoints(FLAGS.model_dir):
        step = checkpoint_step(checkpoint)
        target = os.path.join(FLAGS.curve_dir, f"step_{step}")
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(FLAGS.model_dir):
            if name.endswith(".json"):  # The config files of the model directory.
                shutil.copy(os.path.join(FLAGS.model_dir, name), target)
        model_dir_lib.load_config(target)  # Fails early on a directory without a model config.
        outcome = predict_model_dir(target, interactions, FLAGS.split, config, checkpoint=checkpoint,
                                    evaluate=True, show_progress=False)
        rows.append({"step": step, "checkpoint": checkpoint, **{k: outcome.metrics[k] for k in COLUMNS}})
        print(f"step {step}: " + ", ".join(f"{k} {outcome.metrics[k]:.4f}" for k in COLUMNS), flush=True)
    with open(os.path.join(FLAGS.curve_dir, "curve.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    print("| step | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for row in rows:
        print(f"| {row['step']:,} | " + " | ".join(f"{row[k]:.3f}" for k in COLUMNS) + " |")


if __name__ == "__main__":
    app.run(main)
