"""What every command line of tapas-tf shares: a quiet start, plain log lines, one-line flag errors.

    import tapas_tf.cli as cli
    cli.quiet_tensorflow()   # first, before anything imports TensorFlow

Used by every command line: the installed command `tapas-tf` (`tapas_tf.commands.dispatch`),
which runs each command module of `tapas_tf.commands` under absl, its aliases (`run_task.py`,
`python -m tapas_tf.ask`, the Beam job scripts `python beam_jobs/create_pretrain_data.py`), and
the data jobs' pipeline options (`tapas_tf.pipelines.beam_options`). One module per concern:

| module | holds |
|---|---|
| `verbosity` | -v/--verbosity with level names (`--verbosity=debug`), whether debug output is asked for |
| `logs` | `quiet_tensorflow` (TF_CPP_MIN_LOG_LEVEL=3 before TensorFlow loads), plain log lines |
| `errors` | `fail` (`PROG: error: ...`), exit codes (2: the command line, 1: the rest), nearest names |
| `config_flags` | flags generated from a frozen config's `config_fields.option` fields, and back |
| `flag_parsing` | absl's parser with one-line errors naming the nearest flag |
| `help` | --help and --helpfull on stdout, exit 0 |
| `subcommands` | the table of `tapas-tf` subcommands: name, summary, module (by name) |
| `runner` | runs one subcommand in this process (the dispatcher and every alias) |

The names below are the room's API (`cli.fail`, `cli.define_config_flags`, ...).

May import: nothing of ours (it runs before TensorFlow loads, and under the data jobs): no
TensorFlow, no Beam. `runner` imports the command modules by the names in `subcommands`.
"""

from tapas_tf.cli.config_flags import (  # noqa: F401
    OptionSpec,
    config_flag_values,
    config_from_flags,
    define_config_flags,
    define_option_flags,
    option_flag_values,
)
from tapas_tf.cli.errors import (  # noqa: F401
    ERROR_EXIT_CODE,
    USAGE_EXIT_CODE,
    fail,
    nearest_flag,
    nearest_name,
    one_line,
    unknown_flag_message,
)
from tapas_tf.cli.flag_parsing import (  # noqa: F401
    absl_flag_names,
    flag_error_message,
    parse_absl_flags,
    reject_positional_arguments,
)
from tapas_tf.cli.help import HELP_FLAGS, exit_with_help_if_asked, print_help, quiet_closed_stdout  # noqa: F401
from tapas_tf.cli.logs import (  # noqa: F401
    LOG_FORMAT,
    LOG_TIME_FORMAT,
    QUIET_TF_LOG_LEVEL,
    TF_LOG_LEVEL_ENV,
    PlainFormatter,
    plain_absl_logging,
    quiet_logs_unless_asked,
    quiet_tensorflow,
    warnings_only_unless_asked,
)
from tapas_tf.cli.verbosity import (  # noqa: F401
    DEBUG_ENV,
    DEBUG_VERBOSITY,
    VERBOSITY_FLAGS,
    debug_requested,
    requested_verbosity,
    verbosity_level,
    verbosity_names_as_numbers,
)
