"""The modes of the task command line: create_data, train, predict, predict_and_evaluate,
evaluate and export (`tapas_tf.commands.run_task` is the shell that parses the flags, checks the
command line and runs one of them: `MODES`).

Each mode reads the parsed flags (`task_flags`) once, builds the frozen configs it needs
(`ConversionConfig` through the task registry, `TrainConfig` from its flag fields, the model's
`TapasConfig`) and hands them to the library: the Beam job, the trainer, batch prediction, export.
A wrong command line is an `app.UsageError` naming the flags, in the words of the command that
runs (`mode_ref`: `--task=SQA --mode=train` for run_task.py, `tapas-tf train --task=SQA` for the
installed command).
"""

import json
import logging
import os
from typing import Any, Callable, Dict, List, Optional

from absl import app, flags

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package (test_layout).
from tapas_tf.commands import task_flags
from tapas_tf.data.paths import ensure_writable_dir
from tapas_tf.pipelines import task_files
from tapas_tf.task_registry import TaskSpec, conversion_config, get_task

FLAGS = flags.FLAGS
COMMAND: Optional[str] = None  # "tapas-tf" when the installed command runs a mode as a subcommand (`run_task.run`).


def mode_ref(mode: str, task: Optional[str] = None) -> str:
    """How the command line names a mode (and task) in messages: `--task=SQA --mode=train` for
    run_task.py, `tapas-tf train --task=SQA` for the installed command."""
    task_flag = [f"--task={task}"] if task else []
    if COMMAND is None:
        return " ".join(task_flag + [f"--mode={mode}"])
    return " ".join([COMMAND, subcommand(mode)] + task_flag)


def subcommand(mode: str) -> str:
    """The installed command's subcommand of a mode: "predict_and_evaluate" -> "predict-and-evaluate"."""
    return mode.replace("_", "-")


# --- the modes -------------------------------------------------------------------------------


def _require(*names: str) -> None:
    missing = [n for n in names if not getattr(FLAGS, n)]
    if missing:
        raise app.UsageError(f"{mode_ref(FLAGS.mode)} needs " + ", ".join(f"--{n}" for n in missing))


def _check_model_dir(train_command: str) -> None:
    """--model_dir exists (else: how to train one there) and its outputs can be written."""
    if not os.path.isdir(FLAGS.model_dir):
        raise FileNotFoundError(f"--model_dir={FLAGS.model_dir} does not exist; train a model there with "
                                f"{train_command} or pass the directory of one")
    ensure_writable_dir(FLAGS.model_dir, "--model_dir")


# The modes that read --model, and what it is to each.
MODEL_MODES = ("train", "predict", "predict_and_evaluate", "export")
_PREDICT_MODES = ("predict", "predict_and_evaluate")


def check_model_flags(mode: str) -> None:
    """Raises UsageError for --model or --model_revision where they contradict the other flags.

    --model replaces what the mode would read: train's --init_checkpoint, export's --model_dir
    and the checkpoint of either predict mode. Predictions are written into the model directory,
    so with --model the predict modes take --model_dir as the place for them.
    """
    if FLAGS.model_revision and not FLAGS.model:
        raise app.UsageError("--model_revision needs --model")
    if not FLAGS.model:
        return
    if mode not in MODEL_MODES:
        raise app.UsageError(f"--model is read by {', '.join(mode_ref(m) for m in MODEL_MODES)}; "
                             f"not by {mode_ref(mode)}")
    if mode == "train" and FLAGS.init_checkpoint:
        raise app.UsageError("give --model (a released model to fine-tune) or --init_checkpoint, not both")
    if mode == "export" and FLAGS.model_dir:
        raise app.UsageError("give --model (a released model to export) or --model_dir, not both")
    if FLAGS.checkpoint and mode != "train":
        raise app.UsageError("--checkpoint names a checkpoint of --model_dir; with --model the released "
                             "model's own checkpoint is read")
    if mode in _PREDICT_MODES and not FLAGS.model_dir:
        raise app.UsageError(f"{mode_ref(mode)} --model writes its predictions into --model_dir "
                             "(MODEL_DIR/predictions/), not into the released model's cached copy; give "
                             "--model_dir, a directory for them")


def _released_model_dir() -> str:
    """The cached model directory of --model, downloaded and imported on first use."""
    from tapas_tf.checkpoints.released import released_model_dir

    # A classification task (TABFACT) fine-tunes or predicts with a released TabFact model.
    kind = "classification" if get_task(FLAGS.task).evaluation == "classification" else "question_answering"
    model_dir = released_model_dir(FLAGS.model, revision=FLAGS.model_revision, task=kind)
    logging.info("Released model %s: %s", FLAGS.model, model_dir)
    return model_dir


def _max_seq_length(spec: TaskSpec) -> int:
    """--max_seq_length, else the task's preset (512; PRETRAIN 128)."""
    return FLAGS.max_seq_length or spec.preset.max_seq_length


def _decoding_rule(spec: TaskSpec):
    """The task's `DecodingRule` under the decoding flags given (--threshold, --fallback_to_best_cell, ...)."""
    from tapas_tf.inference.decoding import DecodingRule

    return DecodingRule.for_preset(spec.preset, **cli.option_flag_values(DecodingRule.flag_specs()))


_CONVERSION_FLAGS = ("max_column_id", "max_row_id", "cell_trim_length", "strip_column_names")


def _conversion_config(spec: TaskSpec, model_vocab: Optional[str] = None):
    """The task's conversion options under the flags given; drop_rows_to_fit None is resolved per
    split (`for_split`). The vocabulary is --vocab_file, else `model_vocab` (a released model's
    own), else BERT's."""
    given: Dict[str, Any] = {name: FLAGS[name].value for name in _CONVERSION_FLAGS if FLAGS[name].present}
    return conversion_config(spec, FLAGS.vocab_file or model_vocab, max_seq_length=FLAGS.max_seq_length,
                             drop_rows_to_fit=FLAGS.drop_rows_to_fit, **given)


def create_data(spec: TaskSpec, pipeline_args: List[str]) -> None:
    """Runs the Beam job of the task with `pipeline_args` (already checked against Beam's options)."""
    from tapas_tf.beam_jobs.create_task_data import REPORT_FILE, report_lines, run_create_data

    _require("input_dir", "output_dir")
    ensure_writable_dir(FLAGS.output_dir, "--output_dir")
    from tapas_tf.pipelines.progress import ProgressSettings

    report = run_create_data(spec, FLAGS.input_dir, FLAGS.output_dir, _conversion_config(spec), pipeline_args,
                             train_file_name=FLAGS.train_release_file,
                             progress_settings=ProgressSettings() if FLAGS.progress_bar else None)
    for line in report_lines(report):
        logging.info("%s", line)
    logging.info("Report: %s", os.path.join(FLAGS.output_dir, REPORT_FILE))
    failed = [failure for split in report["splits"].values() for failure in split.get("file_failures", [])]
    if failed:
        # A split cut short by a damaged file must not look like a smaller split.
        raise ValueError(f"{len(failed)} input file(s) could not be read to the end (what came before the damage "
                         f"was converted; see {REPORT_FILE} and failures/): {failed[0]['message']}")


def train(spec: TaskSpec, pipeline_args: List[str]) -> None:
    """Trains (or resumes) in --model_dir on --train_file; see tapas_tf.training.trainer.train."""
    del pipeline_args  # Always empty: only create_data takes arguments for Beam.
    _require("model_dir")
    if not FLAGS.train_file:
        _require("output_dir")
    ensure_writable_dir(FLAGS.model_dir, "--model_dir")
    from tapas_tf.training import config as train_config, distribution, trainer as training

    strategy = distribution.get_strategy(FLAGS.distribution_strategy, FLAGS.tpu)
    init_checkpoint = _released_model_dir() if FLAGS.model else FLAGS.init_checkpoint
    base = train_config.base_model_config(FLAGS.model_size, FLAGS.model_config, init_checkpoint)
    if spec.pretraining:  # The masked-LM model has no QA heads: only the encoder and --model_option.
        model_config = base.replace(**train_config.parse_overrides(FLAGS.model_option))
        train_file = FLAGS.train_file or task_files.pretrain_examples(FLAGS.output_dir, "train")
        max_predictions_per_seq = FLAGS.max_predictions_per_seq
    else:
        model_config = _qa_model_config(spec, base)
        train_file = FLAGS.train_file or task_files.split_paths(FLAGS.output_dir, "train")["examples"]
        max_predictions_per_seq = None
    config = train_config.train_config_for_task(
        spec.preset, train_file, max_seq_length=_max_seq_length(spec),
        max_predictions_per_seq=max_predictions_per_seq, init_checkpoint=init_checkpoint,
        show_progress=FLAGS.progress_bar,
        **cli.config_flag_values(train_config.TrainConfig, train_config.FLAG_FIELDS))
    result = training.train(model_config, config, FLAGS.model_dir, strategy)
    logging.info("Trained to step %d; checkpoints in %s", result.step, FLAGS.model_dir)


def _qa_model_config(spec: TaskSpec, base):
    """`base` with the task's preset heads and losses and the flags that override them."""
    from tapas_tf.training import config as train_config

    options = cli.option_flag_values(task_flags.MODEL_OPTION_FLAGS)  # None: the task's.
    options.update(train_config.parse_overrides(FLAGS.model_option))  # --model_option=NAME=VALUE, given last.
    config = train_config.model_config_for_task(spec.preset, base, **options)
    if config.use_question_match_embeddings and not config.question_match_ignored_ids:
        # The ids of the vocabulary the examples were made with; stored in the config from here on.
        from tapas_tf.features.question_match import ignored_ids
        from tapas_tf.features.vocab import resolve_vocab_file

        config = config.replace(question_match_ignored_ids=ignored_ids(resolve_vocab_file(FLAGS.vocab_file)))
    return config


def _predict(spec: TaskSpec, evaluate: bool) -> None:
    """Predicts --predict_split with --model_dir (or --model); see
    tapas_tf.inference.sequential.predict_model_dir.

    The conversion options come from the flags, with fail_on_dropped_answers off; rows are dropped
    to fit as create_data drops them for the split (by default: for dev and test, not for train).
    With --model, the released model is read and its outputs go to --model_dir, and its vocab.txt
    is the default vocabulary.
    """
    _require("model_dir")
    if not FLAGS.interactions_file:
        _require("output_dir")
    # Checked before the model is loaded: predictions are written at the end, into MODEL_DIR.
    if FLAGS.model:
        ensure_writable_dir(FLAGS.model_dir, "--model_dir")
    else:
        _check_model_dir(mode_ref("train"))
    model_dir = _released_model_dir() if FLAGS.model else FLAGS.model_dir
    model_vocab = os.path.join(model_dir, "vocab.txt")
    interactions_file = (FLAGS.interactions_file
                         or task_files.split_paths(FLAGS.output_dir, FLAGS.predict_split)["interactions"])
    own_vocab = model_vocab if FLAGS.model and os.path.exists(model_vocab) else None
    config = _conversion_config(spec, own_vocab).for_split(is_training=FLAGS.predict_split == "train")
    if spec.evaluation == "classification":
        from tapas_tf.inference.classification import predict_classification

        predict_classification(model_dir, interactions_file, FLAGS.predict_split, config,
                               checkpoint=FLAGS.checkpoint, batch_size=FLAGS.predict_batch_size,
                               evaluate=evaluate, show_progress=FLAGS.progress_bar,
                               output_dir=FLAGS.model_dir)
        return
    from tapas_tf.inference.sequential import predict_model_dir

    predict_model_dir(model_dir, interactions_file, FLAGS.predict_split, config,
                      checkpoint=FLAGS.checkpoint, batch_size=FLAGS.predict_batch_size,
                      use_gold_previous_answer=FLAGS.use_gold_previous_answer, evaluate=evaluate,
                      jit_compile=FLAGS.predict_jit_compile, show_progress=FLAGS.progress_bar,
                      output_dir=FLAGS.model_dir,
                      evaluation=spec.evaluation,
                      rule=_decoding_rule(spec))


def predict(spec: TaskSpec, pipeline_args: List[str]) -> None:
    """Writes MODEL_DIR/predictions/{split}.tsv ({split}_gold_previous.tsv with gold previous answers)."""
    _predict(spec, evaluate=False)


def predict_and_evaluate(spec: TaskSpec, pipeline_args: List[str]) -> None:
    """Also writes MODEL_DIR/predictions/{name}_metrics.json and TensorBoard scalars in MODEL_DIR/eval_{name}.

    `name` is the split, or `{split}_gold_previous` with --use_gold_previous_answer."""
    _predict(spec, evaluate=True)


def evaluate(spec: TaskSpec, pipeline_args: List[str]) -> None:
    """PRETRAIN: masked-LM accuracy on the test split; see tapas_tf.training.masked_lm_eval. A
    classification task (TABFACT): the metrics of MODEL_DIR/predictions/{split}.tsv (or
    --predictions_file) against the split's labels, in {split}_metrics.json."""
    del pipeline_args  # No Beam.
    _require("model_dir")
    if spec.evaluation == "classification":
        _evaluate_predictions()
        return
    if not FLAGS.eval_file:
        _require("output_dir")
    _check_model_dir(mode_ref("train", spec.name))
    from tapas_tf.training.masked_lm_eval import evaluate_model_dir

    eval_file = FLAGS.eval_file or task_files.pretrain_examples(FLAGS.output_dir, "test")
    evaluate_model_dir(FLAGS.model_dir, eval_file, _max_seq_length(spec), FLAGS.max_predictions_per_seq,
                       batch_size=FLAGS.predict_batch_size, checkpoint=FLAGS.checkpoint,
                       vocab_file=FLAGS.vocab_file or _pretrain_data_vocab(FLAGS.output_dir))


def _evaluate_predictions() -> None:
    from tapas_tf.inference.classification import evaluate_predictions
    from tapas_tf.inference.sequential import PREDICTIONS_DIR

    if not FLAGS.interactions_file:
        _require("output_dir")
    split = FLAGS.predict_split
    predictions = FLAGS.predictions_file or os.path.join(FLAGS.model_dir, PREDICTIONS_DIR, f"{split}.tsv")
    interactions = FLAGS.interactions_file or task_files.split_paths(FLAGS.output_dir, split)["interactions"]
    evaluate_predictions(predictions, interactions,
                         os.path.join(FLAGS.model_dir, PREDICTIONS_DIR, f"{split}_metrics.json"))


def _pretrain_data_vocab(output_dir: Optional[str]) -> Optional[str]:
    """The vocabulary named by the pre-training job's report in OUTPUT_DIR, if it is still there."""
    report = os.path.join(output_dir or "", "pretrain_report.json")
    if not output_dir or not os.path.exists(report):
        return None
    with open(report) as f:
        vocab_file = json.load(f).get("config", {}).get("vocab_file")
    return vocab_file if vocab_file and os.path.exists(vocab_file) else None


def export(spec: TaskSpec, pipeline_args: List[str]) -> None:
    """Writes EXPORT_DIR/<version>/, a SavedModel for TF Serving (see tapas_tf.serving.export), and
    with --export_lite MODEL_DIR/model.tflite (see tapas_tf.serving.lite_export)."""
    del spec, pipeline_args  # Any model directory exports the same way; no Beam.
    needed = () if FLAGS.export_lite and not FLAGS.export_dir else ("export_dir",)
    if FLAGS.model:
        _require(*needed)
    else:
        _require("model_dir", *needed)
    if FLAGS.export_dir:
        ensure_writable_dir(FLAGS.export_dir, "--export_dir")
    model_dir = _released_model_dir() if FLAGS.model else FLAGS.model_dir
    if FLAGS.export_dir:
        from tapas_tf.serving.export import export_model_dir

        path = export_model_dir(model_dir, FLAGS.export_dir, version=FLAGS.export_version,
                                checkpoint=FLAGS.checkpoint, vocab_file=FLAGS.vocab_file)
        logging.info("Exported %s to %s", FLAGS.model or model_dir, path)
    if FLAGS.export_lite:
        from tapas_tf.serving.lite_export import export_lite_model

        path = export_lite_model(model_dir, checkpoint=FLAGS.checkpoint, share_weights=FLAGS.lite_share_weights)
        logging.info("Wrote %s, the LiteRT copy that ask runs without TensorFlow", path)


# Every mode takes the task's registration and the arguments left for Beam (empty but for create_data).
MODES: Dict[str, Callable[[TaskSpec, List[str]], None]] = {
    "create_data": create_data,
    "train": train,
    "predict": predict,
    "predict_and_evaluate": predict_and_evaluate,
    "evaluate": evaluate,
    "export": export,
}
