"""Replaced by `tapas-tf collect-tables` (`tapas_tf.commands.collect_tables`).

This script also left out the tables of SQA's and WTQ's dev sets, read from the releases; the
command leaves out exactly what it is given (`--exclude_interactions`, `--exclude_tables`), so the
same command line would not mean the same. Running this prints one line naming the command and
exits 2.
"""

import sys

if __name__ == "__main__":
    print("synthetic_tables.py: error: replaced by `tapas-tf collect-tables --interactions=FILE "
          "--exclude_interactions=DEV_FILE --output=OUT` (tapas-tf collect-tables --help); it leaves out only "
          "the tables you name", file=sys.stderr)
    sys.exit(2)
