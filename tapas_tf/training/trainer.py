"""Fine-tuning TapasForQuestionAnswering, or pre-training TapasForMaskedLM: a custom training
loop under tf.distribute.

    strategy = distribution.get_strategy("one_device")
    result = train(model_config, train_config, "/tmp/model", strategy)

One step reads the global batch, splits it over the replicas, and on each replica into
`gradient_accumulation_steps` micro-batches whose gradients are summed. Each replica scales its
loss by 1 / (replicas * micro-batches), so the summed (all-reduced) gradient is the gradient of
the mean loss over the global batch, the same as one device computes. The summed gradient is
clipped by its global norm and applied by AdamW (tf-models-official's AdamWeightDecay, weight
decay skipped for LayerNorm and bias) with linear warm-up and linear decay to 0.

The forward and backward pass of a replica is one `tf.function(jit_compile=use_xla)`; the
all-reduce and the optimiser update run outside XLA. The model directory follows
`tapas_tf.checkpoints.model_dir`: tapas_config.json (written before training), checkpoints/ (model,
optimizer and step; the newest is restored on start), and train/ for TensorBoard.

A run resumed from a checkpoint continues as if it had never stopped: the learning-rate schedule
reads the restored optimizer.iterations, and with a seed (or no shuffling) the data order is the
same sequence of batches in every run, in which a run resumed at step k first skips the batches of
steps 1..k (see `_distributed_dataset`). Without a seed a resumed run reads a new random order.
It resumes from the newest checkpoint that reads completely (`recovery`). SIGTERM or SIGINT ends a
run after its current step with a checkpoint (`stopping`), so a stopped or preempted job loses
nothing; several workers agree on the step through the step's all-reduce, and a lost worker ends
the others with one WorkerLostError line (`distribution`).

The model follows the data (`build_model`): a TrainConfig with max_predictions_per_seq reads
masked-LM examples and trains TapasForMaskedLM on its own loss (model_kind.json says "masked_lm");
otherwise classifier examples train TapasForQuestionAnswering.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import dataclasses  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402
from official.modeling.optimization import optimizer_factory  # noqa: E402
from official.modeling.optimization.configs import optimization_config  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.models import fused  # noqa: E402
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.training import distribution, input_pipeline, precision, recovery  # noqa: E402
from tapas_tf.training.config import TrainConfig, config_differences  # noqa: E402
from tapas_tf.training.fused_choice import choose_fused_kernels  # noqa: E402
from tapas_tf.training.initialization import (  # noqa: E402,F401
    # Where the weights start; initialize_from and the rest stay importable from here.
    INIT_REPORT_FILE,
    TRANSFERABLE_HEADS,
    heads_to_restore,
    initialize_from,
    resolve_checkpoint,
    restore_or_initialize,
    write_init_report,
)
from tapas_tf.training.progress import TrainProgress  # noqa: E402
from tapas_tf.training.stopping import StopSignals  # noqa: E402
from tapas_tf.training.xla_choice import (  # noqa: E402
    MIN_STEPS_TO_MEASURE,
    XlaChoice,
    choose_xla,
    default_use_xla,
    onednn_enabled,
)

# Logged every log_steps, by name: the batch mean of a model output. For question answering the
# three terms are as they enter total_loss (masked as the paper masks them), so they add up to it.
LOSS_TERMS = {"total_loss": "total_loss", "selection_loss": "selection_loss_in_total",
              "aggregation_loss": "aggregation_loss_in_total", "answer_loss": "answer_loss_in_total"}
# Weak supervision also logs where its examples go: the share routed to aggregation (they learn from
# the answer, not the cells), and the share of all examples whose answer loss was over the cutoff
# (they contribute nothing; a model stuck there learns nothing from them).
WEAK_SUPERVISION_TERMS = {**LOSS_TERMS, "aggregate_fraction": "aggregate_mask",
                          "answer_cut_fraction": "answer_loss_cut"}
MASKED_LM_LOSS_TERMS = {"total_loss": "total_loss", "mlm_loss": "mlm_loss"}
TRAIN_DIR = "train"
TRAIN_CONFIG_FILE = "train_config.json"
XLA_CHOICE_FILE = "xla_choice.json"
FUSED_KERNELS_FILE = "fused_kernels.json"
PRECISION_FILE = "precision.json"
# BERT's choice: no weight decay on LayerNorm scales and offsets or on biases (regexes on names).
NO_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

# The step's all-reduced count of replicas whose worker was asked to stop (not a logged value).
STOP_REQUESTS = "stop_requests"

StepCallback = Callable[[int, Dict[str, float]], None]


@dataclasses.dataclass
class TrainResult:
    """The state at the end of `train`: the step reached, the model, the last logged values."""

    step: int
    model: tf_keras.Model  # TapasForQuestionAnswering, or TapasForMaskedLM when pre-training.
    metrics: Dict[str, float]
    # What ended the run before train_steps: "SIGTERM", "SIGINT", or "another worker's stop request".
    stopped_by: Optional[str] = None


def model_kind(config: TrainConfig) -> str:
    """`model_dir_lib.MASKED_LM` when pre-training (masked-LM examples), else QUESTION_ANSWERING."""
    return model_dir_lib.MASKED_LM if config.is_pretraining else model_dir_lib.QUESTION_ANSWERING


def loss_terms(config: TrainConfig, model: Optional[tf_keras.Model] = None) -> Dict[str, str]:
    """{logged name: model output} logged every log_steps; total_loss is the loss minimised."""
    if config.is_pretraining:
        return MASKED_LM_LOSS_TERMS
    model_config = getattr(model, "tapas_config", None)
    return WEAK_SUPERVISION_TERMS if getattr(model_config, "is_weakly_supervised", False) else LOSS_TERMS


def build_model(model_config: TapasConfig, config: TrainConfig) -> tf_keras.Model:
    """The model `config` trains, with its variables created: TapasForMaskedLM when pre-training,
    else TapasForQuestionAnswering (as `model_dir.build_model` builds every model)."""
    return model_dir_lib.build_model(model_config, model_kind(config))


def build_optimizer(config: TrainConfig) -> Tuple[tf_keras.optimizers.legacy.Optimizer, Callable]:
    """AdamW; the learning rate rises linearly from 0 to learning_rate over the warm-up steps, then
    falls linearly to 0 at train_steps.

    Built by tf-models-official's OptimizerFactory. Its own clipping is off: `train` clips the
    all-reduced gradient, which AdamWeightDecay cannot see when gradients are aggregated first.

    Returns:
      (optimizer, learning rate schedule: step -> <float32>[]).
    """
    params = {
        "optimizer": {
            "type": "adamw",
            "adamw": {
                "weight_decay_rate": config.weight_decay,
                "exclude_from_weight_decay": list(NO_WEIGHT_DECAY),
                "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-6,
                "gradient_clip_norm": 0.0,
            },
        },
        # The decay starts where the warm-up ends, so the rate peaks at learning_rate.
        "learning_rate": {
            "type": "polynomial",
            "polynomial": {"initial_learning_rate": config.learning_rate,
                           "decay_steps": max(config.train_steps - config.warmup_steps, 1),
                           "offset": config.warmup_steps, "end_learning_rate": 0.0, "power": 1.0},
        },
    }
    if config.warmup_steps > 0:
        params["warmup"] = {"type": "linear", "linear": {"warmup_steps": config.warmup_steps,
                                                         "warmup_learning_rate": 0.0}}
    factory = optimizer_factory.OptimizerFactory(optimization_config.OptimizationConfig(params))
    schedule = factory.build_learning_rate()
    return factory.build_optimizer(schedule), schedule


def prepare_model_dir(model_dir: str, config: TapasConfig, write: bool = True,
                      kind: str = model_dir_lib.QUESTION_ANSWERING) -> None:
    """Writes tapas_config.json and model_kind.json, or checks that a run being resumed had the
    same model config and kind.

    Raises:
      ValueError: model_dir holds a different tapas_config.json (the message lists the fields)
        or another model kind, or checkpoints without a config.
    """
    if tf.io.gfile.exists(model_dir_lib.config_path(model_dir)):
        old_kind = model_dir_lib.load_model_kind(model_dir)
        if old_kind != kind:
            raise ValueError(f"{model_dir} holds a {old_kind} model, and this run trains a {kind} model; "
                             "use a new --model_dir (and --init_checkpoint to start from that one).")
        differences = config_differences(model_dir_lib.load_config(model_dir), config)
        if differences:
            listed = "; ".join(f"{name}: {old!r} there, {new!r} now" for name, (old, new) in differences.items())
            raise ValueError(
                f"{model_dir} was trained with another model config ({listed}). "
                "Resume with the same options or use a new --model_dir.")
        return
    if model_dir_lib.latest_checkpoint(model_dir):
        raise ValueError(f"{model_dir} has checkpoints but no {model_dir_lib.CONFIG_FILE}; use a new --model_dir.")
    if write:
        model_dir_lib.save_config(model_dir, config)
        model_dir_lib.save_model_kind(model_dir, kind)


def train(
    model_config: TapasConfig,
    train_config: TrainConfig,
    model_dir: str,
    strategy: Optional[tf.distribute.Strategy] = None,
    on_step_end: Optional[StepCallback] = None,
) -> TrainResult:
    """Trains (or resumes training) until train_config.train_steps, or until SIGTERM or SIGINT.

    A first SIGTERM or SIGINT (`tapas_tf.training.stopping`) ends the run after the step it
    arrives in: a checkpoint is saved at the step reached and the result says `stopped_by`. With
    several workers, the one asked tells the others through the next step's all-reduce and all of
    them stop after that step. A second signal stops at once, without a checkpoint.

    Args:
      model_config: the model; must equal the config already in model_dir when resuming.
      train_config: data, schedule, checkpointing and logging.
      model_dir: where tapas_config.json, checkpoints/ and train/ (TensorBoard) go. Several
        workers share it: only the chief writes there.
      strategy: a tf.distribute strategy (see `tapas_tf.training.distribution`); default the current one.
      on_step_end: called as `on_step_end(step, values)` after every step (and its checkpoint),
        with the step's loss terms, learning_rate and gradient_norm as floats.

    Returns:
      TrainResult with the step reached and the trained model.

    Raises:
      ValueError: bad data (see `input_pipeline.check_examples`; a train file found truncated
        during training raises DamagedDataError naming it), a batch that does not split evenly over
        replicas and micro-batches, a model config that differs from model_dir's, checkpoints of
        which none reads completely (CorruptCheckpointError; see `recovery.restore_newest`), or
        workers that restored different steps.
      WorkerLostError: another worker stopped answering (a ConnectionError).
    """
    with StopSignals() as stop:
        return _train(model_config, train_config, model_dir, strategy or tf.distribute.get_strategy(),
                      on_step_end, stop)


def _train(model_config: TapasConfig, train_config: TrainConfig, model_dir: str,
           strategy: tf.distribute.Strategy, on_step_end: Optional[StepCallback],
           stop: StopSignals) -> TrainResult:
    """`train`, with the stop signals handled."""
    replica_batch = _replica_batch_size(train_config, strategy.num_replicas_in_sync)
    input_pipeline.check_examples(train_config.train_file, train_config.max_seq_length,
                                  train_config.max_predictions_per_seq)
    chief = distribution.is_chief(strategy)
    prepare_model_dir(model_dir, model_config, write=chief, kind=model_kind(train_config))
    if train_config.seed is not None:
        tf_keras.utils.set_random_seed(train_config.seed)

    train_config = _resolve_precision(train_config, strategy, model_dir if chief else None)
    with strategy.scope(), precision.policy_scope(train_config.precision):
        model = build_model(model_config, train_config)
        optimizer, schedule = build_optimizer(train_config)
        # Slots and the iteration counter exist before the step is traced (else tf.function traces
        # twice: variables made on the first trace) and before restoring (so the checkpoint's
        # values land at once). Keras's legacy optimisers offer no public call for this.
        optimizer._create_all_weights(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step",
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    restore_or_initialize(checkpoint, model, model_dir, train_config)
    start = int(step.numpy())
    distribution.check_same_start(strategy, start)
    if start >= train_config.train_steps:
        logging.info("%s is at step %d; train_steps is %d: nothing to do.", model_dir, start, train_config.train_steps)
        return TrainResult(start, model, {})

    train_config = _resolve_xla(train_config, model, strategy, replica_batch, start, model_dir if chief else None)
    train_config = _resolve_fused_kernels(train_config, model_config, strategy, replica_batch,
                                          model_dir if chief else None)
    # The other workers save too, where nobody reads: with several workers, saving may take part in
    # collectives (TensorFlow's multi-worker guide), and a worker that skipped it would hang them.
    save_dir = model_dir_lib.checkpoint_dir(model_dir) if chief else tempfile.mkdtemp(prefix="tapas_worker_")
    if chief:
        recovery.remove_partial_saves(save_dir)
    manager = tf.train.CheckpointManager(checkpoint, save_dir, max_to_keep=train_config.keep_checkpoint_max)
    if chief:
        _write_train_config(model_dir, train_config)
    iterator = iter(_distributed_dataset(strategy, train_config, replica_batch, start))
    train_step = _make_train_step(model, optimizer, schedule, step, strategy, train_config)
    loop = TrainProgress(train_config, start, chief, os.path.join(model_dir, TRAIN_DIR))
    try:
        with fused.enabled_scope(train_config.fused_kernels):  # The step is traced on its first call.
            stopped_by = _train_loop(train_step, iterator, loop, manager, strategy, train_config, model_dir,
                                     on_step_end, stop)
    finally:
        loop.close()
        if not chief:
            shutil.rmtree(save_dir, ignore_errors=True)
    return TrainResult(loop.step, model, loop.last_logged, stopped_by)


def _train_loop(train_step: Callable, iterator, loop: TrainProgress, manager: tf.train.CheckpointManager,
                strategy: tf.distribute.Strategy, config: TrainConfig, model_dir: str,
                on_step_end: Optional[StepCallback], stop: StopSignals) -> Optional[str]:
    """Runs steps until config.train_steps or a stop request, saving checkpoints; returns what
    stopped the run early (a signal's name, or "another worker's stop request"), else None."""
    multi_worker = distribution.is_multi_worker(strategy)
    saved_step, stop_agreed = loop.step, False
    # One worker alone stops between steps; several stop after the step whose all-reduce told them.
    while loop.step < config.train_steps and not stop_agreed and not (stop.requested and not multi_worker):
        try:
            values = {name: float(value) for name, value in
                      train_step(iterator, tf.constant(1.0 if stop.requested else 0.0)).items()}
        except tf.errors.DataLossError as e:  # A train file cut short or damaged after its first record.
            raise input_pipeline.damaged_file_error(config.train_file, e) from e
        except distribution.lost_worker_errors() as e:
            if not multi_worker:
                raise
            named = model_dir_lib.named_checkpoints(model_dir_lib.checkpoint_dir(model_dir))
            resume_from = named[0] if named else None
            raise distribution.worker_lost_error(e, loop.step + 1, strategy, resume_from) from e
        stop_agreed = values.pop(STOP_REQUESTS) > 0  # The same sum on every worker.
        if not math.isfinite(values["total_loss"]):
            # Stop before a checkpoint saves weights the update may have made non-finite.
            raise FloatingPointError(
                f"Step {loop.step + 1}: the loss is {values['total_loss']}; try a lower --learning_rate "
                "or --gradient_clipping. The last good checkpoint is kept.")
        loop.after_step(values)
        if loop.step % config.save_checkpoints_steps == 0 or loop.step == config.train_steps:
            manager.save(checkpoint_number=loop.step)
            saved_step = loop.step
        if on_step_end is not None:
            on_step_end(loop.step, values)
    if loop.step >= config.train_steps or not (stop.requested or stop_agreed):
        return None
    if saved_step < loop.step:
        manager.save(checkpoint_number=loop.step)
    stopped_by = stop.requested or "another worker's stop request"
    if not loop.step:
        saved = "before its first step: nothing to save"
    else:
        where = f" in {manager.latest_checkpoint}" if distribution.is_chief(strategy) else ""
        saved = "with a checkpoint" + where
    logging.warning("Stopped at step %d of %d (%s) %s; run the same command to resume.", loop.step,
                    config.train_steps, stopped_by, saved)
    return stopped_by


def _replica_batch_size(config: TrainConfig, num_replicas: int) -> int:
    """Examples per replica per step; raises ValueError when the batch does not split evenly."""
    parts = num_replicas * config.gradient_accumulation_steps
    if config.train_batch_size % parts:
        raise ValueError(
            f"train_batch_size ({config.train_batch_size}) must be divisible by replicas ({num_replicas}) "
            f"x gradient_accumulation_steps ({config.gradient_accumulation_steps}).")
    return config.train_batch_size // num_replicas


def _resolve_xla(config: TrainConfig, model: tf_keras.Model, strategy: tf.distribute.Strategy,
                 replica_batch: int, start: int, model_dir: Optional[str]) -> TrainConfig:
    """`config` with `use_xla` decided (see `tapas_tf.training.xla_choice`), written to
    MODEL_DIR/train/xla_choice.json (when `model_dir` is given) and logged."""
    if config.use_xla is not None:
        choice = XlaChoice(config.use_xla, f"--use_xla={str(config.use_xla).lower()}")
    elif distribution.uses_tpu(strategy):
        choice = XlaChoice(False, "TPU: its programs are XLA already")
    elif default_use_xla():
        choice = XlaChoice(True, "GPU: XLA")
    elif strategy.num_replicas_in_sync > 1:
        choice = XlaChoice(False, "several replicas: not measured; plain TensorFlow")
    elif onednn_enabled():
        # Measuring compiles the whole step with XLA at the longest length: for MiniLM at batch
        # 16 that held over 15 GB (docs/RESULTS.md), to find a path within 10% of oneDNN's.
        choice = XlaChoice(False, "CPU with oneDNN kernels: not measured (XLA is within 10% of them and its "
                                  "compile holds gigabytes); plain TensorFlow (--use_xla to force)")
    elif config.train_steps - start < MIN_STEPS_TO_MEASURE:
        choice = XlaChoice(False, f"{config.train_steps - start} steps to run (< {MIN_STEPS_TO_MEASURE}): "
                                  "not worth measuring; plain TensorFlow")
    else:
        batch = next(iter(input_pipeline.make_dataset(
            config.train_file, config.max_seq_length, replica_batch, training=True, shuffle_buffer=0,
            max_predictions_per_seq=config.max_predictions_per_seq)))
        num_micro = config.gradient_accumulation_steps
        choice = choose_xla(_gradient_function(model, num_micro, 1.0 / num_micro, loss_terms(config, model)),
                            batch)
    logging.info("XLA %s: %s", "on" if choice.use_xla else "off", choice.reason)
    if model_dir is not None:
        _write_run_record(model_dir, XLA_CHOICE_FILE, choice.to_dict())
    return dataclasses.replace(config, use_xla=choice.use_xla)


def _resolve_fused_kernels(config: TrainConfig, model_config: TapasConfig, strategy: tf.distribute.Strategy,
                           replica_batch: int, model_dir: Optional[str]) -> TrainConfig:
    """`config` with `fused_kernels` decided (see `tapas_tf.training.fused_choice`), written to
    MODEL_DIR/train/fused_kernels.json (when `model_dir` is given) and logged."""
    choice = choose_fused_kernels(config.fused_kernels, replica_batch, config.max_seq_length,
                                  model_config.hidden_size, bool(config.use_xla), distribution.uses_tpu(strategy))
    logging.info("Fused kernels %s: %s", "on" if choice.enabled else "off", choice.reason)
    if model_dir is not None:
        _write_run_record(model_dir, FUSED_KERNELS_FILE, choice.to_dict())
    return dataclasses.replace(config, fused_kernels=choice.enabled)


def _resolve_precision(config: TrainConfig, strategy: tf.distribute.Strategy,
                       model_dir: Optional[str]) -> TrainConfig:
    """`config` with `precision` decided (see `tapas_tf.training.precision`), written to
    MODEL_DIR/train/precision.json (when `model_dir` is given) and logged."""
    choice = precision.choose_precision(config.precision, uses_tpu=distribution.uses_tpu(strategy))
    precision.log_choice(choice)
    if model_dir is not None:
        _write_run_record(model_dir, PRECISION_FILE, choice.to_dict())
    return dataclasses.replace(config, precision=choice.precision)


def _write_train_config(model_dir: str, config: TrainConfig) -> None:
    """Keeps the options of this run beside its TensorBoard events (overwritten on resume)."""
    _write_run_record(model_dir, TRAIN_CONFIG_FILE, config.to_dict())


def _write_run_record(model_dir: str, file_name: str, values: Mapping[str, object]) -> None:
    """MODEL_DIR/train/FILE_NAME (sorted, indented JSON), overwritten: `model_dir.write_record`."""
    model_dir_lib.write_record(model_dir, os.path.join(TRAIN_DIR, file_name), values)


def _distributed_dataset(strategy: tf.distribute.Strategy, config: TrainConfig, replica_batch: int,
                         start_step: int):
    """Each input pipeline (worker) reads batches of `replica_batch` examples for its replicas.

    With config.seed set (or shuffle_buffer <= 1) every run reads the same sequence of batches
    (`input_pipeline.make_dataset`; `train` sets TensorFlow's global seed to the same seed), and a
    run resumed at `start_step` k skips the batches of its first k steps: every step takes one batch
    for each replica a pipeline feeds, so each pipeline skips k * (its replicas) batches, and step
    k + 1 reads the batch an uninterrupted run reads there. Skipping reads through those batches.
    Without a seed each run (a resumed one too) shuffles afresh, and nothing is skipped.
    """
    replayable = config.seed is not None or config.shuffle_buffer <= 1
    if start_step and not replayable:
        logging.info("Resuming at step %d without a seed: the data are shuffled afresh, not in the order "
                     "the run would have read them (set a seed to make resumed runs replay it).", start_step)

    # TPU programs want one shape; elsewhere each bucket length is one shape of the traced step.
    buckets = () if distribution.uses_tpu(strategy) else config.bucket_lengths

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        skip = 0
        if start_step and replayable:
            # A step takes one batch for each replica this pipeline feeds.
            skip = start_step * max(context.num_replicas_in_sync // context.num_input_pipelines, 1)
            if context.input_pipeline_id == 0:  # Every pipeline skips as many.
                logging.info("Resuming at step %d: each input pipeline skips its first %d batches (%d "
                             "examples) to continue the data order of the run.", start_step, skip,
                             skip * replica_batch)
        return input_pipeline.make_dataset(
            config.train_file, config.max_seq_length, replica_batch, training=True,
            shuffle_buffer=config.shuffle_buffer, seed=config.seed, input_context=context,
            max_predictions_per_seq=config.max_predictions_per_seq, bucket_lengths=buckets,
            skip_batches=skip)

    return strategy.distribute_datasets_from_function(dataset_fn)


def dense_gradients(gradients: Sequence[Optional[Union[tf.Tensor, tf.IndexedSlices]]]) -> List:
    """The gradients with each `tf.IndexedSlices` (an embedding table's: one row per token of the
    batch, repeats included) summed into its dense tensor.

    Adam's update of a sparse gradient still decays every row of its two moments, but through a
    de-duplicating segment sum, scatter-adds and six passes over the table's moments and weights; one
    summation into the dense gradient and Adam's fused kernel (one pass) compute the same update
    faster (a mini bfloat16 step at 256 tokens: 97 ms of optimiser ops before, 42 ms after plus 33 ms
    of segment sums summing the embedding tables' gradients; its word table has 7.8M weights). The global
    norm of the dense gradient is the true one: a sparse gradient's repeated rows would count
    apart."""
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]


def _make_train_step(model: tf_keras.Model, optimizer, schedule: Callable, step: tf.Variable,
                     strategy: tf.distribute.Strategy, config: TrainConfig) -> Callable:
    """tf.function(iterator, stop_request) -> {name: <float32>[]} that runs one optimiser step on the
    next batch.

    stop_request is <float32>[]: 1 when this worker was asked to stop, else 0. The result's
    STOP_REQUESTS is its sum over the replicas of every worker, all-reduced with the loss terms, so
    that every worker learns in the same step whether any was asked."""
    num_micro = config.gradient_accumulation_steps
    compute = _gradient_function(model, num_micro, 1.0 / (strategy.num_replicas_in_sync * num_micro),
                                 loss_terms(config, model))
    if config.use_xla and not distribution.uses_tpu(strategy):  # TPU programs are XLA already.
        compute = tf.function(compute, jit_compile=True, autograph=False)
    variables = model.trainable_variables
    clip = config.gradient_clipping

    def replica_step(features: Dict[str, tf.Tensor], stop_request: tf.Tensor) -> Dict[str, tf.Tensor]:
        grads, values = compute(features)
        # A tensor made on this replica's device: the all-reduce has no device for the argument itself.
        values[STOP_REQUESTS] = tf.identity(stop_request)
        used = [(g, v) for g, v in zip(grads, variables) if g is not None]  # e.g. no pooler without agg.
        context = tf.distribute.get_replica_context()
        grads = dense_gradients(context.all_reduce(tf.distribute.ReduceOp.SUM, [g for g, _ in used]))
        values = context.all_reduce(tf.distribute.ReduceOp.SUM, values)
        values["gradient_norm"] = tf.linalg.global_norm(grads)
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip, use_norm=values["gradient_norm"])
        values["learning_rate"] = schedule(optimizer.iterations)  # The rate of this update.
        optimizer.apply_gradients(zip(grads, [v for _, v in used]), experimental_aggregate_gradients=False)
        return values

    # No autograph: the model branches on its config in Python, and converting every layer's
    # code would take longer than tracing it. Traced once: with length buckets the iterator's
    # spec has a None sequence dimension (XLA, if on, compiles once per bucket length).
    @tf.function(autograph=False)
    def train_step(iterator, stop_request: tf.Tensor) -> Dict[str, tf.Tensor]:
        values = strategy.run(replica_step, args=(next(iterator), stop_request))
        step.assign_add(1)
        # Every replica holds the same all-reduced values.
        return {name: strategy.experimental_local_results(value)[0] for name, value in values.items()}

    return train_step


def _gradient_function(model: tf_keras.Model, num_micro: int, loss_scale: float,
                       terms: Mapping[str, str] = LOSS_TERMS) -> Callable:
    """features -> (gradients, {loss term: <float32>[]}) of one replica's share of the batch.

    Features are <dtype>[replica_batch, ...]; they are split into `num_micro` micro-batches whose
    scaled gradients are summed in a sequential while loop (so only one is in memory at a time).
    Gradients are None for variables the loss does not use.
    """
    variables = model.trainable_variables

    def micro_step(features: Dict[str, tf.Tensor]) -> Tuple[List[Optional[tf.Tensor]], Dict[str, tf.Tensor]]:
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = outputs["total_loss"] * loss_scale
        grads = [None if g is None else tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        values = {name: tf.reduce_mean(outputs[key]) * loss_scale for name, key in terms.items()}
        return grads, values

    def compute(features: Dict[str, tf.Tensor]):
        if num_micro == 1:
            return micro_step(features)
        # tf.shape: with length buckets the sequence dimension is not static.
        parts = {name: tf.reshape(value, tf.concat([[num_micro, -1], tf.shape(value)[1:]], axis=0))
                 for name, value in features.items()}
        grads, values = micro_step({name: value[0] for name, value in parts.items()})
        used = [i for i, g in enumerate(grads) if g is not None]

        def body(i, sums, value_sums):
            more_grads, more_values = micro_step({name: value[i] for name, value in parts.items()})
            sums = [s + more_grads[j] for s, j in zip(sums, used)]
            return i + 1, sums, {name: value_sums[name] + more_values[name] for name in value_sums}

        _, sums, values = tf.while_loop(lambda i, *_: i < num_micro, body,
                                        (tf.constant(1), [grads[j] for j in used], values),
                                        parallel_iterations=1)
        summed = dict(zip(used, sums))
        return [summed.get(i) for i in range(len(variables))], values

    return compute
