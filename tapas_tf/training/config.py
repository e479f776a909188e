"""What a training run does: `TrainConfig`, and the model config of a task.

Precedence, lowest first: the size preset or `--model_config` file (the encoder), then the task's
preset (`tapas_tf.task_registry.presets.PRESETS`, the paper's hyper-parameters), then explicit overrides (flags).

    model_config = model_config_for_task(Task.SQA, TapasConfig.from_preset("tiny"), temperature=0.5)
    train_config = train_config_for_task(Task.SQA, "OUT/tf_examples/train.tfrecord", train_steps=1000)
"""

import dataclasses
import json
import os
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

from tapas_tf.checkpoints.model_dir import CONFIG_FILE
from tapas_tf.config_fields import option
from tapas_tf.models.config import TapasConfig
from tapas_tf.task_registry.presets import Task, TaskPreset, preset_of, task_label

# TaskPreset fields that are model (TapasConfig) options; the rest of a preset is training.
MODEL_PRESET_FIELDS = (
    "temperature",
    "answer_loss_cutoff",
    "huber_loss_delta",
    "cell_selection_preference",
    "select_one_column",
    "init_cell_selection_weights_to_zero",
    "num_aggregation_labels",
    "use_answer_as_supervision",
    "num_classification_labels",
    "disable_per_token_loss",
)
TRAIN_PRESET_FIELDS = ("train_steps", "learning_rate", "warmup_ratio", "train_batch_size", "gradient_clipping",
                       "max_seq_length", "reset_cell_selection_weights")
# Masked positions per pre-training example, as the pre-training data job writes them by default.
DEFAULT_MAX_PREDICTIONS_PER_SEQ = 20
# Length buckets of training batches, every 64 tokens: SQA's training examples have 247 real tokens
# on average and are padded to 278 on average in these buckets (307 in buckets every 128, 512 with
# none); mini trained 1.11-1.12x faster than with buckets every 128 (docs in input_pipeline.make_dataset).
DEFAULT_BUCKET_LENGTHS = tuple(range(64, 513, 64))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Every option of a training run that is not a model option.

    Attributes:
      train_file: path or glob of the training TFRecords.
      train_steps: optimiser steps to reach; a resumed run stops there too.
      train_batch_size: examples per optimiser step, over all replicas and micro-batches.
      learning_rate: peak learning rate, reached after the warm-up.
      warmup_ratio: share of train_steps of linear warm-up from 0; then linear decay to 0.
      max_seq_length: tokens per example; the data must have exactly this many.
      weight_decay: AdamW's decoupled weight decay, not applied to LayerNorm and bias variables.
      gradient_clipping: clip the global gradient norm to this; None (or 0) does not clip.
      gradient_accumulation_steps: micro-batches per step; each replica's share of the batch is
        split into this many parts whose gradients are summed (same result, less memory).
      use_xla: compile the forward and backward pass with XLA (`jit_compile=True`); None
        chooses at start-up (`tapas_tf.training.xla_choice`).
      fused_kernels: layer norms, GELU and the transformer's sublayer ends as fused XLA kernels in
        training (`models/fused.py`); None chooses at start-up from a layer's size
        (`tapas_tf.training.fused_choice`).
      precision: "float32" or "bfloat16" (Keras mixed_bfloat16: the encoder computes in bfloat16,
        variables and heads stay float32); None chooses at start-up from the machine
        (`tapas_tf.training.precision`).
      save_checkpoints_steps: checkpoint every this many steps (and at the last step).
      keep_checkpoint_max: checkpoints kept; older ones are deleted.
      log_steps: TensorBoard scalars and a log line every this many steps.
      shuffle_buffer: examples in the shuffle buffer; <= 1 reads in file order.
      seed: seeds the initialisation, dropout and the shuffle; None for a random run. With a seed
        the data order is fixed, and a resumed run reads the batches the uninterrupted run would.
      init_checkpoint: tapas-tf model directory or checkpoint prefix to initialise the encoder
        from when model_dir has no checkpoint yet.
      init_heads: also restore the heads that `init_checkpoint` has (transfer from a model
        fine-tuned on another task: its aggregation and cell-selection heads).
      reset_cell_selection_weights: with init_heads, the cell-selection head (token and column
        weights) starts fresh all the same.
      show_progress: draw a progress bar on stdout.
      max_predictions_per_seq: pre-training: the data are masked-LM examples with this many
        masked_lm_* values, and the model is TapasForMaskedLM. None (the default): classifier
        examples and TapasForQuestionAnswering.
      bucket_lengths: group training batches by real length and pad each only to the smallest of
        these lengths (or max_seq_length) that holds its examples; the loss of each example is
        unchanged. Empty: every batch has max_seq_length tokens. Not used on TPUs, which want one
        shape.
    """

    # A field with a "help" in its metadata is a flag of `tapas-tf train` (`task_flags` defines one
    # per field, from its type and help; see `FLAG_FIELDS`): a new option is a field here, and its
    # effect in the trainer. The preset's fields (TRAIN_PRESET_FIELDS) default to the task's.
    train_file: str
    train_steps: int = option(None, "Optimiser steps.")
    train_batch_size: int = option(None, "Examples per optimiser step, over all replicas.")
    learning_rate: float = option(None, "Peak learning rate.")
    warmup_ratio: float = option(None, "Share of train_steps of linear warm-up; then linear decay to 0.")
    max_seq_length: int = 512
    weight_decay: float = option(0.01, "AdamW weight decay (not on LayerNorm and bias).")
    gradient_clipping: Optional[float] = option(None, "Clip the global gradient norm to this; 0 does not clip.")
    gradient_accumulation_steps: int = option(1, "Micro-batches per step whose gradients are summed.")
    use_xla: Optional[bool] = option(None, "Compile the training step with XLA; default: on with GPUs, and on a "
                                            "CPU measured at start-up for runs of 1,000 steps or more "
                                            "(train/xla_choice.json).")
    fused_kernels: Optional[bool] = option(None, "Layer norms, GELU and the transformer's sublayer ends as fused XLA "
                                                  "kernels in training; default: on when a replica's layer holds "
                                                  ">= 131,072 values (batch x max_seq_length x hidden) and the step "
                                                  "is not XLA already (train/fused_kernels.json).")
    precision: Optional[str] = option(None, "Training precision; default: bfloat16 on TPUs and on CPUs with "
                                             "avx512_bf16 or amx_bf16 (the encoder computes in bfloat16, variables "
                                             "stay float32), else float32.", choices=("float32", "bfloat16"))
    save_checkpoints_steps: int = option(1000, "Checkpoint every this many steps.")
    keep_checkpoint_max: int = option(5, "Checkpoints kept.")
    log_steps: int = option(100, "TensorBoard scalars and a log line every this many steps.")
    shuffle_buffer: int = option(10_000, "Examples in the shuffle buffer (<= 1: file order).")
    seed: Optional[int] = option(None, "Seed of the initialisation, dropout and shuffling.")
    init_checkpoint: Optional[str] = None
    init_heads: bool = option(False, "Restore the heads of --init_checkpoint too (transfer from a model "
                                      "fine-tuned on another task, e.g. WIKISQL -> WTQ); see "
                                      "--reset_cell_selection_weights.")
    reset_cell_selection_weights: bool = option(False, "With --init_heads, the cell-selection head starts "
                                                        "fresh; default the task's (WTQ: yes).")
    show_progress: bool = True
    max_predictions_per_seq: Optional[int] = None
    bucket_lengths: Tuple[int, ...] = option(
        DEFAULT_BUCKET_LENGTHS, "Pad each training batch only to the smallest of these lengths (capped at "
        "--max_seq_length) that holds its examples, grouped by real length; empty: pad to --max_seq_length.")

    @property
    def is_pretraining(self) -> bool:
        return self.max_predictions_per_seq is not None

    def __post_init__(self):
        for name in ("train_steps", "train_batch_size", "max_seq_length", "gradient_accumulation_steps",
                     "save_checkpoints_steps", "keep_checkpoint_max", "log_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
        value = self.max_predictions_per_seq
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"max_predictions_per_seq must be an int >= 1 or None, got {value!r}.")
        object.__setattr__(self, "bucket_lengths", tuple(self.bucket_lengths))
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in self.bucket_lengths):
            raise ValueError(f"bucket_lengths must be ints >= 1, got {self.bucket_lengths!r}.")
        if self.precision is not None and self.precision not in ("float32", "bfloat16"):
            raise ValueError(f"precision must be float32, bfloat16 or None, got {self.precision!r}.")
        for name in ("learning_rate", "warmup_ratio"):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), (int, float)):
                raise ValueError(f"{name} must be a number, got {getattr(self, name)!r}.")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}.")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}.")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}.")
        if self.gradient_clipping is not None and not self.gradient_clipping >= 0:
            raise ValueError(f"gradient_clipping must be >= 0 or None, got {self.gradient_clipping!r}.")
        if self.train_batch_size % self.gradient_accumulation_steps:
            raise ValueError(
                f"train_batch_size ({self.train_batch_size}) is not divisible by "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps}).")

    @property
    def warmup_steps(self) -> int:
        return int(round(self.train_steps * self.warmup_ratio))

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def base_model_config(model_size: Optional[str] = None, model_config_file: Optional[str] = None,
                      init_checkpoint: Optional[str] = None) -> TapasConfig:
    """The encoder to train: a size preset, a config file, or else the init checkpoint's own config.

    Args:
      model_size: a `models.config.SIZES` name ("tiny" ... "large").
      model_config_file: a TapasConfig JSON file (for example another model's tapas_config.json).
      init_checkpoint: used when neither is given: if it is a model directory with a
        tapas_config.json, that config; otherwise the "base" size.

    Raises:
      ValueError: both `model_size` and `model_config_file` are given, or either is invalid.
    """
    if model_size and model_config_file:
        raise ValueError("Give a model size or a model config file, not both.")
    if model_config_file:
        return TapasConfig.from_json_file(model_config_file)
    if model_size:
        return TapasConfig.from_preset(model_size)
    if init_checkpoint and os.path.isfile(os.path.join(init_checkpoint, CONFIG_FILE)):
        return TapasConfig.from_json_file(os.path.join(init_checkpoint, CONFIG_FILE))
    return TapasConfig.from_preset("base")


# The TrainConfig fields that are flags of the train command, in field order.
FLAG_FIELDS = tuple(field.name for field in dataclasses.fields(TrainConfig) if field.metadata.get("help"))


def train_config_for_task(task: Union[Task, TaskPreset], train_file: str, **overrides: Any) -> TrainConfig:
    """The task's preset training hyper-parameters with the non-None `overrides` applied.

    Args:
      task: whose `PRESETS` entry (or a registered task's own `TaskPreset`) gives train_steps,
        learning_rate, warmup_ratio, train_batch_size, gradient_clipping and max_seq_length.
        PRETRAIN (a `masked_lm` preset) reads masked-LM examples (max_predictions_per_seq,
        default DEFAULT_MAX_PREDICTIONS_PER_SEQ); the other tasks classifier examples.
      train_file: path or glob of the training TFRecords.
      **overrides: any TrainConfig field; None values mean "keep the preset".

    Raises:
      ValueError: an unknown field, an invalid value, or max_predictions_per_seq for a task
        other than PRETRAIN.
    """
    preset = preset_of(task)
    values: Dict[str, Any] = {name: getattr(preset, name) for name in TRAIN_PRESET_FIELDS}
    if preset.masked_lm:
        values["max_predictions_per_seq"] = DEFAULT_MAX_PREDICTIONS_PER_SEQ
    elif overrides.get("max_predictions_per_seq") is not None:
        raise ValueError(f"max_predictions_per_seq is for PRETRAIN; {task_label(task)} trains on "
                         "classifier examples.")
    values.update({name: value for name, value in overrides.items() if value is not None})
    _check_names(values, (f.name for f in dataclasses.fields(TrainConfig)), "TrainConfig")
    return TrainConfig(train_file=train_file, **values)


def model_config_for_task(task: Union[Task, TaskPreset], base: TapasConfig, **overrides: Any) -> TapasConfig:
    """`base` with the task's preset head and loss options, then the non-None `overrides`.

    Args:
      task: whose `PRESETS` entry (or a registered task's own `TaskPreset`) gives temperature, the
        answer loss options, select_one_column, init_cell_selection_weights_to_zero,
        num_aggregation_labels and use_answer_as_supervision.
      base: the encoder (a size preset or a config file).
      **overrides: any TapasConfig field; None values mean "keep".

    Raises:
      ValueError: an override is not a TapasConfig field, or the result is not a valid config.
    """
    preset = preset_of(task)
    if preset.masked_lm:
        raise ValueError("PRETRAIN trains the masked-LM model; this builds question-answering configs.")
    values = {name: getattr(preset, name) for name in MODEL_PRESET_FIELDS}
    values.update({name: value for name, value in overrides.items() if value is not None})
    _check_names(values, (f.name for f in dataclasses.fields(TapasConfig)), "TapasConfig")
    return base.replace(**values)


def parse_overrides(items: Optional[Iterable[str]]) -> Dict[str, Any]:
    """`["name=value", ...]` -> `{name: value}`, values read as JSON (`0.0`, `true`, `null`) or text.

    Raises:
      ValueError: an item has no `=`.
    """
    values: Dict[str, Any] = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"Override {item!r} is not of the form name=value.")
        try:
            values[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            values[name.strip()] = text
    return values


def config_differences(old: TapasConfig, new: TapasConfig) -> Dict[str, tuple]:
    """{field: (old value, new value)} for every field where the configs differ."""
    old_values, new_values = old.to_dict(), new.to_dict()
    return {name: (old_values[name], new_values[name]) for name in old_values
            if old_values[name] != new_values[name]}


def _check_names(values: Mapping[str, Any], fields: Iterable[str], kind: str) -> None:
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"Unknown {kind} options: {', '.join(unknown)}.")
