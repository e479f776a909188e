"""The model shipped inside the package: a tiny TAPAS fine-tuned on SQA, weights in float16.

    from tapas_tf.checkpoints.bundled import bundled_model_dir
    TableQA.from_model_dir(bundled_model_dir())      # what TableQA.from_model_dir() does

It is a compact model directory (`tapas_tf.checkpoints.compact`); its `compact.json` gives the
commands that trained it and its SQA dev scores, and `docs/RESULTS.md` the whole experiment.
It is small (L2/H128) and answers the kind of questions SQA asks (which rows, which cells); for
aggregation questions, import a released WTQ checkpoint (`tapas_tf.import_checkpoint`).
"""

import os

BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled", "sqa_tiny")


def bundled_model_dir() -> str:
    """The directory of the bundled model; FileNotFoundError if this installation lacks it."""
    from tapas_tf.checkpoints import model_dir

    if not model_dir.has_compact_weights(BUNDLED_DIR):
        raise FileNotFoundError(f"no bundled model in {BUNDLED_DIR} (an installation without package data?); "
                                "pass a model directory instead")
    return BUNDLED_DIR
