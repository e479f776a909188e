"""`python -m tapas_tf.import_checkpoint`: the same command line as `tapas-tf import` (`tapas_tf.commands.import_checkpoint`).

An entry point that earlier releases' docs gave; it runs the command through the dispatcher.
"""

import sys

if __name__ == "__main__":
    from tapas_tf.commands import dispatch

    sys.exit(dispatch.run("import", sys.argv[1:], prog="import_checkpoint"))
