"""Masked-LM accuracy of a pre-trained model, split as Table 5 of the TAPAS paper.

    metrics = evaluate_model_dir("MODEL", "OUT/tf_examples/test-*.tfrecord", max_seq_length=128,
                                 max_predictions_per_seq=20)
    metrics["accuracy"]["cell"]["number"]   # masked number pieces in table cells

A prediction is right when the arg-max of its vocabulary logits is the masked piece. Accuracy is
weighted by masked_lm_weights (1 for a prediction, 0 for padding), and split by where the masked
piece is (`masked_lm_location`: text, header or cell) and what it is (`masked_lm_is_number`:
word or number), each with "all". Written to MODEL_DIR/eval_pretrain/metrics.json:

    {"accuracy": {"all": {"all": 0.41, "word": 0.45, "number": 0.2}, "text": {...},
                  "header": {...}, "cell": {...}},      # null where no prediction falls
     "predictions": {same layout: summed masked_lm_weights},
     "mlm_loss": 3.2,          # weighted mean cross-entropy over every prediction
     "examples": 1000, "checkpoint": "MODEL/checkpoints/ckpt-100", "step": 100,
     "eval_file": "OUT/tf_examples/test-*.tfrecord"}

and as TensorBoard scalars in MODEL_DIR/eval_pretrain (`masked_lm_accuracy/{location}_{target}`,
`soft_number_accuracy/{location}` and `mlm_loss`) at the checkpoint's step.

Soft number accuracy gives partial credit to a near miss on a number, the way the paper's appendix
looks at numbers (its exact definition is not restated here; this is ours). It is computed over
the masked pieces that are numbers themselves (the piece, without `##`, parses as a number:
`1990`, `##5`, `3.5`; not the `,` of `1,234`):

    credit = 1                                      the predicted piece is the masked one
           = max(0, 1 - |p - g| / max(|p|, |g|))    the predicted piece is another number p
           = 0                                      the predicted piece is not a number

so 1991 for 1990 earns 0.9995, 5 for 10 earns 0.5, and 0 for 3 earns 0. Written as
`"soft_number_accuracy": {location: credit or None}` with `"number_pieces": {location: weight}`.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import json  # noqa: E402
import logging  # noqa: E402
from typing import Any, Dict, Optional  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.features import (
    example_features,  # noqa: E402
    vocab as vocab_lib,  # noqa: E402
)
from tapas_tf.training import input_pipeline  # noqa: E402

EVAL_DIR = "eval_pretrain"
METRICS_FILE = "metrics.json"
# Row and column names of Table 5, in the order of the axes of `accuracy_counts`.
LOCATIONS = ("all", "text", "header", "cell")
TARGETS = ("all", "word", "number")
_LOCATION_IDS = {"text": example_features.MASKED_LM_LOCATION_TEXT,
                 "header": example_features.MASKED_LM_LOCATION_HEADER,
                 "cell": example_features.MASKED_LM_LOCATION_CELL}


def accuracy_counts(logits, ids, weights, locations, is_number) -> np.ndarray:
    """Weighted right predictions and weights of one batch, by location and target.

    Args:
      logits: <float>[batch, num_predictions, vocab_size] masked-LM logits.
      ids: <int>[batch, num_predictions] the masked pieces (masked_lm_ids).
      weights: <float>[batch, num_predictions] masked_lm_weights (0 for padding).
      locations: <int>[batch, num_predictions] masked_lm_location (MASKED_LM_LOCATION_*).
      is_number: <int>[batch, num_predictions] masked_lm_is_number (1: number, 0: word).

    Returns:
      <float64>[len(LOCATIONS), len(TARGETS), 2]: [..., 0] the summed weights of right
      predictions, [..., 1] the summed weights. Sum over batches, then `table5`.
    """
    weights = np.asarray(weights, np.float64)
    right = (np.argmax(np.asarray(logits), axis=-1) == np.asarray(ids)).astype(np.float64) * weights
    locations, is_number = np.asarray(locations), np.asarray(is_number).astype(bool)
    location_masks = [np.ones_like(weights, bool)] + [locations == _LOCATION_IDS[name] for name in LOCATIONS[1:]]
    target_masks = [np.ones_like(weights, bool), ~is_number, is_number]
    counts = np.zeros([len(LOCATIONS), len(TARGETS), 2], np.float64)
    for i, location in enumerate(location_masks):
        for j, target in enumerate(target_masks):
            mask = location & target
            counts[i, j] = right[mask].sum(), weights[mask].sum()
    return counts


def table5(counts: np.ndarray) -> Dict[str, Dict[str, Dict[str, Optional[float]]]]:
    """`accuracy_counts` (summed) -> {"accuracy": {location: {target: accuracy or None}},
    "predictions": {location: {target: summed weight}}}."""
    accuracy = {location: {target: (float(counts[i, j, 0] / counts[i, j, 1]) if counts[i, j, 1] > 0 else None)
                           for j, target in enumerate(TARGETS)} for i, location in enumerate(LOCATIONS)}
    predictions = {location: {target: float(counts[i, j, 1]) for j, target in enumerate(TARGETS)}
                   for i, location in enumerate(LOCATIONS)}
    return {"accuracy": accuracy, "predictions": predictions}


def piece_values(pieces) -> np.ndarray:
    """<float64>[vocab_size]: the number each vocabulary piece is (without `##`), NaN for the others."""
    values = np.full([len(pieces)], np.nan)
    for i, piece in enumerate(pieces):
        text = piece[2:] if piece.startswith("##") else piece
        if text and (text[0].isdigit() or (text[0] == "." and text[1:2].isdigit())):
            try:
                values[i] = float(text)
            except ValueError:
                pass
    return values


def soft_number_counts(logits, ids, weights, locations, values: np.ndarray) -> np.ndarray:
    """Summed soft-number credit and weights of one batch, by location (module docstring).

    Args:
      logits, ids, weights, locations: as `accuracy_counts`.
      values: `piece_values` of the model's vocabulary.

    Returns:
      <float64>[len(LOCATIONS), 2]: [..., 0] summed weighted credit, [..., 1] summed weights of
      the masked pieces that are numbers.
    """
    ids = np.asarray(ids).astype(np.int64)
    predicted = np.argmax(np.asarray(logits), axis=-1)
    gold, guess = values[ids], values[predicted]
    weights = np.where(np.isnan(gold), 0.0, np.asarray(weights, np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.maximum(np.abs(gold), np.abs(guess))
        near = np.where(scale > 0, 1.0 - np.abs(guess - gold) / scale, 1.0)
    credit = np.where(predicted == ids, 1.0, np.where(np.isnan(guess), 0.0, np.clip(near, 0.0, 1.0)))
    credit = np.nan_to_num(credit) * weights
    locations = np.asarray(locations)
    masks = [np.ones_like(weights, bool)] + [locations == _LOCATION_IDS[name] for name in LOCATIONS[1:]]
    return np.array([[credit[mask].sum(), weights[mask].sum()] for mask in masks])


def soft_number_accuracy(counts: np.ndarray) -> Dict[str, Dict[str, Optional[float]]]:
    """`soft_number_counts` (summed) -> {"soft_number_accuracy": {...}, "number_pieces": {...}}."""
    return {"soft_number_accuracy": {location: (float(counts[i, 0] / counts[i, 1]) if counts[i, 1] > 0 else None)
                                     for i, location in enumerate(LOCATIONS)},
            "number_pieces": {location: float(counts[i, 1]) for i, location in enumerate(LOCATIONS)}}


def masked_lm_accuracy(logits, ids, weights, locations, is_number):
    """`table5(accuracy_counts(...))` of one batch (arguments as `accuracy_counts`)."""
    return table5(accuracy_counts(logits, ids, weights, locations, is_number))


def weighted_cross_entropy(logits, ids, weights) -> np.ndarray:
    """<float64>[2]: the summed weighted cross-entropy and the summed weights (args as above)."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, np.asarray(ids)[..., None].astype(np.int64), axis=-1)[..., 0]
    weights = np.asarray(weights, np.float64)
    return np.array([-(picked * weights).sum(), weights.sum()])


def load_masked_lm(model_dir: str, checkpoint: Optional[str] = None):
    """(TapasForMaskedLM with restored weights, checkpoint prefix, step) of a pre-training model dir.

    Raises:
      FileNotFoundError: no config or no checkpoint.
      ValueError: the directory holds a question-answering model, or the checkpoint is damaged.
    """
    config = model_dir_lib.load_config(model_dir)
    kind = model_dir_lib.load_model_kind(model_dir)
    if kind != model_dir_lib.MASKED_LM:
        raise ValueError(f"{model_dir} holds a {kind} model; masked-LM evaluation needs one trained with "
                         "--task=PRETRAIN")
    checkpoint = checkpoint or model_dir_lib.latest_checkpoint(model_dir)
    if checkpoint is None:
        raise FileNotFoundError(f"{model_dir}: no checkpoint under {model_dir_lib.CHECKPOINT_DIR}/")
    model = model_dir_lib.load_model(model_dir, checkpoint, config, kind=model_dir_lib.MASKED_LM)
    return model, checkpoint, model_dir_lib.checkpoint_step(checkpoint)


def evaluate_model_dir(model_dir: str, eval_file: str, max_seq_length: int, max_predictions_per_seq: int,
                       batch_size: int = 32, checkpoint: Optional[str] = None,
                       vocab_file: Optional[str] = None) -> Dict[str, Any]:
    """Masked-LM accuracy (Table 5) and loss of `model_dir` on `eval_file`; written as the module says.

    Args:
      model_dir: a directory trained with --task=PRETRAIN (model_kind.json "masked_lm").
      eval_file: path or glob of masked-LM TFRecords (the test split of the pre-training job).
      max_seq_length, max_predictions_per_seq: the examples' shapes.
      batch_size: examples per model call.
      checkpoint: a checkpoint prefix; default the newest in model_dir.
      vocab_file: the vocabulary the examples were made with (for the soft number accuracy);
        default BERT's uncased vocabulary with [EMPTY].

    Returns:
      The metrics dict written to MODEL_DIR/eval_pretrain/metrics.json.

    Raises:
      FileNotFoundError, ValueError: see `load_masked_lm` and `input_pipeline.make_dataset`.
    """
    model, checkpoint, step = load_masked_lm(model_dir, checkpoint)
    values = piece_values(vocab_lib.load_vocab(vocab_lib.resolve_vocab_file(vocab_file)))
    vocab_size = model_dir_lib.load_config(model_dir).vocab_size
    if len(values) > vocab_size:
        raise ValueError(f"the vocabulary has {len(values)} pieces but {model_dir} has {vocab_size} word "
                         "embeddings; pass the vocabulary it was trained with (--vocab_file)")
    dataset = input_pipeline.make_dataset(eval_file, max_seq_length, batch_size, training=False,
                                          max_predictions_per_seq=max_predictions_per_seq)
    inputs = example_features.MODEL_INPUT_FEATURES + ("masked_lm_positions",)
    predict = tf.function(lambda features: model({k: features[k] for k in inputs}, training=False)["mlm_logits"],
                          autograph=False)
    counts = np.zeros([len(LOCATIONS), len(TARGETS), 2])
    loss = np.zeros([2])
    soft = np.zeros([len(LOCATIONS), 2])
    examples = 0
    try:
        for features in dataset:
            logits = predict(features).numpy()
            labels = [features[name].numpy() for name in
                      ("masked_lm_ids", "masked_lm_weights", "masked_lm_location", "masked_lm_is_number")]
            counts += accuracy_counts(logits, *labels)
            loss += weighted_cross_entropy(logits, labels[0], labels[1])
            soft += soft_number_counts(logits, labels[0], labels[1], labels[2], values)
            examples += len(logits)
    except tf.errors.DataLossError as e:
        raise input_pipeline.damaged_file_error(eval_file, e) from e
    metrics = table5(counts)
    metrics.update(soft_number_accuracy(soft))
    metrics.update(mlm_loss=float(loss[0] / loss[1]) if loss[1] > 0 else None, examples=examples,
                   checkpoint=checkpoint, step=step, eval_file=eval_file)
    _write(model_dir, metrics)
    return metrics


def _write(model_dir: str, metrics: Dict[str, Any]) -> None:
    directory = os.path.join(model_dir, EVAL_DIR)
    tf.io.gfile.makedirs(directory)
    path = os.path.join(directory, METRICS_FILE)
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default():
        for location, row in metrics["accuracy"].items():
            for target, value in row.items():
                if value is not None:
                    tf.summary.scalar(f"masked_lm_accuracy/{location}_{target}", value, step=metrics["step"])
        for location, value in metrics["soft_number_accuracy"].items():
            if value is not None:
                tf.summary.scalar(f"soft_number_accuracy/{location}", value, step=metrics["step"])
        if metrics["mlm_loss"] is not None:
            tf.summary.scalar("mlm_loss", metrics["mlm_loss"], step=metrics["step"])
    writer.close()
    accuracy = metrics["accuracy"]["all"]["all"]
    logging.info("Masked-LM accuracy %s on %d examples (%d predictions); metrics: %s",
                 "n/a" if accuracy is None else f"{accuracy:.4f}", metrics["examples"],
                 metrics["predictions"]["all"]["all"], path)
