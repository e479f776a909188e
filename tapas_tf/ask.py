"""`python -m tapas_tf.ask`: the same command line as `tapas-tf ask` (`tapas_tf.commands.ask`)."""

import sys

if __name__ == "__main__":
    from tapas_tf.commands import dispatch

    sys.exit(dispatch.run("ask", sys.argv[1:], prog="ask"))
