"""A compact model directory: the weights in float16 or int8, for shipping a model inside the package.

    report = write_compact_model_dir("runs/sqa_tiny", "tapas_tf/checkpoints/bundled/sqa_tiny",
                                     notes={"dev ALL": 0.25})
    model = model_dir.load_model("tapas_tf/checkpoints/bundled/sqa_tiny")   # float32 again

A compact directory holds `tapas_config.json` (as any model directory), `weights_float16.npz`
(every variable of the question-answering model under its original TAPAS checkpoint name, as
`TapasForQuestionAnswering.weight_map` names them, in float16) and `compact.json` (where the
weights came from, the float16 rounding error, and the `notes` given). There is no optimizer
state and no checkpoint folder: it is for prediction, export and asking. Weights are cast back to float32 when
loaded, so the model computes in float32 with weights rounded to 11 significant bits.

With `weights="int8"` the file is `weights_int8.npz` instead, half the size: every matrix is
stored as int8 with one float32 scale per slice (`NAME` and `NAME@scale`, symmetric, scale =
largest magnitude / 127), and vectors (biases, layer norms) stay float16. Embedding tables get a
scale per row, because a row is what a lookup reads; other matrices one per output column (the last
axis). This is weight-only quantisation: the weights are multiplied back to float32 when loaded.

This module only writes the layout; `model_dir` reads it, as it reads checkpoints
(`model_dir.load_model`, `model_dir.restore_compact_weights`, `model_dir.compact_source_step`).
"""

import json
import os
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from tapas_tf.checkpoints import model_dir as model_dir_lib

# The layout's names are the model directory's, which reads it.
WEIGHTS_FILES = model_dir_lib.COMPACT_WEIGHTS_FILES
WEIGHTS_FILE = WEIGHTS_FILES["float16"]
INT8_WEIGHTS_FILE = WEIGHTS_FILES["int8"]
INFO_FILE = model_dir_lib.COMPACT_INFO_FILE
SCALE_SUFFIX = model_dir_lib.SCALE_SUFFIX
_FLOAT16_MAX = float(np.finfo(np.float16).max)


def to_float16(name: str, value: np.ndarray) -> np.ndarray:
    """`value` in float16; ValueError naming the variable when it does not fit float16's range."""
    value = np.asarray(value)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"variable {name} has non-finite values")
    largest = float(np.max(np.abs(value))) if value.size else 0.0
    if largest > _FLOAT16_MAX:
        raise ValueError(f"variable {name} holds {largest:g}, beyond float16's largest value {_FLOAT16_MAX:g}")
    return value.astype(np.float16)


def to_int8(name: str, value: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """`value` (a matrix or higher) as int8 values and float32 scales, `value ≈ values * scales`.

    Returns:
      values: <int8>[*value.shape]; scales: <float32> broadcastable to it, one per row of an embedding
      table (`*embeddings*` names), else one per last-axis column. An all-zero slice has scale 1.
    """
    value = np.asarray(value, dtype=np.float32)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"variable {name} has non-finite values")
    kept_axis = 0 if "embeddings" in name else value.ndim - 1
    reduce_axes = tuple(axis for axis in range(value.ndim) if axis != kept_axis)
    largest = np.max(np.abs(value), axis=reduce_axes, keepdims=True)
    scales = np.where(largest > 0, largest / 127.0, 1.0).astype(np.float32)
    values = np.clip(np.rint(value / scales), -127, 127).astype(np.int8)
    return values, scales


def _compress(name: str, value: np.ndarray, weights: str) -> Dict[str, np.ndarray]:
    """The stored arrays of one variable: {name: float16} or {name: int8, name@scale: float32}."""
    if weights == "int8" and value.ndim >= 2:
        values, scales = to_int8(name, value)
        return {name: values, name + SCALE_SUFFIX: scales}
    return {name: to_float16(name, value)}


def write_compact_weights(out_dir: str, weight_map: Mapping[str, Any], weights: str, source_model_dir: str,
                          checkpoint: Optional[str], notes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Writes every variable of a model's `weight_map()` as OUT_DIR/weights_{float16,int8}.npz and
    what they came from as compact.json; returns compact.json's object. The layout of any compact
    directory, whatever its model (the QA model here, `retriever.write_compact_dual_encoder_dir`)."""
    if weights not in WEIGHTS_FILES:
        raise ValueError(f"weights must be one of {sorted(WEIGHTS_FILES)}, got {weights!r}")
    stored, worst, parameters = {}, 0.0, 0
    for name, variable in sorted(weight_map.items()):
        value = variable.numpy()
        arrays = _compress(name, value, weights)
        stored.update(arrays)
        parameters += value.size
        worst = max(worst, float(np.max(np.abs(model_dir_lib.decompress(arrays, name) - value), initial=0.0)))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, WEIGHTS_FILES[weights])
    # Stored, not deflated: float16 weights shrink by only 8% in zlib, and inflating them cost 0.1 s
    # of every fresh process's first answer (0.11 against 0.02 s for a tiny model's 9 MB).
    np.savez(path, **stored)
    info = {"source_model_dir": os.path.abspath(source_model_dir), "source_checkpoint": checkpoint,
            "source_step": model_dir_lib.checkpoint_step(checkpoint) if checkpoint else 0,
            "weights": weights, "variables": len(weight_map), "parameters": int(parameters),
            "max_abs_rounding_error": worst, "weights_bytes": os.path.getsize(path),
            "notes": dict(notes or {})}
    with open(os.path.join(out_dir, INFO_FILE), "w", encoding="utf-8") as f:
        f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return info


def write_compact_model_dir(model_dir: str, out_dir: str, checkpoint: Optional[str] = None,
                            notes: Optional[Mapping[str, Any]] = None, weights: str = "float16") -> Dict[str, Any]:
    """Writes the question-answering model of `model_dir` (newest checkpoint, or `checkpoint`)
    to `out_dir` as a compact directory with `weights` "float16" or "int8"; returns what
    `compact.json` holds.

    Raises:
      FileNotFoundError, ValueError: as `model_dir.load_model`; ValueError when `out_dir`
        already holds a model, or a weight does not fit float16, or `weights` is unknown.
    """
    if weights not in WEIGHTS_FILES:
        raise ValueError(f"weights must be one of {sorted(WEIGHTS_FILES)}, got {weights!r}")
    if os.path.exists(model_dir_lib.config_path(out_dir)):
        raise ValueError(f"{out_dir} already holds a model directory; write to a new directory")
    checkpoint = checkpoint or model_dir_lib.latest_checkpoint(model_dir)
    model = model_dir_lib.load_model(model_dir, checkpoint)
    model_dir_lib.save_config(out_dir, model_dir_lib.load_config(model_dir))
    return write_compact_weights(out_dir, model.weight_map(), weights, model_dir, checkpoint, notes)
