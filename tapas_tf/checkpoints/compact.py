"""A compact model directory: the weights in float16, for shipping a model inside the package.

    report = write_compact_model_dir("runs/sqa_tiny", "tapas_tf/checkpoints/bundled/sqa_tiny",
                                     notes={"dev ALL": 0.25})
    model = model_dir.load_model("tapas_tf/checkpoints/bundled/sqa_tiny")   # float32 again

A compact directory holds `tapas_config.json` (as any model directory), `weights_float16.npz`
(every variable of the question-answering model under its original TAPAS checkpoint name, as
`TapasForQuestionAnswering.weight_map` names them, in float16) and `compact.json` (where the
weights came from, the float16 rounding error, and the `notes` given). There is no optimizer
state and no checkpoint folder: it is for prediction, export and asking. Weights are cast back to float32 when
loaded, so the model computes in float32 with weights rounded to 11 significant bits.
"""

import json
import os
import zipfile
from typing import Any, Dict, Mapping, Optional

import numpy as np

from tapas_tf.checkpoints import model_dir as model_dir_lib

WEIGHTS_FILE = "weights_float16.npz"
INFO_FILE = "compact.json"
_FLOAT16_MAX = float(np.finfo(np.float16).max)


def has_compact_weights(model_dir: str) -> bool:
    return os.path.exists(os.path.join(model_dir, WEIGHTS_FILE))


def to_float16(name: str, value: np.ndarray) -> np.ndarray:
    """`value` in float16; ValueError naming the variable when it does not fit float16's range."""
    value = np.asarray(value)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"variable {name} has non-finite values")
    largest = float(np.max(np.abs(value))) if value.size else 0.0
    if largest > _FLOAT16_MAX:
        raise ValueError(f"variable {name} holds {largest:g}, beyond float16's largest value {_FLOAT16_MAX:g}")
    return value.astype(np.float16)


def write_compact_model_dir(model_dir: str, out_dir: str, checkpoint: Optional[str] = None,
                            notes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Writes the question-answering model of `model_dir` (newest checkpoint, or `checkpoint`)
    to `out_dir` as a compact directory; returns what `compact.json` holds.

    Raises:
      FileNotFoundError, ValueError: as `model_dir.load_model`; ValueError when `out_dir`
        already holds a model, or a weight does not fit float16.
    """
    if os.path.exists(model_dir_lib.config_path(out_dir)):
        raise ValueError(f"{out_dir} already holds a model directory; write to a new directory")
    checkpoint = checkpoint or model_dir_lib.latest_checkpoint(model_dir)
    model = model_dir_lib.load_model(model_dir, checkpoint)
    weights, worst = {}, 0.0
    for name, variable in sorted(model.weight_map().items()):
        value = variable.numpy()
        weights[name] = to_float16(name, value)
        worst = max(worst, float(np.max(np.abs(weights[name].astype(np.float32) - value), initial=0.0)))
    os.makedirs(out_dir, exist_ok=True)
    model_dir_lib.save_config(out_dir, model_dir_lib.load_config(model_dir))
    np.savez_compressed(os.path.join(out_dir, WEIGHTS_FILE), **weights)
    info = {"source_model_dir": os.path.abspath(model_dir), "source_checkpoint": checkpoint,
            "source_step": _checkpoint_step(checkpoint) if checkpoint else 0,
            "variables": len(weights), "parameters": int(sum(w.size for w in weights.values())),
            "max_abs_rounding_error": worst,
            "weights_bytes": os.path.getsize(os.path.join(out_dir, WEIGHTS_FILE)),
            "notes": dict(notes or {})}
    with open(os.path.join(out_dir, INFO_FILE), "w", encoding="utf-8") as f:
        f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return info


def source_step(model_dir: str) -> int:
    """The training step of the checkpoint a compact directory was made from (0 if unknown)."""
    try:
        with open(os.path.join(model_dir, INFO_FILE), encoding="utf-8") as f:
            return int(json.load(f).get("source_step") or 0)
    except (OSError, ValueError, TypeError):
        return 0


def _checkpoint_step(checkpoint: str) -> int:
    """The `step` variable a training checkpoint saves, else the `-N` of its prefix, else 0."""
    import re

    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint)
    if reader.has_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"):
        return int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))
    found = re.search(r"-(\d+)$", checkpoint)
    return int(found.group(1)) if found else 0


def restore_compact_weights(model, model_dir: str) -> None:
    """Sets every variable of a built TapasForQuestionAnswering from `model_dir`'s float16 weights.

    Raises:
      ValueError: the file is damaged, or its names or shapes are not the model's (names the file
        and the first differences).
    """
    path = os.path.join(model_dir, WEIGHTS_FILE)
    targets = model.weight_map()
    try:
        with np.load(path) as stored:
            weights = {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable weights file ({e})") from e
    missing, unexpected = sorted(set(targets) - set(weights)), sorted(set(weights) - set(targets))
    if missing or unexpected:
        raise ValueError(f"{path} does not fit the model of {model_dir_lib.config_path(model_dir)}: "
                         f"missing {missing[:3]}, unexpected {unexpected[:3]}")
    for name, variable in targets.items():
        if tuple(weights[name].shape) != tuple(variable.shape):
            raise ValueError(f"{path}: {name} has shape {weights[name].shape}, the model {tuple(variable.shape)}")
        variable.assign(weights[name].astype(variable.dtype.as_numpy_dtype))
