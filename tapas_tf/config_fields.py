"""A frozen config's field that a command line shows as a flag: its default, help text and choices.

    @dataclasses.dataclass(frozen=True)
    class TrainConfig:
        learning_rate: float = option(1e-4, "Peak learning rate, reached after the warm-up.")

The configs live in the rooms that use them (`features.pretrain_config.PretrainConfig`,
`training.config.TrainConfig`, `inference.decoding.DecodingRule`, ...); the command lines define
their flags from these fields (`cli.define_config_flags`), so a new option is one field. Imports
nothing of ours: every room may use it.
"""

import dataclasses
from typing import Any, Sequence


def option(default: Any = dataclasses.MISSING, help: str = "", choices: Sequence[str] = ()) -> Any:
    """A dataclass field with {"help": help, "choices": choices} as its metadata. A list or tuple
    default becomes a tuple made afresh for each instance; no default: a required flag."""
    metadata = {"help": help, "choices": tuple(choices)}
    if isinstance(default, (list, tuple)):
        return dataclasses.field(default_factory=lambda: tuple(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)
