"""Tests of models/losses.py against numbers computed by hand.

The cell selection tests use two examples of 8 tokens over 2x2 tables, with max_num_rows = 3
and max_num_columns = 3 (cell id = row * 3 + column):

    Example 0                       Example 1 (a two-token cell, last token is padding)
    [CLS] [SEP]                     [CLS] [SEP]
    +----+----+                     +------+----+
    | h1 | h2 |   row 0             | h1   | h2 |   row 0
    | a  | b  |   row 1             | a a' | b  |   row 1
    | c  | d  |   row 2             +------+----+
    +----+----+
    token  [CLS] [SEP] h1 h2 a b c d          token  [CLS] [SEP] h1 h2 a a' b [PAD]
    cell     0     0   1  2  4 5 7 8          cell     0     0   1  2  4 4  5  0

cell_mask = mean of input_mask per cell: example 0 has cells 0,1,2,4,5,7,8; example 1 has
cells 1,2,4,5 and cell 0 at 2/3 (two real tokens and the padding token).

Bernoulli NLLs used below: logit 0 -> ln 2 for either label; logit ln 3 -> sigmoid = 3/4, so
label 1 costs ln(4/3) and label 0 costs ln 4.
"""

import math
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.models import losses, segmented  # noqa: E402

LN2, LN3 = math.log(2.0), math.log(3.0)
NAN = float("nan")
ROW_IDS = [[0, 0, 0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1, 1, 0]]
COLUMN_IDS = [[0, 0, 1, 2, 1, 2, 1, 2], [0, 0, 1, 2, 1, 1, 2, 0]]
INPUT_MASK = [[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 0]]
CELL_MASK = [[1, 1, 1, 0, 1, 1, 0, 1, 1], [2 / 3, 1, 1, 0, 1, 1, 0, 0, 0]]


def _indices(row_ids=ROW_IDS, column_ids=COLUMN_IDS):
    features = {"row_ids": tf.convert_to_tensor(row_ids), "column_ids": tf.convert_to_tensor(column_ids)}
    return segmented.table_indices(features, max_num_rows=3, max_num_columns=3)


def _assert_close(actual, expected, atol=1e-5):
    expected = np.asarray(expected, dtype=np.float64)
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-5, atol=atol)


def _same_under_xla(fn, *args):
    """Runs fn eagerly and compiled with XLA; asserts equal outputs and returns the eager ones."""
    eager = fn(*args)
    compiled = tf.function(fn, jit_compile=True)(*args)
    for expected, actual in zip(tf.nest.flatten(eager), tf.nest.flatten(compiled)):
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)
    return eager


def test_cell_mask_fixture_matches_reduce_mean():
    _, _, cell_index = _indices()
    cell_mask, _ = segmented.reduce_mean(tf.constant(INPUT_MASK, tf.float32), cell_index)
    _assert_close(cell_mask, CELL_MASK)


def _cell_selection_loss(token_logits, column_logits, label_ids, cell_mask):
    _, col_index, cell_index = _indices()
    return losses.single_column_cell_selection_loss(
        token_logits, column_logits, label_ids, cell_index, col_index, cell_mask
    )


def test_single_column_cell_selection_loss_with_answer_and_without():
    # Example 0: labels on a and c, both in column 1 -> gold column 1 (2 labels against 0, 0).
    #   column loss: logits [0, 0, 0] -> -ln(1/3) = ln 3.
    #   cells of column 1 that exist: h1 (cell 1, label 0, logit 0) -> ln 2,
    #   a (cell 4, label 1, logit ln 3) -> ln(4/3), c (cell 7, label 1, logit 0) -> ln 2;
    #   mean over 3 cells: (ln 2 + ln(4/3) + ln 2) / 3. Other cells (logit 5) do not count.
    # Example 1: no label -> gold column 0 ("no column"), cell term 0.
    #   column loss: logits [ln 2, 0, 0] -> p(column 0) = 2/4 -> ln 2.
    token_logits = tf.constant([[5, 5, 0, 5, LN3, 5, 0, 5], [5, 5, 5, 5, 5, 5, 5, 5]], tf.float32)
    column_logits = tf.constant([[0, 0, 0], [LN2, 0, 0]], tf.float32)
    labels = tf.constant([[0, 0, 0, 0, 1, 0, 1, 0], [0] * 8])
    loss = _same_under_xla(_cell_selection_loss, token_logits, column_logits, labels, tf.constant(CELL_MASK))
    _assert_close(loss, [LN3 + (LN2 + math.log(4 / 3) + LN2) / 3, LN2])


def test_single_column_cell_selection_loss_ties_and_multi_token_cells():
    # Example 1: labels on a' (column 1) and b (column 2): 1 label each, the tie goes to the
    #   first column, 1.
    #   column loss: logits [0, ln 3, 0] -> p(column 1) = 3/5 -> ln(5/3).
    #   cells of column 1 that exist: h1 (cell 1, logit 0, label 0) -> ln 2;
    #   "a a'" (cell 4, logit mean(0, 2 ln 3) = ln 3, label max(0, 1) = 1) -> ln(4/3);
    #   cell 7 is empty (cell_mask 0) and does not count: mean over 2 cells.
    #   The [PAD] label (token 7, column 0) would count for column 0 but is 0.
    # Example 0: one label on d (column 2) -> gold column 2; column logits [0, 0, 0] -> ln 3;
    #   cells of column 2: h2 (logit 0, label 0) -> ln 2, b (logit 0, label 0) -> ln 2,
    #   d (logit ln 3, label 1) -> ln(4/3).
    token_logits = tf.constant([[9, 9, 9, 0, 9, 0, 9, LN3], [9, 9, 0, 9, 0, 2 * LN3, 9, 9]], tf.float32)
    column_logits = tf.constant([[0, 0, 0], [0, LN3, 0]], tf.float32)
    labels = tf.constant([[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 1, 0]])
    loss = _same_under_xla(_cell_selection_loss, token_logits, column_logits, labels, tf.constant(CELL_MASK))
    expected_0 = LN3 + (LN2 + LN2 + math.log(4 / 3)) / 3
    expected_1 = math.log(5 / 3) + (LN2 + math.log(4 / 3)) / 2
    _assert_close(loss, [expected_0, expected_1])


def _selection_logits(token_logits, column_logits, row_ids, column_ids, input_mask):
    _, _, cell_index = _indices(row_ids, column_ids)
    cell_mask, _ = segmented.reduce_mean(input_mask, cell_index)
    return losses.single_column_selection_logits(token_logits, column_logits, cell_index, cell_mask)


def test_single_column_selection_logits():
    # Example 1 is changed so that its padding token sits in cell (row 2, column 1) = 7:
    # that cell is all padding (cell_mask 0) although it is in the selected column.
    row_ids = [ROW_IDS[0], [0, 0, 0, 0, 1, 1, 1, 2]]
    column_ids = [COLUMN_IDS[0], [0, 0, 1, 2, 1, 1, 2, 1]]
    token_logits = tf.constant([[1, 2, 3, 4, 5, 6, 7, 8]] * 2, tf.float32)
    # Example 0: argmax column 2. Example 1: columns 1 and 2 tie -> first, column 1; column 0's
    # logit is low anyway, and column 0 is never selected.
    column_logits = tf.constant([[0, 1, 5], [-10000, 2, 2]], tf.float32)
    logits = _same_under_xla(
        _selection_logits,
        token_logits,
        column_logits,
        tf.constant(row_ids),
        tf.constant(column_ids),
        tf.constant(INPUT_MASK, tf.float32),
    )
    low = losses.CLOSE_ENOUGH_TO_LOG_ZERO
    # Example 0, cell means: [CLS],[SEP] -> 1.5 (column 0), h1 3 and a 5 and c 7 (column 1),
    # h2 4, b 6, d 8 (column 2, kept).
    # Example 1, cell means: [CLS],[SEP] -> 1.5 (column 0), h1 3 and "a a'" (5+6)/2 = 5.5
    # (column 1, kept), h2 4 and b 7 (column 2), [PAD] 8 (column 1 but padding).
    expected = [
        [1.5 + low, 1.5 + low, 3 + low, 4, 5 + low, 6, 7 + low, 8],
        [1.5 + low, 1.5 + low, 3, 4 + low, 5.5, 5.5, 7 + low, 8 + low],
    ]
    _assert_close(logits, expected, atol=1e-3)


def test_per_token_selection_loss():
    # Example 0: labels 1 on tokens 4 (logit ln 3 -> ln(4/3)) and 6 (logit 0 -> ln 2), weighted
    #   by 10; six label-0 tokens with logit 0 -> 6 ln 2. Divided by 8 real tokens.
    # Example 1: token 2 has label 0 and logit ln 3 -> ln 4 = 2 ln 2; token 5 has label 1 and
    #   logit ln 3 -> 10 ln(4/3); tokens 0, 1, 3, 4, 6 -> 5 ln 2; the padding token (label 1,
    #   logit -100) is masked out. Divided by 7 real tokens.
    logits = tf.constant([[0, 0, 0, 0, LN3, 0, 0, 0], [0, 0, LN3, 0, 0, LN3, 0, -100]], tf.float32)
    labels = tf.constant([[0, 0, 0, 0, 1, 0, 1, 0], [0, 0, 0, 0, 0, 1, 0, 1]])
    loss = _same_under_xla(
        lambda *a: losses.per_token_selection_loss(*a, positive_label_weight=10.0),
        logits,
        labels,
        tf.constant(INPUT_MASK),
    )
    _assert_close(loss, [(16 * LN2 + 10 * math.log(4 / 3)) / 8, (7 * LN2 + 10 * math.log(4 / 3)) / 7])


def test_compute_aggregate_mask_routes_by_preference():
    # Logits [ln 6, 0, 0, 0] -> probabilities [6/9, 1/9, 1/9, 1/9]: operator mass 1/3.
    # Logits [ln 2, 0, 0, 0] -> probabilities [2/5, 1/5, 1/5, 1/5]: operator mass 3/5.
    # With preference 0.5:
    #   example 0: numeric answer, answer cells labelled, mass 1/3 <= 0.5 -> cell selection, 0;
    #   example 1: numeric answer, answer cells labelled, mass 3/5 > 0.5 -> aggregation, 1;
    #   example 2: numeric answer, no cell labelled, mass 1/3 -> must aggregate, 1;
    #   example 3: no numeric answer (NaN) -> 0 whatever the mass.
    answer = tf.constant([3.0, 3.0, 3.0, NAN])
    logits = tf.constant([[math.log(6), 0, 0, 0], [LN2, 0, 0, 0], [math.log(6), 0, 0, 0], [LN2, 0, 0, 0]])
    labels = tf.constant([[0, 1, 1], [0, 0, 1], [0, 0, 0], [1, 0, 0]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        mask = losses.compute_aggregate_mask(answer, logits, labels, 0.5)
    _assert_close(mask, [0, 1, 1, 0])
    assert tape.gradient(mask, logits) is None
    compiled = tf.function(losses.compute_aggregate_mask, jit_compile=True)(answer, logits, labels, 0.5)
    _assert_close(compiled, [0, 1, 1, 0])
    with pytest.raises(ValueError, match="cell_selection_preference"):
        losses.compute_aggregate_mask(answer, logits, labels, None)


def test_aggregation_loss_with_answer_supervision():
    # Example 0: logits [ln 2, 0, 0, 0] -> p = [0.4, 0.2, 0.2, 0.2], aggregate_mask 0:
    #   known part -ln p(NONE) = ln 2.5; unknown part 0.
    # Example 1: logits [ln 6, 0, 0, 0] -> p = [2/3, 1/9, 1/9, 1/9], aggregate_mask 1:
    #   known part 0; unknown part -ln(3/9) = ln 3.
    # Weight 2 doubles both.
    logits = tf.constant([[LN2, 0, 0, 0], [math.log(6), 0, 0, 0]])
    loss = _same_under_xla(
        lambda l, m: losses.aggregation_loss(l, m, None, True, 4, 2.0), logits, tf.constant([0.0, 1.0])
    )
    _assert_close(loss, [2 * math.log(2.5), 2 * LN3])


def test_aggregation_loss_with_known_operators():
    # Strong supervision: cross-entropy toward the gold operator, the mask is not used.
    # Example 0: gold AVERAGE (2), p = 0.2 -> ln 5. Example 1: gold NONE (0), p = 2/3 -> ln 1.5.
    logits = tf.constant([[LN2, 0, 0, 0], [math.log(6), 0, 0, 0]])
    loss = _same_under_xla(
        lambda l, ids: losses.aggregation_loss(l, None, ids, False, 4, 1.0), logits, tf.constant([2, 0])
    )
    _assert_close(loss, [math.log(5), math.log(1.5)])
    with pytest.raises(ValueError, match="num_aggregation_labels is 3"):
        losses.aggregation_loss(logits, None, tf.constant([2, 0]), False, 3, 1.0)
    with pytest.raises(ValueError, match="aggregation_function_id"):
        losses.aggregation_loss(logits, None, None, False, 4, 1.0)
    with pytest.raises(ValueError, match="aggregate_mask"):
        losses.aggregation_loss(logits, None, None, True, 4, 1.0)


# Expected-result fixture.
# Example 0: table tokens 4..7 (table_mask = row > 0); the question tokens' 0.9 are masked out.
#   probs [.9 .9 .9 .9 | .5  .5  1.0  0 ], values [nan x4 | 2 nan 4 6], scale [1 x6, 2, 1]
#   -> p = [0 0 0 0 .5 .5 .5 0] (token 6: 1.0 / scale 2).
#   COUNT = 1.5; SUM = .5*2 + .5*0 (NaN) + .5*4 = 3; ratio AVERAGE = 3 / 1.5 = 2.
#   first order: ex = COUNT - p + 1 = 2 for the three tokens -> .5*2/2 + .5*4/2 = 1.5.
#   second order: p(1-p) = .25 each, var of the others = .75 - .25 = .5,
#   multiplier = (.5 / 2^2 + 1) / 2 = .5625 -> (.5*2 + .5*4) * .5625 = 1.6875.
#   Logits [5, 0, 0, 0], temperature 2: operators equally likely -> (SUM + AVG + COUNT) / 3.
# Example 1: table tokens 4..6 ([PAD] has row 0 and its 99 is masked out).
#   p = [0 0 0 0 1 .5 .2 0], values [nan x4 | 10 20 nan 99]
#   COUNT = 1.7; SUM = 10 + 10 = 20; ratio AVERAGE = 20 / 1.7.
#   first order: ex = 1.7 - p + 1 -> 1.7 (token 4), 2.2 (token 5) -> 10/1.7 + 20*.5/2.2.
#   second order: p(1-p) = 0, .25, .16 (sum .41), var of the others = .41 (token 4), .16
#   (token 5) -> 10 * (.41/1.7^2 + 1)/1.7 + 10 * (.16/2.2^2 + 1)/2.2.
#   Logits [0, 2 ln 2, 0, 0] / temperature 2 = [ln 2, 0, 0] over the operators
#   -> weights SUM .5, AVERAGE .25, COUNT .25.
CELL_PROBS = [[0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 1.0, 0.0], [0, 0, 0, 0, 1.0, 0.5, 0.2, 1.0]]
NUMERIC_VALUES = [[NAN] * 4 + [2, NAN, 4, 6], [NAN] * 4 + [10, 20, NAN, 99]]
SCALES = [[1, 1, 1, 1, 1, 1, 2, 1], [1] * 8]
TABLE_MASK = [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 0]]
AGGREGATION_LOGITS = [[5, 0, 0, 0], [0, 2 * LN2, 0, 0]]
AVERAGES = {
    "ratio": (2.0, 20 / 1.7),
    "first_order": (1.5, 10 / 1.7 + 10 / 2.2),
    "second_order": (1.6875, 10 * (0.41 / 1.7**2 + 1) / 1.7 + 10 * (0.16 / 2.2**2 + 1) / 2.2),
}


@pytest.mark.parametrize("function", sorted(AVERAGES))
def test_expected_result(function):
    average_0, average_1 = AVERAGES[function]
    inputs = (CELL_PROBS, NUMERIC_VALUES, SCALES, TABLE_MASK, AGGREGATION_LOGITS)
    args = [tf.constant(x, tf.float32) for x in inputs]
    result = _same_under_xla(lambda *a: losses.expected_result(*a, function, 2.0), *args)
    _assert_close(result, [(3 + average_0 + 1.5) / 3, 0.5 * 20 + 0.25 * average_1 + 0.25 * 1.7])


def test_expected_result_rejects_bad_options():
    args = [tf.constant(x, tf.float32) for x in (CELL_PROBS, NUMERIC_VALUES, SCALES, TABLE_MASK)]
    with pytest.raises(ValueError, match="Unknown average_approximation_function 'median'"):
        losses.expected_result(*args, tf.constant(AGGREGATION_LOGITS), "median", 1.0)
    with pytest.raises(ValueError, match="needs 4 aggregation logits"):
        losses.expected_result(*args, tf.zeros([2, 3]), "ratio", 1.0)


def test_answer_loss_huber_both_sides_and_cutoff():
    # delta 1. Example 0: |2.5 - 2| = .5 <= 1 -> .5 * .5^2 = .125 (quadratic side).
    # Example 1: |5 - 2| = 3 > 1 -> 1 * (3 - .5) = 2.5 (linear side).
    # Example 2: answer NaN (-> 0), aggregate_mask 0 -> Huber(0, 0) = 0.
    # Importance 2 -> [.25, 5, 0]. Cutoff 1: 2.5 > 1 -> mask 0 for example 1 only.
    answer = tf.constant([2.0, 2.0, NAN])
    aggregate_mask = tf.constant([1.0, 1.0, 0.0])
    expected = tf.constant([2.5, 5.0, 7.0])
    loss, large = _same_under_xla(
        lambda *a: losses.answer_loss(*a, 1.0, 1.0, 2.0, False), answer, aggregate_mask, expected
    )
    _assert_close(loss, [0.25, 5.0, 0.0])
    _assert_close(large, [1, 0, 1])
    # No cutoff -> every example kept. Delta 4: example 1 is quadratic now, .5 * 3^2 = 4.5.
    loss, large = losses.answer_loss(answer, aggregate_mask, expected, 4.0, None, 1.0, False)
    _assert_close(loss, [0.125, 4.5, 0.0])
    _assert_close(large, [1, 1, 1])
    with pytest.raises(ValueError, match="huber_loss_delta"):
        losses.answer_loss(answer, aggregate_mask, expected, None, None, 1.0, False)


def test_normalized_answer_loss():
    # Normaliser max(|expected|, |answer|): example 0: 2.5 -> 1 vs .8, error .2 -> .5*.04 = .02;
    # example 1: 5 -> 1 vs .4, error .6 -> .5*.36 = .18. The delta is 1 here whatever
    # huber_loss_delta says (with .1, .2 would fall on the linear side).
    # Gradient with the normaliser n held constant: d/dE .5 (E/n - a/n)^2 = (E - a) / n^2
    #   -> .5 / 6.25 = .08 and 3 / 25 = .12.
    answer = tf.constant([2.0, 2.0])
    expected = tf.constant([2.5, 5.0])
    with tf.GradientTape() as tape:
        tape.watch(expected)
        loss, large = losses.answer_loss(answer, tf.constant([1.0, 1.0]), expected, 0.1, 0.1, 1.0, True)
    _assert_close(loss, [0.02, 0.18])
    _assert_close(large, [1, 0])
    _assert_close(tape.gradient(loss, expected), [0.08, 0.12])


def test_classification_loss():
    # Example 0: logits [ln 3, 0], gold 0 -> -ln(3/4). Example 1: logits [0, 0], gold 1 -> ln 2.
    logits = tf.constant([[LN3, 0.0], [0.0, 0.0]])
    loss = _same_under_xla(losses.classification_loss, logits, tf.constant([0, 1]))
    _assert_close(loss, [math.log(4 / 3), LN2])


def test_bad_index_maps_raise():
    _, col_index, cell_index = _indices()
    token_logits, cell_mask = tf.zeros([2, 8]), tf.constant(CELL_MASK)
    with pytest.raises(ValueError, match="column_logits have 4 columns, cell_index has 3"):
        losses.single_column_selection_logits(token_logits, tf.zeros([2, 4]), cell_index, cell_mask)
    with pytest.raises(ValueError, match="must be a ProductIndexMap"):
        losses.single_column_cell_selection_loss(
            token_logits, tf.zeros([2, 3]), tf.zeros([2, 8], tf.int32), col_index, col_index, cell_mask
        )
