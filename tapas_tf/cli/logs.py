"""A quiet start and plain log lines.

- `quiet_tensorflow` hides TensorFlow's C++ start-up lines ("Could not find cuda drivers",
  "failed call to cuInit", the oneDNN and CPU-feature notes, tensorflow_text's "CharacterSet
  built", ...) by setting TF_CPP_MIN_LOG_LEVEL=3. TensorFlow, XLA and TSL read it once, when
  TensorFlow loads, and cuInit's failure is logged as an ERROR, hence 3. It is left alone when the
  user set it, or asked for debug output (`verbosity.debug_requested`).
- Our own log lines are plain: `I 23:38:22 run_task.py:87] message` (level, time, file and line;
  no date, microseconds or thread id), on absl's handler (`plain_absl_logging`).
"""

import logging
import os
from typing import Optional, Sequence

from tapas_tf.cli.verbosity import debug_requested

TF_LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
QUIET_TF_LOG_LEVEL = "3"  # Hides INFO, WARNING and ERROR lines of TensorFlow's C++ code.
LOG_FORMAT = "%(levelname).1s %(asctime)s %(filename)s:%(lineno)d] %(message)s"
LOG_TIME_FORMAT = "%H:%M:%S"


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
    from absl import flags as absl_flags, logging as absl_logging

    if not absl_flags.FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.ERROR)


def warnings_only_unless_asked() -> None:
    """For long jobs a user watches (`index`): warnings (tables cut, files skipped) and errors, no
    info or debug lines unless -v/--verbosity is given."""
    from absl import flags as absl_flags, logging as absl_logging

    if not absl_flags.FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.WARNING)
