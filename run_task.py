"""The task command line of a checkout: create data, train, predict and evaluate TAPAS on a task.

    python run_task.py --task=SQA --mode=create_data --input_dir=DIR --output_dir=DIR
    python run_task.py --help

A shim: the command line is `tapas_tf.commands.run_task`, installed with the package, where the
installed command runs each mode as a subcommand (`tapas-tf create-data --task=SQA ...`,
`tapas-tf train ...`; `tapas-tf --help`).
"""

import sys

from tapas_tf import cli

if __name__ == "__main__":
    cli.quiet_tensorflow()  # First: TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when it loads.
    from tapas_tf.commands import run_task

    run_task.run(sys.argv)
