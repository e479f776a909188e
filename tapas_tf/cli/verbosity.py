"""absl's -v/--verbosity with names as well as numbers, and whether debug output is asked for.

absl's flag takes numbers only; every command line of tapas-tf also takes the level names (debug,
info, warning, error, fatal): `verbosity_names_as_numbers` rewrites them before absl parses.
`--verbosity=debug` (`-v 1`, any level >= 1) or TAPAS_TF_DEBUG=1 asks for debug output: tracebacks
and TensorFlow's C++ start-up lines (`logs.quiet_tensorflow`).
"""

import os
import re
import sys
from typing import List, Optional, Sequence

DEBUG_ENV = "TAPAS_TF_DEBUG"
VERBOSITY_FLAGS = ("--verbosity", "-verbosity", "--v", "-v")
DEBUG_VERBOSITY = 1  # absl's DEBUG; higher numbers are finer debug levels.


def verbosity_level(value: str) -> int:
    """absl's verbosity of a number or a level name: "debug" -> 1, "warning" -> -1, "2" -> 2.

    Raises ValueError for anything else.
    """
    from absl.logging import converter

    names = converter.ABSL_NAMES  # {"DEBUG": 1, "INFO": 0, "WARNING": -1, "ERROR": -2, "FATAL": -3, ...}
    if value.strip().upper() in names:
        return names[value.strip().upper()]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"not a verbosity: {value!r} (a number, or one of "
                         f"{', '.join(sorted(n.lower() for n in names))})") from None


def flag_arguments(argv: Sequence[str]) -> List[str]:
    """The arguments after the program name, up to "--" (after it, everything is positional)."""
    arguments = list(argv[1:])
    return arguments[:arguments.index("--")] if "--" in arguments else arguments


def requested_verbosity(argv: Sequence[str]) -> Optional[int]:
    """The verbosity that `argv` asks for (the last -v/--verbosity wins), or None.

    `--verbosity=debug`, `--verbosity debug`, `-v 1`, `--v=1` ...; an unreadable value counts as
    none (the flag parser reports it).
    """
    arguments = flag_arguments(argv)
    level = None
    for i, argument in enumerate(arguments):
        name, equals, value = argument.partition("=")
        if name not in VERBOSITY_FLAGS:
            continue
        if not equals:
            if i + 1 >= len(arguments):
                continue
            value = arguments[i + 1]
        try:
            level = verbosity_level(value)
        except ValueError:
            continue
    return level


def debug_requested(argv: Optional[Sequence[str]] = None, environ=None) -> bool:
    """TAPAS_TF_DEBUG=1, or a verbosity of debug (>= 1) in `argv` (default sys.argv)."""
    environ = os.environ if environ is None else environ
    if environ.get(DEBUG_ENV, "") not in ("", "0"):
        return True
    level = requested_verbosity(sys.argv if argv is None else argv)
    return level is not None and level >= DEBUG_VERBOSITY


def verbosity_names_as_numbers(argv: Sequence[str]) -> List[str]:
    """`--verbosity=debug` -> `--verbosity=1`, `-v warning` -> `-v -1`: absl's flag takes numbers only."""
    result: List[str] = []
    flag_count = len(flag_arguments(argv)) + 1
    for position, argument in enumerate(argv):
        if 0 < position < flag_count:
            name, equals, value = argument.partition("=")
            if equals and name in VERBOSITY_FLAGS and not is_number(value):
                argument = f"{name}={_number_or_as_is(value)}"
            elif not equals and result[-1] in VERBOSITY_FLAGS and not is_number(argument):
                argument = _number_or_as_is(argument)  # The value of "--verbosity debug".
        result.append(argument)
    return result


def is_number(value: str) -> bool:
    return re.fullmatch(r"\s*[+-]?\d+\s*", value) is not None


def _number_or_as_is(value: str) -> str:
    try:
        return str(verbosity_level(value))
    except ValueError:
        return value  # absl's parser names the bad value.
