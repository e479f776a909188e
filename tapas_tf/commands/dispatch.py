"""The installed command: `tapas-tf SUBCOMMAND [flags]` runs one of the command lines of tapas-tf.

    tapas-tf ask --table=t.csv "which city is the largest?"
    tapas-tf create-data --task=SQA --input_dir=DIR --output_dir=DIR
    tapas-tf train --task=SQA --output_dir=DIR --model_dir=DIR --model_size=tiny
    tapas-tf --help                 # the subcommands, one line each
    tapas-tf SUBCOMMAND --help      # its flags

Each subcommand is a module's command line (`python -m tapas_tf.ask`, `python run_task.py
--mode=train`, ...) with its flags, its help and its one-line errors, under the name `tapas-tf
SUBCOMMAND`. Only the chosen subcommand's module is imported: the flags of two command lines never
meet (ask's --model_dir and run_task's are different flags), and `tapas-tf --help` loads nothing
heavy. TensorFlow's C++ start-up lines are hidden first, before any module loads it (`tapas_tf.cli`).
"""

import importlib
import sys
from typing import Dict, List, NamedTuple, NoReturn, Optional, Sequence

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package (test_layout).

COMMAND = "tapas-tf"
_RUN_TASK = "tapas_tf.commands.run_task"


class Subcommand(NamedTuple):
    summary: str  # One line for `tapas-tf --help`.
    module: str  # The module whose command line it runs.
    kind: str  # "absl": its main under absl's app.run; "argparse": main(argv, prog); "mode": run_task.
    mode: Optional[str] = None  # run_task's --mode, for kind "mode".
    module_prog: Optional[str] = None  # absl modules: how the docstring names the program.


SUBCOMMANDS: Dict[str, Subcommand] = {
    "ask": Subcommand("Ask a table (a CSV file) a question, or hold a conversation on stdin.",
                      "tapas_tf.ask", "absl", module_prog="python -m tapas_tf.ask"),
    "serve": Subcommand("A local web page for asking tables (needs pip install 'tapas-tf[web]').",
                        "tapas_tf.serve", "absl", module_prog="python -m tapas_tf.serve"),
    "sample-data": Subcommand("Write the small SQA-format sample data set (input of create-data).",
                              "tapas_tf.sample_data", "argparse"),
    "create-data": Subcommand("A task's release files -> interactions and TFRecords (a Beam job).",
                              _RUN_TASK, "mode", "create_data"),
    "train": Subcommand("Train (or resume) a model on the data of create-data; --task=PRETRAIN pre-trains.",
                        _RUN_TASK, "mode", "train"),
    "predict": Subcommand("Predict a split with a model: MODEL_DIR/predictions/.", _RUN_TASK, "mode",
                          "predict"),
    "predict-and-evaluate": Subcommand("Predict a split and write its metrics.", _RUN_TASK, "mode",
                                       "predict_and_evaluate"),
    "evaluate": Subcommand("Masked-LM accuracy of a pre-trained model (--task=PRETRAIN).", _RUN_TASK, "mode",
                           "evaluate"),
    "export": Subcommand("Export a model as a SavedModel for TF Serving.", _RUN_TASK, "mode", "export"),
    "import": Subcommand("Import a Hugging Face or original (TF1) TAPAS checkpoint as a model directory.",
                         "tapas_tf.import_checkpoint", "argparse"),
    "init-from-bert": Subcommand("A model directory whose encoder starts from a text BERT (default MiniLM).",
                                 "tapas_tf.init_from_bert", "argparse"),
    "verify": Subcommand("Is a statement about a table (a CSV file) true? TabFact: entailed or refuted, "
                         "with P(entailed).", "tapas_tf.commands.verify", "absl",
                         module_prog="python -m tapas_tf.commands.verify"),
    "make-statements": Subcommand("TabFact: true and false statements from a split's tables (intermediate "
                                  "pre-training).", "tapas_tf.commands.make_statements", "absl",
                                  module_prog="python -m tapas_tf.commands.make_statements"),
    "create-pretrain-data": Subcommand("Wikipedia pages -> masked-LM pre-training examples (a Beam job).",
                                       "tapas_tf.beam_jobs.create_pretrain_data", "argparse"),
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
    sub, prog, rest = SUBCOMMANDS[name], f"{COMMAND} {name}", argv[2:]
    return {"absl": _run_absl, "argparse": _run_argparse, "mode": _run_mode}[sub.kind](sub, prog, rest)


def _run_absl(sub: Subcommand, prog: str, rest: List[str]) -> int:
    """As the module's `if __name__ == "__main__"` block runs it, under the name `prog`."""
    from absl import app

    module = importlib.import_module(sub.module)
    argv = [prog, *rest]
    doc = (module.__doc__ or "").replace(sub.module_prog or sub.module, prog)
    doc = doc.replace(f"`{getattr(module, 'PROG', prog)}: error:", f"`{prog}: error:")
    cli.exit_with_help_if_asked(argv, doc=doc, module=sub.module)
    cli.plain_absl_logging()
    module.PROG = prog  # Its main's one-line errors (`PROG: error: ...`) name the subcommand.
    app.run(module.main, argv=argv, flags_parser=lambda args: cli.parse_absl_flags(prog, args))
    return 0  # Not reached: app.run exits.


def _run_argparse(sub: Subcommand, prog: str, rest: List[str]) -> int:
    cli.log_to_stderr(cli.requested_verbosity([prog, *rest]) or 0)  # Plain log lines from the start.
    module = importlib.import_module(sub.module)
    return module.main(rest, prog=prog) or 0


def _run_mode(sub: Subcommand, prog: str, rest: List[str]) -> int:
    from tapas_tf.commands import run_task

    run_task.run([prog, *rest], command=COMMAND, mode=sub.mode)
    return 0  # Not reached: app.run exits.


if __name__ == "__main__":
    sys.exit(main())
