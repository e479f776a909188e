"""Prediction and evaluation of a classifier (TabFact: is the statement entailed by the table?).

    outcome = predict_classification(model_dir, "data/interactions/dev.tfrecord", "dev", config,
                                     evaluate=True)
    outcome.metrics   # {"accuracy": 0.63, "per_label": {"refuted": {...}, "entailed": {...}}, ...}

Each question of each interaction is one example (a statement about its table), independent of
the others. The model's `classification_logits` become P(label 1) = softmax(logits)[1]. Writes
`predictions/{split}.tsv` (question_id, label, predicted, probability) and, with `evaluate`,
`predictions/{split}_metrics.json`: accuracy, per-label precision and recall, the confusion
counts, and the statements that could not be converted (counted as wrong, never dropped).
"""

import collections
import csv
import dataclasses
import logging
import os
from typing import Dict, List, Optional, Sequence

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.data.interaction_io import read_interactions  # noqa: E402
from tapas_tf.features.classifier_examples import ExampleConverter  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError  # noqa: E402
from tapas_tf.inference import metrics as metrics_lib  # noqa: E402
from tapas_tf.inference.decoding import entailed_probability  # noqa: E402
from tapas_tf.inference.sequential import (  # noqa: E402
    PREDICTIONS_DIR,
    BatchPredictor,
    compiled_model_fn,
    write_metric_summaries,
)

# TabFact's labels by class index.
LABEL_NAMES = ("refuted", "entailed")


@dataclasses.dataclass(frozen=True)
class ClassPrediction:
    """One statement: its gold label (-1 unknown), the predicted one (-1: not converted) and P(label 1)."""

    question_id: str
    label: int
    predicted: int
    probability: float


@dataclasses.dataclass
class ClassificationOutcome:
    predictions: List[ClassPrediction]
    failures: Dict[str, str]
    predictions_path: str
    step: int
    metrics: Optional[Dict[str, object]] = None
    metrics_path: Optional[str] = None


def softmax_probability(logits: np.ndarray) -> float:
    """P(class 1) of two logits [2] (`decoding.entailed_probability` of one row)."""
    return float(entailed_probability(np.asarray(logits)[None])[0])


def classification_metrics(predictions: Sequence[ClassPrediction]) -> Dict[str, object]:
    """Accuracy (statements not converted count as wrong), per-label precision and recall, confusion."""
    scored = [p for p in predictions if p.label >= 0]
    confusion = collections.Counter((p.label, p.predicted) for p in scored)
    per_label = {}
    for index, name in enumerate(LABEL_NAMES):
        predicted = sum(n for (_, guess), n in confusion.items() if guess == index)
        actual = sum(n for (gold, _), n in confusion.items() if gold == index)
        right = confusion[(index, index)]
        per_label[name] = {"precision": right / predicted if predicted else None,
                           "recall": right / actual if actual else None, "support": actual}
    return {
        "accuracy": sum(p.label == p.predicted for p in scored) / len(scored) if scored else None,
        "num_statements": len(scored),
        "num_not_converted": sum(p.predicted < 0 for p in scored),
        "per_label": per_label,
        "confusion": {f"{LABEL_NAMES[g]}->{LABEL_NAMES[p] if p >= 0 else 'none'}": n
                      for (g, p), n in sorted(confusion.items())},
    }


def write_predictions(path: str, predictions: Sequence[ClassPrediction]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["question_id", "label", "predicted", "probability"])
        for p in predictions:
            writer.writerow([p.question_id, p.label, p.predicted, f"{p.probability:.6f}"])


def predict_classification(model_dir: str, interactions_file: str, split: str,
                           conversion_config: ConversionConfig, checkpoint: Optional[str] = None,
                           batch_size: int = 32, evaluate: bool = False, show_progress: bool = True,
                           output_dir: Optional[str] = None) -> ClassificationOutcome:
    """Classifies every statement of `interactions_file` with a model directory (see the module docstring).

    Raises:
      ValueError: the model has no classification head, or the file holds no statements.
    """
    output_dir = output_dir or model_dir
    config = model_dir_lib.load_config(model_dir)
    if config.num_classification_labels != len(LABEL_NAMES):
        raise ValueError(f"{model_dir}: the model has {config.num_classification_labels} "
                         "classification labels; "
                         f"a statement classifier has {len(LABEL_NAMES)} (train it with --task=TABFACT)")
    checkpoint = model_dir_lib.resolve_weights(model_dir, checkpoint)
    converter = ExampleConverter(dataclasses.replace(conversion_config, fail_on_dropped_answers=False))
    model = model_dir_lib.load_model(model_dir, checkpoint)
    step = model_dir_lib.weights_step(model_dir, checkpoint)
    questions = [(interaction, index) for interaction in read_interactions(interactions_file)
                 for index in range(len(interaction.questions))]
    if not questions:
        raise ValueError(f"{interactions_file}: no statements to classify")
    predictor = BatchPredictor(compiled_model_fn(model, batch_size, conversion_config.max_seq_length),
                               batch_size)
    predictions: List[Optional[ClassPrediction]] = [None] * len(questions)
    failures: Dict[str, str] = {}
    pending = []
    for position, (interaction, index) in enumerate(tqdm(questions, disable=not show_progress,
                                                         unit="statement")):
        question = interaction.questions[index]
        label = question.answer.class_index if question.answer.HasField("class_index") else -1
        try:
            pending.append((position, question.id, label, converter.convert(interaction, index).features))
        except ConversionError as error:
            failures[question.id] = error.reason.value
            predictions[position] = ClassPrediction(question.id, label, -1, float("nan"))
        if len(pending) == batch_size or (pending and position == len(questions) - 1):
            for (where, question_id, gold, _), output in zip(pending, predictor([f for *_, f in pending])):
                probability = softmax_probability(output["classification_logits"])
                predictions[where] = ClassPrediction(question_id, gold, int(probability >= 0.5), probability)
            pending = []
    outcome = ClassificationOutcome(predictions, failures,
                                    os.path.join(output_dir, PREDICTIONS_DIR, f"{split}.tsv"), step)
    write_predictions(outcome.predictions_path, predictions)
    logging.info("Wrote %d predictions to %s; %d statements not converted%s", len(predictions),
                 outcome.predictions_path, len(failures),
                 f": {dict(collections.Counter(failures.values()))}" if failures else "")
    if evaluate:
        outcome.metrics = classification_metrics(predictions)
        outcome.metrics["conversion_failures"] = dict(sorted(collections.Counter(failures.values()).items()))
        outcome.metrics_path = os.path.join(output_dir, PREDICTIONS_DIR, f"{split}_metrics.json")
        metrics_lib.write_metrics_json(outcome.metrics_path, outcome.metrics)
        write_metric_summaries(os.path.join(output_dir, f"eval_{split}"),
                               {"accuracy": outcome.metrics["accuracy"]}, step)
        logging.info("%s accuracy at step %d: %.4f", split, step, outcome.metrics["accuracy"] or 0.0)
    return outcome


def read_predictions(path: str) -> Dict[str, ClassPrediction]:
    """The predictions file `write_predictions` writes, by question id.

    Raises:
      ValueError: naming the file and line: a missing file, another header, a malformed row, an id twice.
    """
    if not os.path.exists(path):
        raise ValueError(f"{path}: no predictions file; write one with --mode=predict")
    found: Dict[str, ClassPrediction] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for number, row in enumerate(csv.reader(f, delimiter="\t"), start=1):
            if number == 1:
                if row != ["question_id", "label", "predicted", "probability"]:
                    raise ValueError(f"{path}:1: not a statement predictions file (header {row})")
                continue
            try:
                question_id, label, predicted, probability = row
                prediction = ClassPrediction(question_id, int(label), int(predicted), float(probability))
            except ValueError:
                raise ValueError(f"{path}:{number}: expected question_id, label, predicted, probability; "
                                 f"got {row}") from None
            if question_id in found:
                raise ValueError(f"{path}:{number}: statement {question_id} predicted twice")
            found[question_id] = prediction
    return found


def evaluate_predictions(predictions_path: str, interactions_file: str, metrics_path: str) -> Dict[str, object]:
    """Scores a predictions file against the gold labels of `interactions_file` (not the file's own
    label column) and writes the metrics JSON: every statement of the split counts, and one without
    a prediction counts as wrong (`num_missing`).

    Raises:
      ValueError: as `read_predictions`, or predictions of statements that are not in the split.
    """
    predicted = read_predictions(predictions_path)
    gold = {question.id: (question.answer.class_index if question.answer.HasField("class_index") else -1)
            for interaction in read_interactions(interactions_file) for question in interaction.questions}
    unknown = sorted(set(predicted) - set(gold))
    if unknown:
        raise ValueError(f"{predictions_path}: {len(unknown)} predicted statements are not in {interactions_file} "
                         f"(first {unknown[0]}); predictions of another split?")
    scored = [ClassPrediction(question_id, label, predicted[question_id].predicted,
                              predicted[question_id].probability) if question_id in predicted
              else ClassPrediction(question_id, label, -1, float("nan"))
              for question_id, label in gold.items()]
    metrics = classification_metrics(scored)
    metrics["num_missing"] = len(set(gold) - set(predicted))
    metrics["predictions_file"] = predictions_path
    metrics_lib.write_metrics_json(metrics_path, metrics)
    logging.info("Accuracy %.4f on %d statements (%d without a prediction): %s",
                 metrics["accuracy"] or 0.0, len(scored), metrics["num_missing"], metrics_path)
    return metrics
