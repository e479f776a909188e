"""The task CLI: create data, train, predict and evaluate TAPAS on a task.

    python run_task.py --task=SQA --mode=create_data --input_dir=DIR --output_dir=DIR
    python run_task.py --task=SQA --mode=train --output_dir=DIR --model_dir=DIR --model_size=tiny
    python run_task.py --task=SQA --mode=predict_and_evaluate --output_dir=DIR --model_dir=DIR
    python run_task.py --task=SQA --mode=export --model_dir=DIR --export_dir=DIR
    python run_task.py --task=SQA --mode=export --model_dir=DIR --export_lite    # DIR/model.tflite for ask
    python run_task.py --task=PRETRAIN --mode=train --output_dir=DIR --model_dir=DIR --model_size=tiny
    python run_task.py --task=PRETRAIN --mode=evaluate --output_dir=DIR --model_dir=DIR
    python run_task.py --task=MY_TASK --mode=create_data --task_module=my_task.py ...

Each task is registered once, with its reader, splits, preset, conversion options, evaluation and
modes (`tapas_tf.task_registry`); --task_module loads a module of yours that registers more, a .py
file or a module name (docs/ADDING_A_TASK.md).

A released model by name (`--model=google/tapas-base-finetuned-wtq`, or the address of an original
release zip; downloaded and imported on first use, then cached, as for `ask --model`):

    python run_task.py --task=WTQ --mode=train --model=NAME --output_dir=DIR --model_dir=NEW_DIR
    python run_task.py --task=WTQ --mode=predict_and_evaluate --model=NAME --output_dir=DIR --model_dir=OUT
    python run_task.py --task=WTQ --mode=export --model=NAME --export_dir=DIR

train fine-tunes it (it is the --init_checkpoint) into --model_dir; predict and
predict_and_evaluate read it and write their outputs into --model_dir (OUT/predictions/);
export reads it (no --model_dir).

create_data shows the questions and interactions done while its Beam job runs (a live line on a
terminal, else a log line every 30 s; --noprogress_bar: neither), when the job's steps run in this
process: not with --runner=... or --direct_running_mode=multi_processing.

PRETRAIN reads the masked-LM TFRecords of `tapas-tf create-pretrain-data`
(OUTPUT_DIR/tf_examples/{train,test}-*.tfrecord) and trains TapasForMaskedLM; --mode=evaluate
writes its masked-LM accuracy (Table 5 of the paper) to MODEL_DIR/eval_pretrain/metrics.json.

Flags that this CLI does not define (for example `--runner=DataflowRunner` or
`--direct_num_workers=2`) are passed to the Beam pipeline of create_data, if Beam's pipeline
options know them; any other unknown flag is an error naming the nearest known one, in every mode.

Errors are one line, `run_task.py: error: ...`, naming the flag, path or value and what to do; the
exit code is 2 for a wrong command line and 1 for anything else. Pass --verbosity=debug (or a
number >= 1), or set TAPAS_TF_DEBUG=1, to see the traceback as well, and TensorFlow's C++
start-up lines, which are hidden otherwise (`tapas_tf.cli`).
"""

# The checkout's `run_task.py` runs this module (`run`), and so does the installed command, one
# mode per subcommand (`tapas-tf train --task=SQA ...`: `run(argv, command="tapas-tf",
# mode="train")`). The flags are defined by `define_flags` (`task_flags`), not on import.

import json
import logging
import os
import re
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import app, flags
from absl.logging import converter as absl_levels

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package (test_layout).
from tapas_tf.commands import task_flags
from tapas_tf.data.paths import ensure_writable_dir
from tapas_tf.pipelines import task_files
from tapas_tf.task_registry import (
    MODES as MODE_NAMES, TaskSpec, conversion_config, get_task, task_names, tasks_for)
from tapas_tf.task_registry.modules import TaskModuleError, load_task_module, task_module_arguments

FLAGS = flags.FLAGS


def define_flags() -> None:
    """Defines the flags of this command line, once per process (after the --task_module modules
    are loaded: --task offers the registered tasks)."""
    task_flags.define_flags(task_names(), MODE_NAMES)
    flags.adopt_module_key_flags(task_flags)  # --help lists them as this command line's.


PROG = "run_task.py"  # `run` sets it: "tapas-tf train" for the installed command.
COMMAND: Optional[str] = None  # "tapas-tf" when the installed command runs a mode as a subcommand.
_IMPLIED_MODE: Optional[str] = None  # ...and the mode of that subcommand.
USAGE_EXIT_CODE = cli.USAGE_EXIT_CODE  # 2: a wrong command line, as argparse exits.
ERROR_EXIT_CODE = cli.ERROR_EXIT_CODE  # 1: a missing or damaged file, an unwritable directory, bad data.
DEBUG_ENV = cli.DEBUG_ENV
DEBUG_HINT = f"(rerun with --verbosity=debug or {DEBUG_ENV}=1 for the traceback)"


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


def _check_model_flags(mode: str) -> None:
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

# --- the command line --------------------------------------------------------------------------


def _check_built(spec: TaskSpec, mode: str) -> None:
    """Raises UsageError for a mode the task is not built for (`TaskSpec.modes`): refused in one line
    before work starts, so that no run exits 0 having done nothing."""
    if mode in spec.modes:
        return
    pretrain_job = "tapas-tf create-pretrain-data"
    if spec.pretraining and mode == "create_data":
        raise app.UsageError(f"{mode_ref(mode, spec.name)} is not built; make the masked-LM data with "
                             f"{pretrain_job} (it writes OUTPUT_DIR/tf_examples/)")
    built = ", ".join(sorted(tasks_for(mode))) or "no task"
    raise app.UsageError(f"{mode_ref(mode, spec.name)} is not built yet; {mode_ref(mode)} is built "
                         f"for {built}")


def _our_flags() -> List[str]:
    """The flags of this CLI and of absl ("--max_seq_length", "--verbosity", ...)."""
    return cli.absl_flag_names()


def _check_extra_args(mode: str, extra_args: List[str]) -> None:
    """Raises UsageError for arguments that neither our flags nor (for create_data) Beam know.

    absl parses with known_only=True, so a mistyped flag of ours lands here too; the error then
    names the nearest known flag.
    """
    if not extra_args:
        return
    # Imported only now: it imports Beam, which the other modes need not load.
    from tapas_tf.pipelines import beam_options

    if mode == "create_data":
        try:
            beam_options.check_pipeline_args(extra_args, other_flags=_our_flags())
        except beam_options.PipelineArgsError as e:
            raise app.UsageError(str(e)) from e
        return
    argument = extra_args[0]
    flag = argument.split("=", 1)[0]
    if flag in beam_options.known_beam_flags():
        raise app.UsageError(f"{flag} is a Beam pipeline option; only {mode_ref('create_data')} runs a pipeline")
    raise app.UsageError(cli.unknown_flag_message(argument, cli.nearest_flag(argument, _our_flags())))


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


def _implied_mode(implied: Optional[str]) -> None:
    """Sets --mode to the subcommand's mode; a different --mode given as well is an error."""
    if implied is None:
        return
    if FLAGS["mode"].present and FLAGS.mode != implied:
        raise app.UsageError(f"--mode={FLAGS.mode} contradicts {mode_ref(implied)}; the subcommand is the mode: "
                             f"run {mode_ref(FLAGS.mode)}, or leave --mode out")
    FLAGS.mode = implied


def _run_mode(argv: List[str]) -> None:
    """Checks the command line, then runs the mode."""
    _implied_mode(_IMPLIED_MODE)
    if FLAGS.mode is not None:  # A mistyped flag first: it may be the one missing.
        _check_extra_args(FLAGS.mode, argv[1:])
    if FLAGS.task is None or FLAGS.mode is None:
        raise app.UsageError("--task and --mode are required (run_task.py --help lists the flags)" if COMMAND is None
                             else f"--task is required ({PROG} --help lists the flags)")
    spec, mode = get_task(FLAGS.task), FLAGS.mode
    _check_built(spec, mode)
    _check_model_flags(mode)
    MODES[mode](spec, argv[1:])


def _debug_requested() -> bool:
    """--verbosity=debug (or >= 1) or TAPAS_TF_DEBUG=1: show tracebacks."""
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        return True
    return FLAGS.is_parsed() and FLAGS.verbosity >= absl_levels.ABSL_DEBUG


def _user_error_types() -> Tuple[type, ...]:
    """Errors that mean a wrong input or environment, not a bug: reported in one line.

    TensorFlow's OpError only once TensorFlow is loaded (the CLI loads it lazily).
    """
    types: Tuple[type, ...] = (ValueError, OSError, FloatingPointError)
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        types += (tf.errors.OpError,)
    return types


def main(argv: List[str]) -> None:
    """Runs the mode; wrong input or environment ends in one line and a non-zero exit."""
    try:
        _run_mode(argv)
    except app.UsageError as e:
        if _debug_requested():
            traceback.print_exc()
        cli.fail(PROG, cli.one_line(e), USAGE_EXIT_CODE)
    except Exception as e:  # noqa: BLE001  Bugs are re-raised below, with their traceback.
        if not isinstance(e, _user_error_types()):
            raise
        debug = _debug_requested()
        if debug:
            traceback.print_exc()
        cli.fail(PROG, cli.one_line(e), ERROR_EXIT_CODE, hint=None if debug else DEBUG_HINT)


def _parse_flags(argv: List[str]) -> List[str]:
    """Parses our flags and returns the rest after the program name (for Beam, if it knows them).

    A bad value (--mode=trian, --max_seq_length=abc) exits with one line, not absl's traceback.
    """
    return cli.parse_absl_flags(PROG, argv, unknown_flags_allowed=True)


def _load_task_modules(argv: List[str]) -> None:
    """Imports the --task_module modules before the flags are defined, so that --task (and --help)
    knows their tasks. A module that cannot be found is a usage error; an error inside one (a
    registration it gets wrong, say) is named in one line, its traceback shown on request."""
    for name in task_module_arguments(argv):
        try:
            load_task_module(name)
        except TaskModuleError as e:
            cli.fail(PROG, f"--task_module={name}: {cli.one_line(e)}", USAGE_EXIT_CODE)
        except Exception as e:  # noqa: BLE001  The user's module: its error, named, in one line.
            debug = cli.debug_requested(argv)
            if debug:
                traceback.print_exc()
            cli.fail(PROG, f"--task_module={name}: {type(e).__name__}: {cli.one_line(e)}", ERROR_EXIT_CODE,
                     hint=None if debug else DEBUG_HINT)


def help_text() -> str:
    """The docstring, in the words of the command line that runs (run_task.py or tapas-tf)."""
    doc = __doc__
    if COMMAND is None:
        return doc
    doc = re.sub(r"python run_task\.py (--task=\w+) --mode=(\w+)",
                 lambda m: f"{COMMAND} {subcommand(m.group(2))} {m.group(1)}", doc)
    doc = doc.replace("--mode=evaluate", f"{COMMAND} evaluate").replace("`run_task.py: error: ...`",
                                                                        f"`{PROG}: error: ...`")
    return f"usage: {PROG} --task=TASK [flags]    (the subcommand is the mode: no --mode)\n\n{doc}"


def run(argv: Optional[Sequence[str]] = None, command: Optional[str] = None, mode: Optional[str] = None) -> None:
    """Runs the command line on `argv` (default sys.argv; argv[0] is the program) and exits.

    `command` and `mode`: the installed command runs one mode as a subcommand, e.g.
    `run(["tapas-tf train", "--task=SQA", ...], command="tapas-tf", mode="train")`; messages then
    name `tapas-tf train`, and --mode is implied. Call `cli.quiet_tensorflow()` first.
    """
    global PROG, COMMAND, _IMPLIED_MODE
    if (command is None) != (mode is None) or (mode is not None and mode not in MODE_NAMES):
        raise ValueError(f"run: command and mode go together; mode one of {MODE_NAMES}, not {mode!r}")
    argv = list(sys.argv if argv is None else argv)
    COMMAND, _IMPLIED_MODE = command, mode
    if command is not None:
        PROG = argv[0] = f"{command} {subcommand(mode)}"
    _load_task_modules(argv)
    define_flags()
    cli.exit_with_help_if_asked(argv, doc=help_text(), module=__name__)
    cli.plain_absl_logging()
    app.run(main, argv=argv, flags_parser=_parse_flags)
