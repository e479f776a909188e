"""absl's flag parser with one-line errors: a bad value or an unknown flag names the nearest known one.

`parse_absl_flags` is the `flags_parser` of `absl.app.run` for every command line: a mistyped flag
is reported before a missing required flag (most often the mistyped one), and a command that hands
what it does not define to Beam (`unknown_flags_allowed`) still refuses what neither knows.
"""

import difflib
import re
from typing import Callable, Iterable, List, Optional, Sequence

from tapas_tf.cli.errors import USAGE_EXIT_CODE, fail, nearest_flag, one_line, unknown_flag_message
from tapas_tf.cli.verbosity import is_number, verbosity_names_as_numbers


def absl_flag_names() -> List[str]:
    """Every flag absl knows in this process, as "--name"."""
    from absl import flags

    return [f"--{name}" for name in flags.FLAGS]


def _first_unknown_absl_flag(arguments: Sequence[str], other_flags: Iterable[str] = ()) -> Optional[str]:
    """`unknown flag --tabel=x; did you mean --table?` for the first argument before "--" that no
    absl flag (nor one of `other_flags`, "--name") takes, else None."""
    from absl import flags

    other = set(other_flags)
    for argument in arguments:
        if argument == "--":
            return None
        if not argument.startswith("-") or argument == "-" or is_number(argument):
            continue
        name = argument.lstrip("-").split("=", 1)[0]
        if name in flags.FLAGS or (name.startswith("no") and name[2:] in flags.FLAGS) or f"--{name}" in other:
            continue
        return unknown_flag_message(argument, nearest_flag(argument, set(absl_flag_names()) | other))
    return None


def reject_positional_arguments(prog: str, argv: Sequence[str]) -> None:
    """One line and exit code 2 for an argument that is not a flag (argv[0] is the program)."""
    if len(argv) > 1:
        fail(prog, f"unexpected argument {argv[1]!r} (every option is a flag; {prog} --help lists them)",
             USAGE_EXIT_CODE)


def flag_error_message(error: Exception) -> str:
    """absl's message for a bad flag value without its "flag " prefix, plus the nearest value of an
    enum flag (absl words it "flag --mode=trian: value should be one of <...>"); a missing required
    flag is "--NAME is required"."""
    from absl import flags

    message = one_line(error)
    required = re.search(r"Flag --(\w+) must have a value other than None", message)
    if required:
        return f"--{required.group(1)} is required"
    match = re.match(r"flag --(\w+)=(.*?): ", message)
    if not match:
        return message
    message = message[len("flag "):]
    name, value = match.groups()
    choices = getattr(flags.FLAGS[name].parser, "enum_values", None) if name in flags.FLAGS else None
    nearest = difflib.get_close_matches(value, choices or [], n=1, cutoff=0.5)
    if nearest:
        message += f"; did you mean --{name}={nearest[0]}?"
    return message


def parse_absl_flags(prog: str, argv: Sequence[str], unknown_flags_allowed: bool = False,
                     other_flags: Optional[Callable[[], Iterable[str]]] = None) -> List[str]:
    """absl's flags parser for `app.run(flags_parser=...)`: returns the program name and what is
    not a flag.

    Verbosity names are taken (`--verbosity=debug`). A bad value, and unless
    `unknown_flags_allowed` a flag nobody defines (before "--"), ends in one line naming the flag
    (and the nearest known one) and exit code 2. "--" is dropped: what follows it is positional.
    `other_flags`: the flags another parser takes from what is left (Beam's pipeline options); a
    missing required flag is reported after any flag that neither absl nor they know.
    """
    from absl import flags

    try:
        rest = flags.FLAGS(verbosity_names_as_numbers(argv), known_only=True)
    except flags.Error as e:
        # A missing required flag is most often a mistyped one: name that one first.
        unknown = _first_unknown_absl_flag(argv[1:], other_flags() if other_flags else ())
        fail(prog, unknown or flag_error_message(e), USAGE_EXIT_CODE)
    if unknown_flags_allowed:
        return rest
    arguments = rest[1:]
    before, after = (arguments[:arguments.index("--")], arguments[arguments.index("--") + 1:]) \
        if "--" in arguments else (arguments, [])
    for argument in before:
        if argument.startswith("-") and argument != "-":
            fail(prog, unknown_flag_message(argument, nearest_flag(argument, absl_flag_names())), USAGE_EXIT_CODE)
    return [rest[0]] + before + after
