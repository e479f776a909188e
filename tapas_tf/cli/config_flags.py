"""Flags generated from a frozen config: a new option of a command is one field of its config.

A field made with `tapas_tf.config_fields.option(default, help)` becomes an absl flag of its type
(`define_config_flags`), and the flags' values build the config again (`config_from_flags`).
Option specs (`(name, type, help)`, e.g. `DecodingRule.flag_specs()`) become flags that default
to None, "not given" (`define_option_flags`, `option_flag_values`).
"""

import dataclasses
import typing
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

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
