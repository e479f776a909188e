"""Masked-LM accuracy and its Table-5 split, on a batch worked out by hand."""

import numpy as np
import pytest

from tapas_tf.training.masked_lm_eval import (
    accuracy_counts,
    masked_lm_accuracy,
    piece_values,
    soft_number_accuracy,
    soft_number_counts,
    table5,
    weighted_cross_entropy,
)

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


# --- soft number accuracy -------------------------------------------------------------------------

PIECES = ["[PAD]", "the", "1990", "1991", "##5", "10", "0", ",", "3", ".5", "1st"]


def test_piece_values_parse_number_pieces_only():
    values = piece_values(PIECES)
    assert np.isnan(values[[0, 1, 7, 10]]).all()  # Words, punctuation, "1st".
    assert values[[2, 3, 4, 5, 6, 8, 9]].tolist() == [1990, 1991, 5, 10, 0, 3, 0.5]


def test_soft_number_credit_on_a_hand_worked_batch():
    # | masked piece | 1990 | 10   | 3    | ,     | 1990 | 10      | 1990 (padding) |
    # | predicted    | 1991 | ##5  | 0    | 1990  | the  | 10      | 1990           |
    # | credit       | 1-1/1991 | 1-5/10 | 0 | (not a number piece) | 0 | 1 |    |
    # | location     | text | cell | cell | cell  | header | cell  | text           |
    ids = np.array([[2, 5, 8, 7, 2, 5, 2]])
    predicted = np.array([[3, 4, 6, 2, 1, 5, 2]])
    weights = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
    locations = np.array([[0, 2, 2, 2, 1, 2, 0]])
    counts = soft_number_counts(_logits(predicted, len(PIECES)), ids, weights, locations, piece_values(PIECES))
    text, cell = 1 - 1 / 1991, 0.5 + 0 + 1
    np.testing.assert_allclose(counts, [[text + cell, 5], [text, 1], [0, 1], [cell, 3]])
    metrics = soft_number_accuracy(counts)
    assert metrics["soft_number_accuracy"] == {"all": pytest.approx((text + cell) / 5), "text": pytest.approx(text),
                                               "header": 0.0, "cell": pytest.approx(cell / 3)}
    assert metrics["number_pieces"] == {"all": 5.0, "text": 1.0, "header": 1.0, "cell": 3.0}


def test_soft_number_accuracy_is_none_without_number_pieces():
    counts = soft_number_counts(_logits(np.array([[1]]), len(PIECES)), np.array([[1]]), np.array([[1.0]]),
                                np.array([[0]]), piece_values(PIECES))
    assert soft_number_accuracy(counts)["soft_number_accuracy"]["all"] is None
