"""Stage 4b, batch prediction: from model outputs to answers, and how good they are.

Holds decoding of per-token probabilities into selected cells and an operator
(`decoding`), the one executor of SUM / AVERAGE / COUNT over selected cells
(`execution`), prediction files, sequential prediction over a converted split
(`sequential`, where each SQA question sees the previous answer) and the
metrics. The ask API (`tapas_tf.qa`) and serving (`tapas_tf.serving`) build on it.

May import: `tapas_tf.data`, `tapas_tf.features`, `tapas_tf.models`,
`tapas_tf.checkpoints` and `tapas_tf.task_registry.presets`.
"""
