"""The ask API: questions about one table (a pandas DataFrame or a CSV file), answered by a model.

`table_qa.TableQA` loads a model directory (or the bundled model) and answers questions, alone or
as a conversation where each question sees the previous answer. Below it: reading and checking
tables (`tables`), encoding a table once and each question at a short bucket length
(`ask_encoding`), pruning tables too big for the model (`pruning`), results and their renderings
(`ask_results`, `rendering`, `console`), the note for a question that needs an operator the model
lacks (`question_hints`), and the two model runners: TensorFlow (`tf_runner`) and LiteRT
(`lite_model`, no TensorFlow import).

May import: `tapas_tf.data`, `tapas_tf.features`, `tapas_tf.models`, `tapas_tf.checkpoints`,
`tapas_tf.task_registry.presets` and `tapas_tf.inference` (decoding and the one executor of answers).
"""
