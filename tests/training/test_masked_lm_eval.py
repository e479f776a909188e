"""Masked-LM accuracy and its Table-5 split, on a batch worked out by hand."""

import numpy as np
import pytest

from tapas_tf.training.masked_lm_eval import accuracy_counts, masked_lm_accuracy, table5, weighted_cross_entropy

# One example, six predictions over a vocabulary of 4 pieces; the last is padding (weight 0).
#
# | prediction | 0    | 1      | 2      | 3      | 4    | 5 (padding) |
# | id         | 1    | 2      | 3      | 0      | 1    | 2           |
# | arg-max    | 1    | 0      | 3      | 0      | 1    | 2           |
# | right      | yes  | no     | yes    | yes    | yes  | (yes)       |
# | location   | text | text   | header | cell   | cell | text        |
# | target     | word | number | word   | number | word | word        |
IDS = np.array([[1, 2, 3, 0, 1, 2]])
ARGMAX = np.array([[1, 0, 3, 0, 1, 2]])
WEIGHTS = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
LOCATIONS = np.array([[0, 0, 1, 2, 2, 0]])
IS_NUMBER = np.array([[0, 1, 0, 1, 0, 0]])


def _logits(argmax: np.ndarray, vocab_size: int = 4) -> np.ndarray:
    logits = np.zeros(argmax.shape + (vocab_size,), np.float32)
    np.put_along_axis(logits, argmax[..., None], 5.0, axis=-1)
    return logits


def test_accuracy_and_its_table5_split():
    metrics = masked_lm_accuracy(_logits(ARGMAX), IDS, WEIGHTS, LOCATIONS, IS_NUMBER)
    assert metrics["accuracy"] == {
        "all": {"all": 4 / 5, "word": 3 / 3, "number": 1 / 2},
        "text": {"all": 1 / 2, "word": 1.0, "number": 0.0},
        "header": {"all": 1.0, "word": 1.0, "number": None},  # No number in the header.
        "cell": {"all": 1.0, "word": 1.0, "number": 1.0},
    }
    assert metrics["predictions"]["all"] == {"all": 5.0, "word": 3.0, "number": 2.0}
    assert metrics["predictions"]["header"]["number"] == 0.0


def test_counts_are_weighted_and_add_up_over_batches():
    weights = WEIGHTS * np.array([[0.5, 1, 1, 1, 2, 0]])  # Fractional weights count as such.
    counts = accuracy_counts(_logits(ARGMAX), IDS, weights, LOCATIONS, IS_NUMBER)
    assert counts[0, 0].tolist() == [0.5 + 1 + 1 + 2, 0.5 + 1 + 1 + 1 + 2]
    # Two batches summed give the accuracy of their concatenation.
    wrong = np.zeros_like(ARGMAX)  # Only prediction 3 (id 0) right.
    summed = counts + accuracy_counts(_logits(wrong), IDS, weights, LOCATIONS, IS_NUMBER)
    joined = accuracy_counts(_logits(np.concatenate([ARGMAX, wrong])), np.concatenate([IDS, IDS]),
                             np.concatenate([weights, weights]), np.concatenate([LOCATIONS, LOCATIONS]),
                             np.concatenate([IS_NUMBER, IS_NUMBER]))
    np.testing.assert_allclose(summed, joined)
    assert table5(summed)["accuracy"]["all"]["all"] == pytest.approx((4.5 + 1) / 11)


def test_weighted_cross_entropy_skips_padding():
    logits = np.log(np.array([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]]))
    total, weight = weighted_cross_entropy(logits, np.array([[0, 1]]), np.array([[1.0, 0.0]]))
    assert (total, weight) == (pytest.approx(-np.log(0.5)), 1.0)
