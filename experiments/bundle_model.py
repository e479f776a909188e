"""Moved: `tapas-tf bundle` (`tapas_tf.commands.bundle`), with the same flags; this runs it.

    python experiments/bundle_model.py --role=conversation --model_dir=DIR ...   # earlier releases' docs
    tapas-tf bundle --role=conversation --model_dir=DIR ...                       # the same
"""

import sys

if __name__ == "__main__":
    from tapas_tf.cli import runner

    sys.exit(runner.run("bundle", sys.argv[1:], prog="bundle_model.py"))
