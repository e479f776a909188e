"""`python -m tapas_tf.serve`: the same command line as `tapas-tf serve` (`tapas_tf.commands.serve`)."""

import sys

if __name__ == "__main__":
    from tapas_tf.commands import dispatch

    sys.exit(dispatch.run("serve", sys.argv[1:], prog="serve"))
