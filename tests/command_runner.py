"""Runs a `tapas-tf` subcommand in a fresh process, as a user would type it."""

import subprocess
import sys

# `python -m tapas_tf.commands.dispatch` is the installed `tapas-tf` console script's code.
TAPAS_TF = [sys.executable, "-m", "tapas_tf.commands.dispatch"]


def run_command(*args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """`tapas-tf ARGS...` with its stdout and stderr captured as text."""
    return subprocess.run([*TAPAS_TF, *args], capture_output=True, text=True, timeout=timeout, **kwargs)
