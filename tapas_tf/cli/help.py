"""--help: a command's docstring and its key flags on stdout, exit 0 (absl's own exits 1).

A reader that stops early (`--help | head`) is no error.
"""

import os
import sys
from typing import Optional, Sequence

from tapas_tf.cli.verbosity import flag_arguments

HELP_FLAGS = ("-h", "-?", "--help", "--helpshort")


def exit_with_help_if_asked(argv: Sequence[str], doc: Optional[str] = None,
                            module: Optional[str] = None) -> None:
    """-h, --help, --helpshort: the main module's docstring and key flags on stdout; --helpfull:
    every flag. Both exit 0 (absl's own --help exits 1).

    `doc` and `module` (a module name, e.g. "tapas_tf.ask") replace the main module's docstring
    and the module whose key flags are shown: for a command line run from another module (the
    installed `tapas-tf` command, or a script that calls into the package).
    """
    from absl import app, flags

    arguments = flag_arguments(argv)
    full = "--helpfull" in arguments
    if not full and not any(argument in HELP_FLAGS for argument in arguments):
        return
    if doc is None and module is None:
        app.usage(shorthelp=not full, writeto_stdout=True, exitcode=0)
    text = (sys.modules["__main__"].__doc__ if doc is None else doc) or ""
    flag_text = flags.FLAGS.get_help() if full else flags.FLAGS.module_help(module or sys.argv[0])
    print_help(text.rstrip("\n") + ("\n\nflags:\n" + flag_text if flag_text else ""))
    sys.exit(0)


def print_help(text: str) -> None:
    """Prints `text` to stdout; a reader that stops early (`--help | head`) is no error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_closed_stdout()


def quiet_closed_stdout() -> None:
    """After stdout's reader went away (`| head`): stdout to /dev/null, so that Python's flush at exit
    raises nothing and prints no traceback."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
