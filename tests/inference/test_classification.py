"""Statement classification: P(entailed) from two logits, and accuracy with per-label precision and
recall on hand-counted predictions; the loss of a classifier without cell selection by hand."""

import math
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.inference.classification import (  # noqa: E402
    ClassPrediction,
    classification_metrics,
    softmax_probability,
)
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402


def test_probability_of_label_one():
    assert softmax_probability(np.array([0.0, 0.0])) == pytest.approx(0.5)
    assert softmax_probability(np.array([1.0, 3.0])) == pytest.approx(1 / (1 + math.exp(-2)))
    assert softmax_probability(np.array([1000.0, 0.0])) == pytest.approx(0.0)


def test_accuracy_precision_and_recall_by_hand():
    predictions = [ClassPrediction("a", 1, 1, 0.9), ClassPrediction("b", 1, 0, 0.2),
                   ClassPrediction("c", 0, 0, 0.1), ClassPrediction("d", 0, 1, 0.7),
                   ClassPrediction("e", 0, -1, float("nan"))]
    metrics = classification_metrics(predictions)
    assert metrics["accuracy"] == pytest.approx(2 / 5) and metrics["num_not_converted"] == 1
    assert metrics["per_label"]["entailed"] == {"precision": 0.5, "recall": 0.5, "support": 2}
    assert metrics["per_label"]["refuted"] == {"precision": 0.5, "recall": pytest.approx(1 / 3), "support": 3}
    assert metrics["confusion"] == {"refuted->none": 1, "refuted->refuted": 1, "refuted->entailed": 1,
                                    "entailed->refuted": 1, "entailed->entailed": 1}


def test_a_classifier_without_cell_selection_has_the_cross_entropy_as_its_loss():
    config = TapasConfig.from_preset("tiny", vocab_size=64, num_classification_labels=2,
                                     disable_per_token_loss=True, select_one_column=False)
    model = TapasForQuestionAnswering(config)
    features = dummy_features(2, 8)
    features["classification_class_index"] = tf.constant([1, 0], tf.int32)
    features["label_ids"] = tf.ones([2, 8], tf.int32)  # Ignored: no cell-selection loss.
    outputs = model(features, training=False)
    logits = outputs["classification_logits"].numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -(log_probs[0, 1] + log_probs[1, 0]) / 2
    assert float(outputs["selection_loss"].numpy().mean()) > 0  # Computed, but not in the total.
    assert float(outputs["total_loss"]) == pytest.approx(expected, rel=1e-5)
