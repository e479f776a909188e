"""tapas-tf: TAPAS table question answering in TensorFlow 2 / Keras."""

__version__ = "0.1.0"
