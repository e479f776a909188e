"""`python -m tapas_tf.init_from_bert`: the same command line as `tapas-tf init-from-bert` (`tapas_tf.commands.init_from_bert`).

An entry point that earlier releases' docs gave; it runs the command through the dispatcher.
"""

import sys

if __name__ == "__main__":
    from tapas_tf.commands import dispatch

    sys.exit(dispatch.run("init-from-bert", sys.argv[1:], prog="init_from_bert"))
