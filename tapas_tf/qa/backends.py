"""What runs `TableQA`'s model: the backends, and the precisions of the TensorFlow backend.

    TableQA.from_model_dir(model_dir, backend="tensorflow", precision="bfloat16")

Apart from `table_qa` so that a runner (`tf_runner`) checks its options against the same names
without importing `table_qa`, which imports the runner; free of TensorFlow, as `table_qa` is.
"""

# "auto": LiteRT when the model directory has a current copy, else TensorFlow (`table_qa`).
BACKENDS = ("auto", "lite", "tensorflow")
# "bfloat16": TensorFlow's oneDNN rewrite of the graph's matrix products (`tf_runner`).
PRECISIONS = ("float32", "bfloat16")
