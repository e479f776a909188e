"""Original TAPAS (TF1) checkpoints: `bert_config.json` + `model.ckpt*` <-> TapasConfig + arrays.

A release directory (or zip, once unpacked) holds `bert_config.json`, `model.ckpt.index`,
`model.ckpt.data-*` and `vocab.txt`. Its variables already have the canonical (TF1) names and
layout; optimizer slots (`.../adam_m`, `.../adam_v`) and counters (`global_step`) are skipped.

The checkpoint says nothing about the task options (select_one_column, the answer loss, ...)
nor about `reset_position_index_per_cell`: those come from the caller (a task preset and
`--model_options`). A TabFact release (`tapas_tabfact_*`) holds the classifier on the pooled output
as `output_weights_cls` [num_labels, hidden] and `output_bias_cls` [num_labels] (our
`ClassificationHead`'s names) beside the cell-selection `output_weights`, `output_bias` that the
original code always creates; its options are `tasks.TABFACT_PRESET`'s (2 labels, no aggregation,
no cell-selection loss, no column head).

The original `gelu` is the tanh approximation, so `hidden_act: "gelu"` becomes "gelu_tanh";
LayerNorm epsilon is tf_slim's 1e-12.
"""

import glob
import os
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from tapas_tf.checkpoints import names
from tapas_tf.models.config import TapasConfig

BERT_CONFIG_FILE = "bert_config.json"
# The original BertConfig's activations (tf1 name -> ours); "gelu" there is the tanh form.
TF1_ACTIVATIONS = {"gelu": "gelu_tanh", "gelu_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "relu": "relu"}
# The encoder keys of a BERT config that are TapasConfig fields of the same name and meaning,
# copied as they are: the original bert_config.json and Hugging Face's BERT config.json
# (`bert_init`) both spell them so.
BERT_ENCODER_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "initializer_range",
)
# Those of them that matter only in training (dropout, initialisation); the others fix the
# encoder's weight shapes.
BERT_TRAINING_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")
# tf_slim.layer_norm's epsilon, used by the original BERT/TAPAS code.
TF1_LAYER_NORM_EPS = 1e-12
# The original AdamWeightDecayOptimizer's slots (adam_m, adam_v), its gradient accumulation
# (accum, counter), and those of the stock TF1 optimizers.
_OPTIMIZER_SLOT_SUFFIXES = (
    "/adam_m", "/adam_v", "/accum", "/Adam", "/Adam_1", "/Momentum", "/RMSProp", "/RMSProp_1"
)
_COUNTERS = ("global_step", "counter", "beta1_power", "beta2_power")
# A checkpoint written by tf.train.Checkpoint (TF2, object based) has this key.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def read_bert_config(source_dir: str) -> Dict[str, Any]:
    """The parsed `bert_config.json` of an original TAPAS release directory."""
    return names.read_json_object(source_dir, BERT_CONFIG_FILE, "an original TAPAS")


def tapas_config_from_bert_config(
    bert_config: Mapping[str, Any], options: Mapping[str, Any]
) -> Tuple[TapasConfig, List[str]]:
    """Our TapasConfig from a TF1 `bert_config.json` plus the task `options`.

    Args:
      bert_config: the parsed bert_config.json (`type_vocab_size` is TAPAS's list of 7 sizes).
      options: TapasConfig fields the checkpoint cannot tell (task options,
        reset_position_index_per_cell); they win over bert_config.

    Returns:
      (config, notes) where notes name the bert_config keys that were ignored.
    """
    softmax_temperature = bert_config.get("softmax_temperature", 1.0)
    if softmax_temperature != 1.0:
        raise ValueError(f"bert_config.json sets softmax_temperature={softmax_temperature}; tapas-tf's "
                         "attention has no temperature.")
    type_vocab_size = bert_config.get("type_vocab_size")
    if not isinstance(type_vocab_size, (list, tuple)):
        raise ValueError(
            f"bert_config.json has type_vocab_size={type_vocab_size!r}; a TAPAS checkpoint has a list of 7 "
            "sizes. To start from a text BERT, use tapas_tf.checkpoints.bert_init instead."
        )
    act = bert_config.get("hidden_act", "gelu")
    if act not in TF1_ACTIVATIONS:
        raise ValueError(
            f"Unsupported hidden_act {act!r} in bert_config.json; expected one of {sorted(TF1_ACTIVATIONS)}."
        )
    values: Dict[str, Any] = {key: bert_config[key] for key in BERT_ENCODER_KEYS if key in bert_config}
    values.update(
        hidden_act=TF1_ACTIVATIONS[act], type_vocab_sizes=list(type_vocab_size), layer_norm_eps=TF1_LAYER_NORM_EPS
    )
    known = set(BERT_ENCODER_KEYS) | {"softmax_temperature", "type_vocab_size", "hidden_act"}
    notes = [f"ignored bert_config key {key}={bert_config[key]!r}" for key in sorted(set(bert_config) - known)]
    values.update(options)
    try:
        return TapasConfig.from_dict(values), notes
    except ValueError as e:
        raise ValueError(f"bert_config.json with the task options does not give a valid config: {e}") from e


def find_checkpoint_prefix(source: str) -> str:
    """The checkpoint prefix in `source`: a prefix itself, or a directory holding one.

    A directory's `checkpoint` state file wins; otherwise it must hold exactly one `*.index`.
    """
    if os.path.exists(source + ".index"):
        return source
    if not os.path.isdir(source):
        raise ValueError(f"{source}: no such checkpoint prefix or directory.")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    latest = tf.train.latest_checkpoint(source)
    if latest:
        return latest
    indexes = sorted(glob.glob(os.path.join(source, "*.index")))
    if len(indexes) != 1:
        found = ", ".join(os.path.basename(p) for p in indexes) or "none"
        raise ValueError(f"{source}: expected one checkpoint (*.index), found {found}; pass the prefix.")
    return indexes[0][: -len(".index")]


def is_training_state(name: str) -> bool:
    """True for optimizer slots and step counters, which an import skips."""
    return name in _COUNTERS or name.endswith(_OPTIMIZER_SLOT_SUFFIXES)


def read_tf1_checkpoint(prefix: str) -> Tuple[Dict[str, np.ndarray], List[str]]:
    """Every model variable of a name-based (TF1 Saver) checkpoint.

    Returns:
      (arrays, skipped): TF1 name -> float32 array, and the optimizer/counter names skipped.

    Raises:
      ValueError: the checkpoint is object-based (written by tf.train.Checkpoint).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    if _OBJECT_GRAPH_KEY in shapes:
        raise ValueError(
            f"{prefix} is an object-based TF2 checkpoint, not an original TAPAS one; "
            "a tapas-tf checkpoint is used directly (run_task.py --init_checkpoint)."
        )
    arrays, skipped = {}, []
    for name in sorted(shapes):
        if is_training_state(name):
            skipped.append(name)
            continue
        value = reader.get_tensor(name)
        if not np.issubdtype(value.dtype, np.floating):
            raise ValueError(f"{prefix}: variable {name} has dtype {value.dtype}; model variables are floats.")
        arrays[name] = value.astype(np.float32)
    return arrays, skipped


def write_tf1_checkpoint(arrays: Mapping[str, np.ndarray], prefix: str) -> str:
    """Writes `arrays` as a name-based checkpoint, the format of `tf.compat.v1.train.Saver`.

    The files are `prefix.index` and `prefix.data-00000-of-00001` (SaveV2, the op a TF1
    Saver runs), plus a `checkpoint` state file in the directory.

    Args:
      arrays: TF1 name -> array in the TF1 layout (see `tapas_tf.checkpoints.importer.export_tf1_arrays`).
      prefix: path prefix, e.g. "out/model.ckpt".

    Returns:
      The prefix.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not arrays:
        raise ValueError("write_tf1_checkpoint needs at least one array.")
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
    tensor_names = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=tensor_names,
        shape_and_slices=[""] * len(tensor_names),
        tensors=[tf.constant(arrays[name]) for name in tensor_names],
    )
    # The CheckpointState text proto that tf.train.latest_checkpoint reads; a relative path
    # keeps the directory relocatable.
    name = os.path.basename(prefix)
    with open(os.path.join(directory, "checkpoint"), "w", encoding="utf-8") as f:
        f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    return prefix


def bert_config_from_tapas(config: TapasConfig) -> Dict[str, Any]:
    """The `bert_config.json` the original code would need for `config`'s encoder.

    The original has a single "gelu", the tanh form: both "gelu_tanh" and our exact "gelu"
    are written as "gelu", so a model with the exact form must be imported back with
    `--model_options='{"hidden_act": "gelu"}'`. LayerNorm epsilon is not written (1e-12).
    """
    values = {key: getattr(config, key) for key in BERT_ENCODER_KEYS}
    values["hidden_act"] = "relu" if config.hidden_act == "relu" else "gelu"
    values["type_vocab_size"] = list(config.type_vocab_sizes)
    return values
