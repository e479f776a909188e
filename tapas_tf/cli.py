"""What every command line of tapas-tf shares: a quiet start, plain log lines, one-line flag errors.

    from tapas_tf import cli
    cli.quiet_tensorflow()   # first, before anything imports TensorFlow

Used by every command line: the installed command `tapas-tf` (`tapas_tf.commands.dispatch`),
which runs each command module of `tapas_tf.commands` under absl, and its aliases
(`run_task.py`, `python -m tapas_tf.ask`, `python -m tapas_tf.serve`):

- `quiet_tensorflow` hides TensorFlow's C++ start-up lines ("Could not find cuda drivers",
  "failed call to cuInit", the oneDNN and CPU-feature notes, tensorflow_text's "CharacterSet
  built", ...) by setting TF_CPP_MIN_LOG_LEVEL=3. TensorFlow, XLA and TSL read it once, when
  TensorFlow loads, and cuInit's failure is logged as an ERROR, hence 3. It is left alone when the
  user set it, or asked for debug output: `--verbosity=debug` (`-v 1`, any level >= 1) or
  TAPAS_TF_DEBUG=1.
- Our own log lines are plain: `I 23:38:22 run_task.py:87] message` (level, time, file and line;
  no date, microseconds or thread id), on absl's handler (`plain_absl_logging`).
- absl's -v/--verbosity takes numbers only; every command line also takes its names (debug, info,
  warning, error, fatal): `verbosity_names_as_numbers`, `verbosity_level`.
- A wrong command line ends in one line, `PROG: error: ...`, exit code 2 (`parse_absl_flags`,
  `fail`): a mistyped flag names the nearest known one (`nearest_flag`; `nearest_name` for other
  names, e.g. subcommands), before a missing required flag (most often the mistyped one).
- Flags generated from a frozen config (its `config_fields.option` fields, `define_config_flags`,
  `config_from_flags`): a new option of a command is one field of its config.

Must not import TensorFlow (it runs before TensorFlow loads), nor Beam, nor anything of tapas_tf.
"""

import dataclasses
import difflib
import logging
import os
import re
import sys
import typing
from typing import Any, Callable, Dict, Iterable, List, NoReturn, Optional, Sequence, Tuple

TF_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
QUIET_TF_LOG_LEVEL = "3"  # Hides INFO, WARNING and ERROR lines of TensorFlow's C++ code.
DEBUG_ENV = "TAPAS_TF_DEBUG"
USAGE_EXIT_CODE = 2  # A wrong command line, as argparse exits.
ERROR_EXIT_CODE = 1  # Anything else: a missing or damaged file, an unwritable directory, bad data.
VERBOSITY_FLAGS = ("--verbosity", "-verbosity", "--v", "-v")
DEBUG_VERBOSITY = 1  # absl's DEBUG; higher numbers are finer debug levels.
HELP_FLAGS = ("-h", "-?", "--help", "--helpshort")
LOG_FORMAT = "%(levelname).1s %(asctime)s %(filename)s:%(lineno)d] %(message)s"
LOG_TIME_FORMAT = "%H:%M:%S"


# --- verbosity ---------------------------------------------------------------------------------


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


def _flag_arguments(argv: Sequence[str]) -> List[str]:
    """The arguments after the program name, up to "--" (after it, everything is positional)."""
    arguments = list(argv[1:])
    return arguments[:arguments.index("--")] if "--" in arguments else arguments


def requested_verbosity(argv: Sequence[str]) -> Optional[int]:
    """The verbosity that `argv` asks for (the last -v/--verbosity wins), or None.

    `--verbosity=debug`, `--verbosity debug`, `-v 1`, `--v=1` ...; an unreadable value counts as
    none (the flag parser reports it).
    """
    arguments = _flag_arguments(argv)
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
    flag_arguments = len(_flag_arguments(argv)) + 1
    for position, argument in enumerate(argv):
        if 0 < position < flag_arguments:
            name, equals, value = argument.partition("=")
            if equals and name in VERBOSITY_FLAGS and not _is_number(value):
                argument = f"{name}={_number_or_as_is(value)}"
            elif not equals and result[-1] in VERBOSITY_FLAGS and not _is_number(argument):
                argument = _number_or_as_is(argument)  # The value of "--verbosity debug".
        result.append(argument)
    return result


def _is_number(value: str) -> bool:
    return re.fullmatch(r"\s*[+-]?\d+\s*", value) is not None


def _number_or_as_is(value: str) -> str:
    try:
        return str(verbosity_level(value))
    except ValueError:
        return value  # absl's parser names the bad value.


# --- TensorFlow's start-up lines and our log lines ---------------------------------------------


def quiet_tensorflow(argv: Optional[Sequence[str]] = None, environ=None) -> bool:
    """Sets TF_CPP_MIN_LOG_LEVEL=3 unless it is set or debug output is asked for; call it before
    TensorFlow is first imported (it reads the variable once). Returns whether it set it."""
    environ = os.environ if environ is None else environ
    if TF_LOG_LEVEL_ENV in environ or debug_requested(argv, environ):
        return False
    environ[TF_LOG_LEVEL_ENV] = QUIET_TF_LOG_LEVEL
    return True


class PlainFormatter(logging.Formatter):
    """`I 23:38:22 run_task.py:87] message`: absl's layout without the date, microseconds and thread."""

    def __init__(self):
        super().__init__(LOG_FORMAT, LOG_TIME_FORMAT)


def plain_absl_logging() -> None:
    """absl's handler (which `app.run` puts on the root logger) writes `PlainFormatter` lines."""
    from absl import logging as absl_logging

    absl_logging.get_absl_handler().setFormatter(PlainFormatter())


def quiet_logs_unless_asked() -> None:
    """For the command lines a user reads (`ask`, `verify`): no log lines unless -v/--verbosity is
    given; what matters (rows pruned, cells trimmed) is printed with each answer."""
    from absl import flags as absl_flags
    from absl import logging as absl_logging

    if not absl_flags.FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.ERROR)


# --- one-line errors ---------------------------------------------------------------------------


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


def absl_flag_names() -> List[str]:
    """Every flag absl knows in this process, as "--name"."""
    from absl import flags

    return [f"--{name}" for name in flags.FLAGS]


OptionSpec = Tuple[str, type, str]  # (name, type: bool, int, float or str, help)


def define_option_flags(specs: Iterable[OptionSpec], default_note: str, module_name: str) -> None:
    """Defines an absl flag per option spec (e.g. `DecodingRule.flag_specs()`), each defaulting to
    None: "not given", so that the caller's own default (a model's, a task's) applies.
    `default_note` ends each help text and says what that default is; `module_name` (the caller's
    `__name__`) owns the flags, so that its --help lists them."""
    from absl import flags

    define = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
              str: flags.DEFINE_string}
    for name, kind, text in specs:
        define[kind](name, None, f"{text} {default_note}", module_name=module_name)


def _field_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def define_config_flags(config_class: type, module_name: str, skip: Sequence[str] = (),
                        fields: Optional[Sequence[str]] = None, none_defaults: Sequence[str] = (),
                        flag_values: Any = None) -> None:
    """Defines an absl flag per field of the frozen dataclass `config_class` (`config_fields.option`s:
    fields with a "help" in their metadata): string, integer, float, bool, enum (choices), a comma
    list for a tuple of ints, a repeatable string flag for a tuple of strings. A new option of a
    command is then one field of its config, and nothing else.

    `fields`: only these (default every field not in `skip`). A field without a default is a
    required flag; the flags of `none_defaults` default to None ("not given": the caller's own
    default applies, e.g. a task's preset). `flag_values`: default absl's FLAGS."""
    from absl import flags

    where = dict(module_name=module_name, flag_values=flags.FLAGS if flag_values is None else flag_values)
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if field.name in skip or (fields is not None and field.name not in fields):
            continue
        text = field.metadata.get("help")
        if not text:
            raise ValueError(f"{config_class.__name__}.{field.name} has no help text for its flag")
        default = None if field.name in none_defaults else _field_default(field)
        kind, choices = hints[field.name], field.metadata.get("choices")
        if choices:
            flags.DEFINE_enum(field.name, default, list(choices), text, **where)
        elif _is_tuple_of(kind, int):
            flags.DEFINE_list(field.name, None if default is None else [str(v) for v in default], text, **where)
        elif typing.get_origin(kind) is tuple:
            flags.DEFINE_multi_string(field.name, None if default is None else list(default) or None,
                                      text + " (repeatable)", **where)
        else:
            define = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float}.get(
                _without_none(kind), flags.DEFINE_string)
            define(field.name, default, text, **where)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            flags.mark_flag_as_required(field.name, flag_values=where["flag_values"])


def _without_none(kind: Any) -> Any:
    """`Optional[X]` -> X; anything else as it is."""
    arguments = [a for a in typing.get_args(kind) if a is not type(None)]
    return arguments[0] if typing.get_origin(kind) is typing.Union and len(arguments) == 1 else kind


def _is_tuple_of(kind: Any, item: type) -> bool:
    return typing.get_origin(kind) is tuple and typing.get_args(kind)[:1] == (item,)


def config_flag_values(config_class: type, fields: Sequence[str], flag_values: Any = None) -> Dict[str, Any]:
    """{field: its flag's value} for flags of `define_config_flags`, as the field's type wants them
    (a tuple for a tuple field, ints for a comma list of ints; None where not given)."""
    from absl import flags

    hints = typing.get_type_hints(config_class)
    values = {}
    for name in fields:
        value = (flags.FLAGS if flag_values is None else flag_values)[name].value
        if value is not None and _is_tuple_of(hints[name], int):
            value = tuple(int(v) for v in value)
        elif value is not None and typing.get_origin(hints[name]) is tuple:
            value = tuple(value)
        values[name] = value
    return values


def config_from_flags(config_class: type, skip: Sequence[str] = (), flag_values: Any = None, **values: Any) -> Any:
    """The `config_class` instance the flags of `define_config_flags` describe, with `values` for
    the skipped fields. Raises what its `__post_init__` raises (ValueError) for a bad combination."""
    names = [field.name for field in dataclasses.fields(config_class) if field.name not in skip]
    given = config_flag_values(config_class, names, flag_values)
    for name, value in given.items():  # A repeatable flag not given is an empty tuple.
        if value is None and typing.get_origin(typing.get_type_hints(config_class)[name]) is tuple:
            given[name] = ()
    return config_class(**given, **values)


def option_flag_values(specs: Iterable[OptionSpec]) -> Dict[str, Any]:
    """The values of the flags that `define_option_flags` defined for these specs, None if not given."""
    from absl import flags

    return {name: flags.FLAGS[name].value for name, _, _ in specs}


def _first_unknown_absl_flag(arguments: Sequence[str], other_flags: Iterable[str] = ()) -> Optional[str]:
    """`unknown flag --tabel=x; did you mean --table?` for the first argument before "--" that no
    absl flag (nor one of `other_flags`, "--name") takes, else None."""
    from absl import flags

    other = set(other_flags)
    for argument in arguments:
        if argument == "--":
            return None
        if not argument.startswith("-") or argument == "-" or _is_number(argument):
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


def exit_with_help_if_asked(argv: Sequence[str], doc: Optional[str] = None,
                            module: Optional[str] = None) -> None:
    """-h, --help, --helpshort: the main module's docstring and key flags on stdout; --helpfull:
    every flag. Both exit 0 (absl's own --help exits 1).

    `doc` and `module` (a module name, e.g. "tapas_tf.ask") replace the main module's docstring
    and the module whose key flags are shown: for a command line run from another module (the
    installed `tapas-tf` command, or a script that calls into the package).
    """
    from absl import app, flags

    arguments = _flag_arguments(argv)
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
