"""Runs one subcommand of `tapas-tf` in this process, for the installed command and every alias of it.

    runner.run("create-pretrain-data", sys.argv[1:], prog="create_pretrain_data.py")

A command module (`subcommands.SUBCOMMANDS[name].module`) has `define_flags()`, `main(argv)` and a
docstring that is its --help; it runs under absl's `app.run` with our flag parser (one-line
errors). A mode of the task command line runs through `tapas_tf.commands.run_task.run`. Both are
imported by name here, as the dispatcher imports them, so that the alias scripts below the command
layer (the Beam job files) can run their command without importing it.
"""

import importlib
from typing import Any, List, Sequence

from tapas_tf.cli import flag_parsing, help, logs
from tapas_tf.cli.subcommands import COMMAND, SUBCOMMANDS, Subcommand


def run(name: str, arguments: Sequence[str], prog: str) -> int:
    """Runs subcommand `name` on `arguments` (its flags and words) as program `prog`.

    Does not return: absl's app.run exits (0, or the command's error code)."""
    logs.quiet_tensorflow([prog, *arguments])  # Before any module loads TensorFlow.
    sub = SUBCOMMANDS[name]
    return (_run_mode if sub.mode else _run_command)(sub, prog, list(arguments))


def _by_name(reference: str) -> Any:
    """`package.module:attribute` -> that attribute."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _run_command(sub: Subcommand, prog: str, arguments: List[str]) -> int:
    """The command module's main under absl's app.run, its flags defined first."""
    from absl import app

    module = importlib.import_module(sub.module)
    module.define_flags()
    argv = [prog, *arguments]
    help.exit_with_help_if_asked(argv, doc=module.__doc__, module=sub.module)
    logs.plain_absl_logging()
    module.PROG = prog  # Its one-line errors (`PROG: error: ...`) name the program as the user typed it.
    other_flags = _by_name(sub.other_flags) if sub.other_flags else None
    app.run(module.main, argv=argv, flags_parser=lambda args: flag_parsing.parse_absl_flags(
        prog, args, unknown_flags_allowed=sub.pipeline_options, other_flags=other_flags))
    return 0  # Not reached: app.run exits.


def _run_mode(sub: Subcommand, prog: str, arguments: List[str]) -> int:
    importlib.import_module(sub.module).run([prog, *arguments], command=COMMAND, mode=sub.mode)
    return 0  # Not reached: app.run exits.


def subcommand_of_module(module: str) -> str:
    """The subcommand that command module `module` runs ("tapas_tf.commands.verify" -> "verify").

    Raises KeyError for a module that runs no subcommand, or several (the task command line)."""
    names = [name for name, sub in SUBCOMMANDS.items() if sub.module == module and sub.mode is None]
    if len(names) != 1:
        raise KeyError(f"{module} is not the module of one subcommand")
    return names[0]


def run_module(module: str, arguments: Sequence[str]) -> int:
    """`python -m tapas_tf.commands.verify ...`: the command module's subcommand, as `tapas-tf verify` runs it."""
    return run(subcommand_of_module(module), arguments, prog=module.rsplit(".", 1)[-1])
