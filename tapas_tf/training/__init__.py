"""Stage 4a, training: the loop that fits a model from classifier TFRecords.

Holds the training loop (`trainer`: AdamW from tf-models-official, warm-up and
decay, clipping, accumulation, checkpoints, resume, TensorBoard), its config
(`config`: TrainConfig and the model config of a task), progress reporting,
the tf.data input pipeline, the choice of tf.distribute strategy and the
multi-worker checks (`distribution`), where weights start (`initialization`),
resuming past damaged checkpoints (`recovery`) and stopping on SIGTERM or SIGINT
with a checkpoint (`stopping`).

May import: `tapas_tf.features`, `tapas_tf.models`, `tapas_tf.checkpoints` (the
model directory it writes) and `tapas_tf.task_registry.presets`.
"""
