"""`python -m tapas_tf.sample_data`: the same command line as `tapas-tf sample-data` (`tapas_tf.commands.sample_data`).

An entry point that earlier releases' docs gave; it runs the command through the dispatcher.
"""

import sys

if __name__ == "__main__":
    from tapas_tf.commands import dispatch

    sys.exit(dispatch.run("sample-data", sys.argv[1:], prog="sample_data"))
