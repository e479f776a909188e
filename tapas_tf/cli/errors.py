"""One-line errors: `PROG: error: MESSAGE`, the exit codes, and the nearest known name.

A wrong command line exits 2 (as argparse does); anything else (a missing or damaged file, an
unwritable directory, bad data) exits 1. A mistyped name is answered with the nearest known one
("trian" -> "train", "--max_seq_lenght" -> "--max_seq_length").
"""

import difflib
import re
import sys
from typing import Iterable, NoReturn, Optional

USAGE_EXIT_CODE = 2  # A wrong command line, as argparse exits.
ERROR_EXIT_CODE = 1  # Anything else: a missing or damaged file, an unwritable directory, bad data.


def fail(prog: str, message: str, exit_code: int, hint: Optional[str] = None) -> NoReturn:
    """Prints `PROG: error: MESSAGE` (and an indented hint line) to stderr and exits."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    if hint:
        print(f"  {hint}", file=sys.stderr)
    sys.exit(exit_code)


def one_line(error: BaseException) -> str:
    """The message of `error` on one line; TensorFlow's without its op and function names."""
    message = getattr(error, "message", None)  # TensorFlow's OpError: str() would add the op's name.
    if not isinstance(message, str):
        message = str(error)
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[Op:[^\]]*\].*$", "", message, flags=re.DOTALL)
    return " ".join(message.split()) or type(error).__name__


def nearest_name(name: str, known_names: Iterable[str]) -> Optional[str]:
    """The known name closest to `name` ("trian" -> "train"), or None when none is close."""
    matches = difflib.get_close_matches(name, list(known_names), n=1)
    return matches[0] if matches else None


def nearest_flag(argument: str, known_flags: Iterable[str]) -> Optional[str]:
    """The known flag closest to `argument` ("--max_seq_lenght=128" -> "--max_seq_length"), or None."""
    if not argument.startswith("-"):
        return None
    return nearest_name("--" + argument.lstrip("-").split("=", 1)[0], known_flags)


def unknown_flag_message(argument: str, suggestion: Optional[str]) -> str:
    """`unknown flag --max_seq_lenght=128; did you mean --max_seq_length?`"""
    kind = "flag" if argument.startswith("-") else "argument"
    return f"unknown {kind} {argument}" + (f"; did you mean {suggestion}?" if suggestion else "")
