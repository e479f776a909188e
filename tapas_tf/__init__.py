"""tapas-tf: TAPAS table question answering in TensorFlow 2 / Keras."""

__version__ = "0.1.0"


def load_model(model_dir: str, checkpoint: str = None):
    """The Keras QA model of a model directory; see `tapas_tf.model_dir.load_model`."""
    from tapas_tf.model_dir import load_model as _load_model

    return _load_model(model_dir, checkpoint)
