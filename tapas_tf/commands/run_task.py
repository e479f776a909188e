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
# mode="train")`). This module is the shell: the flags (`task_flags`, defined by `define_flags`, not
# on import), the checks of the command line, and its one-line errors; the modes themselves are
# `task_modes`.

import os
import re
import sys
import traceback
from typing import List, Optional, Sequence, Tuple

from absl import app, flags
from absl.logging import converter as absl_levels

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package (test_layout).
from tapas_tf.commands import task_flags, task_modes
from tapas_tf.task_registry import (
    MODES as MODE_NAMES, TaskSpec, get_task, task_names, tasks_for)
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


# --- the command line --------------------------------------------------------------------------


def _check_built(spec: TaskSpec, mode: str) -> None:
    """Raises UsageError for a mode the task is not built for (`TaskSpec.modes`): refused in one line
    before work starts, so that no run exits 0 having done nothing."""
    if mode in spec.modes:
        return
    pretrain_job = "tapas-tf create-pretrain-data"
    if spec.pretraining and mode == "create_data":
        raise app.UsageError(f"{task_modes.mode_ref(mode, spec.name)} is not built; make the masked-LM data with "
                             f"{pretrain_job} (it writes OUTPUT_DIR/tf_examples/)")
    built = ", ".join(sorted(tasks_for(mode))) or "no task"
    raise app.UsageError(f"{task_modes.mode_ref(mode, spec.name)} is not built yet; {task_modes.mode_ref(mode)} is built "
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
        raise app.UsageError(f"{flag} is a Beam pipeline option; only {task_modes.mode_ref('create_data')} runs a pipeline")
    raise app.UsageError(cli.unknown_flag_message(argument, cli.nearest_flag(argument, _our_flags())))


def _implied_mode(implied: Optional[str]) -> None:
    """Sets --mode to the subcommand's mode; a different --mode given as well is an error."""
    if implied is None:
        return
    if FLAGS["mode"].present and FLAGS.mode != implied:
        raise app.UsageError(f"--mode={FLAGS.mode} contradicts {task_modes.mode_ref(implied)}; the subcommand is the mode: "
                             f"run {task_modes.mode_ref(FLAGS.mode)}, or leave --mode out")
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
    task_modes.check_model_flags(mode)
    task_modes.MODES[mode](spec, argv[1:])


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
                 lambda m: f"{COMMAND} {task_modes.subcommand(m.group(2))} {m.group(1)}", doc)
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
    task_modes.COMMAND = command  # How the modes' messages name a mode (`task_modes.mode_ref`).
    if command is not None:
        PROG = argv[0] = f"{command} {task_modes.subcommand(mode)}"
    _load_task_modules(argv)
    define_flags()
    cli.exit_with_help_if_asked(argv, doc=help_text(), module=__name__)
    cli.plain_absl_logging()
    app.run(main, argv=argv, flags_parser=_parse_flags)


if __name__ == "__main__":  # python -m tapas_tf.commands.run_task: the same as the checkout's run_task.py.
    cli.quiet_tensorflow()
    from tapas_tf.commands import run_task as installed  # The package's module, whose globals the modes read.

    installed.run(sys.argv)
