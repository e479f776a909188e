"""The installed command: `tapas-tf SUBCOMMAND [flags]` runs one of the command lines of tapas-tf.

    tapas-tf ask --table=t.csv "which city is the largest?"
    tapas-tf create-data --task=SQA --input_dir=DIR --output_dir=DIR
    tapas-tf train --task=SQA --output_dir=DIR --model_dir=DIR --model_size=tiny
    tapas-tf --help                 # the subcommands, one line each
    tapas-tf SUBCOMMAND --help      # its flags

Every subcommand is a module of `tapas_tf.commands` with the same shape: `define_flags()` (absl
flags), `main(argv)` run under absl's `app.run`, and a docstring that is its --help; the modes of
`run_task` (create-data, train, predict, ...) share the task command line. Only the chosen
subcommand's module is imported and only its flags are defined: the flags of two command lines
never meet (ask's --model_dir and run_task's are different flags), and `tapas-tf --help` loads
nothing heavy. TensorFlow's C++ start-up lines are hidden first, before any module loads it
(`tapas_tf.cli`). `python -m tapas_tf.ask`, `python -m tapas_tf.serve` and `python run_task.py`
are aliases that come here (`run`).
"""

import importlib
import sys
from typing import Dict, List, NamedTuple, NoReturn, Optional, Sequence

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package (test_layout).

COMMAND = "tapas-tf"
_RUN_TASK = "tapas_tf.commands.run_task"


class Subcommand(NamedTuple):
    summary: str  # One line for `tapas-tf --help`.
    module: str  # The command module: define_flags() and main(argv), run under absl's app.run.
    mode: Optional[str] = None  # Or: this run_task --mode (module tapas_tf.commands.run_task).
    pipeline_options: bool = False  # Flags the command does not define go to Beam's PipelineOptions.


def _command(name: str) -> str:
    return f"tapas_tf.commands.{name}"


SUBCOMMANDS: Dict[str, Subcommand] = {
    "ask": Subcommand("Ask a table (a CSV file) a question, or hold a conversation on stdin.", _command("ask")),
    "serve": Subcommand("A local web page for asking tables (needs pip install 'tapas-tf[web]').",
                        _command("serve")),
    "sample-data": Subcommand("Write the small SQA-format sample data set (input of create-data).",
                              _command("sample_data")),
    "create-data": Subcommand("A task's release files -> interactions and TFRecords (a Beam job).",
                              _RUN_TASK, "create_data"),
    "train": Subcommand("Train (or resume) a model on the data of create-data; --task=PRETRAIN pre-trains.",
                        _RUN_TASK, "train"),
    "predict": Subcommand("Predict a split with a model: MODEL_DIR/predictions/.", _RUN_TASK, "predict"),
    "predict-and-evaluate": Subcommand("Predict a split and write its metrics.", _RUN_TASK, "predict_and_evaluate"),
    "evaluate": Subcommand("Metrics of a split's predictions; masked-LM accuracy of a pre-trained model "
                           "(--task=PRETRAIN).", _RUN_TASK, "evaluate"),
    "export": Subcommand("Export a model as a SavedModel for TF Serving.", _RUN_TASK, "export"),
    "import": Subcommand("Import a Hugging Face or original (TF1) TAPAS checkpoint as a model directory.",
                         _command("import_checkpoint")),
    "init-from-bert": Subcommand("A model directory whose encoder starts from a text BERT (default MiniLM).",
                                 _command("init_from_bert")),
    "verify": Subcommand("Is a statement about a table (a CSV file) true? TabFact: entailed or refuted, "
                         "with P(entailed).", _command("verify")),
    "make-statements": Subcommand("TabFact: true and false statements from a split's tables (intermediate "
                                  "pre-training).", _command("make_statements")),
    "bundle": Subcommand("Write a fine-tuned model directory as a compact (float16 or int8) bundled model, with "
                         "its dev scores.", _command("bundle")),
    "collect-tables": Subcommand("The distinct tables of interaction files, without evaluation tables (the "
                                 "synthetic stage's input).", _command("collect_tables")),
    "create-pretrain-data": Subcommand("Wikipedia pages -> masked-LM pre-training examples (a Beam job).",
                                       _command("create_pretrain_data"), pipeline_options=True),
}
ALIASES = {"import-checkpoint": "import"}  # Besides "_" for "-": create_data, init_from_bert, ...


def usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS) + 2
    lines = [f"usage: {COMMAND} SUBCOMMAND [flags]", "",
             "TAPAS table question answering in TensorFlow 2 / Keras. Subcommands:", ""]
    lines += [f"  {name:<{width}}{sub.summary}" for name, sub in SUBCOMMANDS.items()]
    lines += ["", f"`{COMMAND} SUBCOMMAND --help` lists its flags. -v debug (any subcommand): TensorFlow's "
              "C++ start-up lines too."]
    return "\n".join(lines)


def _fail(message: str) -> NoReturn:
    cli.fail(COMMAND, message, cli.USAGE_EXIT_CODE)


def resolve(word: str, arguments: Sequence[str] = ()) -> str:
    """The subcommand that `word` names, or one line naming the nearest and exit code 2 (a flag in
    its place, the subcommand of a `--mode=MODE` among `arguments`)."""
    name = ALIASES.get(word.replace("_", "-"), word.replace("_", "-"))
    if name in SUBCOMMANDS:
        return name
    if word.startswith("-"):
        modes = [a.split("=", 1)[1].replace("_", "-") for a in arguments if a.startswith("--mode=")]
        mode = f" {modes[-1]}" if modes and modes[-1] in SUBCOMMANDS else ""
        _fail(f"the subcommand comes first: {COMMAND}{mode or ' SUBCOMMAND'} [flags]"
              + (" (the mode is the subcommand; no --mode)" if mode else f" ({COMMAND} --help lists them)"))
    nearest = cli.nearest_name(word, list(SUBCOMMANDS) + list(ALIASES))
    suggestion = f"; did you mean {ALIASES.get(nearest, nearest)}?" if nearest else ""
    _fail(f"unknown subcommand {word}{suggestion} ({COMMAND} --help lists them)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`tapas-tf SUBCOMMAND [flags]` (argv default sys.argv, argv[0] the program); returns the exit code."""
    argv = list(sys.argv if argv is None else argv)
    cli.quiet_tensorflow(argv)  # First: TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when it loads.
    if len(argv) < 2:
        _fail(f"a subcommand is required: {', '.join(SUBCOMMANDS)} ({COMMAND} --help says what each does)")
    if argv[1] in cli.HELP_FLAGS + ("--helpfull",):
        cli.print_help(usage())
        return 0
    if argv[1] == "--version":
        from importlib import metadata

        try:
            print(f"{COMMAND} {metadata.version('tapas-tf')}")
        except metadata.PackageNotFoundError:  # Run from a checkout that is not installed.
            print(f"{COMMAND} (not installed: no version)")
        return 0
    name = resolve(argv[1], argv[1:])
    return run(name, argv[2:], prog=f"{COMMAND} {name}")


def run(name: str, arguments: Sequence[str], prog: str) -> int:
    """Runs subcommand `name` on `arguments` (its flags and words) as program `prog`; as the module
    aliases (`python -m tapas_tf.ask`) run it too."""
    cli.quiet_tensorflow([prog, *arguments])  # Before any module loads TensorFlow (an alias comes here first).
    sub = SUBCOMMANDS[name]
    return (_run_mode if sub.mode else _run_command)(sub, prog, list(arguments))


def _run_command(sub: Subcommand, prog: str, arguments: List[str]) -> int:
    """The command module's main under absl's app.run, its flags defined first."""
    from absl import app

    module = importlib.import_module(sub.module)
    module.define_flags()
    argv = [prog, *arguments]
    cli.exit_with_help_if_asked(argv, doc=module.__doc__, module=sub.module)
    cli.plain_absl_logging()
    module.PROG = prog  # Its one-line errors (`PROG: error: ...`) name the program as the user typed it.
    beam_flags = None
    if sub.pipeline_options:  # What our flags leave goes to Beam: its options are known flags too.
        from tapas_tf.pipelines.beam_options import known_beam_flags as beam_flags
    app.run(module.main, argv=argv, flags_parser=lambda args: cli.parse_absl_flags(
        prog, args, unknown_flags_allowed=sub.pipeline_options, other_flags=beam_flags))
    return 0  # Not reached: app.run exits.


def _run_mode(sub: Subcommand, prog: str, arguments: List[str]) -> int:
    from tapas_tf.commands import run_task

    run_task.run([prog, *arguments], command=COMMAND, mode=sub.mode)
    return 0  # Not reached: app.run exits.


if __name__ == "__main__":
    sys.exit(main())
