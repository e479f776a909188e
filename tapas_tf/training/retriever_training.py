"""Training a retrieval dual encoder on (question, table, hard negative) arrays.

    >>> result = train_retriever(model, config, data, RetrieverTrainConfig(train_steps=1000), "my_retriever/")  # doctest: +SKIP

Each step takes `batch_size` questions. Their gold tables come first in the batch's tables, then
their hard negatives (a question without one lends its slot to a random table of the data), so
each question is scored against 2 x batch_size tables: its own, the other questions' (in-batch
negatives) and every hard negative (`models.losses.in_batch_retrieval_loss`, with copies of a
question's own table masked). Batches are drawn by a seeded shuffle, epoch after epoch.

The optimiser and schedule are the QA trainer's (AdamW, linear warm-up then linear decay,
`trainer.build_optimizer`); gradients are clipped by global norm. Checkpoints go to
MODEL_DIR/checkpoints/ (the dual-encoder directory's layout, `checkpoints.retriever`) every
`save_checkpoints_steps` and at the end; a run started again resumes from the newest one, data
position included (the shuffle is a function of the seed and the step). SIGTERM or SIGINT ends
the run after the current step, with a checkpoint. Loss, learning rate and in-batch accuracy go
to the log and to TensorBoard (MODEL_DIR/train/).
"""

import dataclasses
import logging
import os
import time
import types
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.features.retrieval_features import TABLE_INPUT_FEATURES
from tapas_tf.models.losses import in_batch_retrieval_loss
from tapas_tf.training.stopping import StopSignals
from tapas_tf.training.trainer import build_optimizer

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RetrieverTrainConfig:
    """How a dual encoder trains.

    Args:
      train_steps: steps in all (a resumed run continues to this step).
      batch_size: questions per step (each brings its table and a hard negative).
      learning_rate, warmup_ratio, weight_decay, gradient_clipping: the optimiser's.
      save_checkpoints_steps, keep_checkpoint_max: checkpointing.
      log_steps: steps between log lines and TensorBoard points.
      seed: the shuffle's and the random negatives' seed.
    """

    train_steps: int = 1000
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    gradient_clipping: float = 1.0
    save_checkpoints_steps: int = 250
    keep_checkpoint_max: int = 3
    log_steps: int = 50
    seed: int = 1

    def __post_init__(self):
        for name in ("train_steps", "batch_size", "save_checkpoints_steps", "log_steps", "keep_checkpoint_max"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    @property
    def warmup_steps(self) -> int:
        return int(self.train_steps * self.warmup_ratio)


@dataclasses.dataclass
class RetrieverTrainResult:
    step: int
    checkpoint: Optional[str]
    metrics: Dict[str, float]
    stopped_by: Optional[str] = None


def batch_rows(num_questions: int, batch_size: int, step: int, seed: int) -> np.ndarray:
    """The question rows of `step` (0-based): epoch e = step * batch // n is a permutation seeded by
    (seed, e), so a resumed run draws the batches it would have drawn. <int64>[batch_size]."""
    if batch_size > num_questions:
        raise ValueError(f"batch_size {batch_size} is larger than the {num_questions} training questions")
    per_epoch = num_questions // batch_size
    epoch, position = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(num_questions)
    return order[position * batch_size:(position + 1) * batch_size]


def make_batch(data, rows: np.ndarray, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """The step's features: questions [b, Lq], tables [2b, Lt] (gold then negatives), their ids [2b]."""
    gold = data.gold[rows]
    negative = data.negative[rows].copy()
    missing = negative < 0
    negative[missing] = rng.integers(0, len(data.table_ids), size=int(missing.sum()))
    tables = np.concatenate([gold, negative])
    features = {name: data.tables[name][tables] for name in TABLE_INPUT_FEATURES}
    longest = int(features["input_mask"].sum(axis=1).max())
    features = {name: value[:, :longest] for name, value in features.items()}
    query_length = int(data.question_mask[rows].sum(axis=1).max())
    features["question_input_ids"] = data.question_ids[rows, :query_length]
    features["question_input_mask"] = data.question_mask[rows, :query_length]
    features["table_rows"] = tables.astype(np.int64)
    return features


def train_retriever(model, config, data, train_config: RetrieverTrainConfig, model_dir: str,
                    stop_at: Optional[int] = None) -> RetrieverTrainResult:
    """Trains `model` (a built TableDualEncoder, its start weights loaded) into `model_dir`.

    Args:
      model: the TableDualEncoder, built under `precision.policy_scope` of the precision to train in
        (`choose_precision`: bfloat16 where the CPU has it).
      config: its DualEncoderConfig (the loss's logit_scale).
      data: `retrieval.training_pairs.RetrieverTrainingData` (or any object with its arrays).
      train_config: RetrieverTrainConfig.
      model_dir: where checkpoints/ and train/ go.
      stop_at: stop (with a checkpoint) at this step, before train_steps (the schedule stays
        train_steps'): a run split over sessions.
    """
    schedule_config = types.SimpleNamespace(weight_decay=train_config.weight_decay,
                                            learning_rate=train_config.learning_rate,
                                            train_steps=train_config.train_steps,
                                            warmup_steps=train_config.warmup_steps)
    optimizer, schedule = build_optimizer(schedule_config)
    optimizer._create_all_weights(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = tf.train.CheckpointManager(checkpoint, model_dir_lib.checkpoint_dir(model_dir),
                                         max_to_keep=train_config.keep_checkpoint_max)
    if manager.latest_checkpoint and not manager.latest_checkpoint.endswith("ckpt-0"):
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        log.info("Resumed %s at step %d", manager.latest_checkpoint, int(step.numpy()))
    train_step = _make_step(model, optimizer, schedule, step, config.logit_scale, train_config.gradient_clipping)
    writer = tf.summary.create_file_writer(os.path.join(model_dir, "train"))
    rng = np.random.default_rng([train_config.seed, int(step.numpy())])
    values: Dict[str, float] = {}
    stopped_by = None
    last_time, last_step = time.perf_counter(), int(step.numpy())
    with StopSignals() as stop:
        end = min(train_config.train_steps, stop_at or train_config.train_steps)
        while int(step.numpy()) < end and not stop.requested:
            current = int(step.numpy())
            rows = batch_rows(len(data), train_config.batch_size, current, train_config.seed)
            batch = make_batch(data, rows, rng)
            table_rows = tf.constant(batch.pop("table_rows"))
            outputs = train_step({k: tf.constant(v) for k, v in batch.items()}, table_rows)
            values = {name: float(value) for name, value in outputs.items()}
            done = int(step.numpy())
            if done % train_config.log_steps == 0 or done == train_config.train_steps:
                now = time.perf_counter()
                values["questions_per_second"] = (done - last_step) * train_config.batch_size / (now - last_time)
                last_time, last_step = now, done
                log.info("step %d/%d: %s", done, train_config.train_steps,
                         ", ".join(f"{k} {v:.5g}" for k, v in sorted(values.items())))
                with writer.as_default(step=done):
                    for name, value in values.items():
                        tf.summary.scalar(name, value)
            if done % train_config.save_checkpoints_steps == 0:
                manager.save(checkpoint_number=done)
        stopped_by = stop.requested
    done = int(step.numpy())
    path = manager.save(checkpoint_number=done) if manager.latest_checkpoint != _ckpt(model_dir, done) else \
        manager.latest_checkpoint
    writer.close()
    return RetrieverTrainResult(done, path, values, stopped_by)


def _ckpt(model_dir: str, step: int) -> str:
    return os.path.join(model_dir_lib.checkpoint_dir(model_dir), f"ckpt-{step}")


def _make_step(model, optimizer, schedule, step: tf.Variable, logit_scale: float, clip: float):
    @tf.function(reduce_retracing=True)
    def train_step(features: Dict[str, tf.Tensor], table_rows: tf.Tensor) -> Dict[str, tf.Tensor]:
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            per_question = in_batch_retrieval_loss(outputs["query_embeddings"], outputs["table_embeddings"],
                                                   table_ids=table_rows, logit_scale=logit_scale)
            loss = tf.reduce_mean(per_question)
        gradients = tape.gradient(loss, model.trainable_variables)
        gradients, norm = tf.clip_by_global_norm(gradients, clip)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        step.assign_add(1)
        scores = tf.matmul(outputs["query_embeddings"], outputs["table_embeddings"], transpose_b=True)
        batch = tf.shape(scores)[0]
        # Right when the best-scored table is the question's own, in whichever copy of the batch.
        best = tf.gather(table_rows, tf.argmax(scores, axis=1, output_type=tf.int32))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(best, table_rows[:batch]), tf.float32))
        return {"loss": loss, "gradient_norm": norm, "in_batch_accuracy": accuracy,
                "learning_rate": schedule(step - 1)}

    return train_step
