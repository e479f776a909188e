"""The installed command: `tapas-tf SUBCOMMAND [flags]` runs one of the command lines of tapas-tf.

    tapas-tf ask --table=t.csv "which city is the largest?"
    tapas-tf create-data --task=SQA --input_dir=DIR --output_dir=DIR
    tapas-tf train --task=SQA --output_dir=DIR --model_dir=DIR --model_size=tiny
    tapas-tf --help                 # the subcommands, one line each
    tapas-tf SUBCOMMAND --help      # its flags

The table of subcommands is `tapas_tf.cli.subcommands` and the runner of one `tapas_tf.cli.runner`
(below the command layer, so that the Beam job scripts can run their command too). Every
subcommand is a module of `tapas_tf.commands` with the same shape: `define_flags()` (absl
flags), `main(argv)` run under absl's `app.run`, and a docstring that is its --help; the modes of
`run_task` (create-data, train, predict, ...) share the task command line. Only the chosen
subcommand's module is imported and only its flags are defined: the flags of two command lines
never meet (ask's --model_dir and run_task's are different flags), and `tapas-tf --help` loads
nothing heavy. TensorFlow's C++ start-up lines are hidden first, before any module loads it
(`tapas_tf.cli`). `python -m tapas_tf.ask`, `python -m tapas_tf.serve` and `python run_task.py`
are aliases that come here (`run`).
"""

import sys
from typing import NoReturn, Optional, Sequence

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package (test_layout).
from tapas_tf.cli import runner
from tapas_tf.cli.subcommands import ALIASES, COMMAND, SUBCOMMANDS, Subcommand  # noqa: F401  (the table)


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
    aliases (`python -m tapas_tf.ask`) run it too (`tapas_tf.cli.runner.run`)."""
    return runner.run(name, arguments, prog)


if __name__ == "__main__":
    sys.exit(main())
