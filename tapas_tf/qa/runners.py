"""The runner of a model directory, for `TableQA` and `TableFactChecker` alike.

    runner, config = load_runner(model_dir, checkpoint=None, backend="auto", jit_compile=False,
                                 precision="float32")
    outputs = runner(128, rows)      # MODEL_OUTPUTS for rows of MODEL_INPUT_FEATURES, each <int32>[128]

"auto" takes the directory's LiteRT copy (`lite_model.LiteRunner`) when it is current and no
TensorFlow-only option is asked for, else TensorFlow (`tf_runner.TensorFlowRunner`, imported only
then, so that a LiteRT process never loads TensorFlow).
"""

import logging
from typing import Optional

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.qa import lite_model

logger = logging.getLogger(__name__)  # Quiet in the Python API (tapas_tf's NullHandler).


def load_runner(model_dir: str, checkpoint: Optional[str], backend: str, jit_compile: bool, precision: str):
    """(the runner `backend` picks for `model_dir`, the model's config): the directory's LiteRT copy
    when `backend` allows it and the copy is current, else TensorFlow (imported only then)."""
    model_dir_lib.require_config(model_dir)  # Before TensorFlow loads, if it will.
    tensorflow_only = [option for option, asked in (("jit_compile", jit_compile),
                                                    (f"precision={precision}", precision != "float32")) if asked]
    if backend == "lite" and tensorflow_only:
        raise ValueError(f"{' and '.join(tensorflow_only)} need the TensorFlow backend, not LiteRT")
    if backend != "tensorflow" and not tensorflow_only:
        try:
            lite = lite_model.read_current_lite_model(model_dir, checkpoint)
            return lite_model.LiteRunner(lite), lite.model_config
        except lite_model.LiteModelError as e:
            if backend == "lite":
                raise
            if e.present:
                logger.warning("%s; answering with TensorFlow", e)
    from tapas_tf.qa.tf_runner import TensorFlowRunner  # pylint: disable=import-outside-toplevel

    config = model_dir_lib.load_config(model_dir)
    return TensorFlowRunner.from_model_dir(model_dir, checkpoint, config, jit_compile=jit_compile,
                                           precision=precision), config
