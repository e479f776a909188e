"""Tests of models/segmented.py on a hand-drawn batch of two tiny tables.

Both examples use max_num_rows = 3 and max_num_columns = 3, so cell id = row * 3 + column and
there are 9 cells. Values are the numbers under the tokens.

Example 0 (no padding):

    [CLS] [SEP]            row 0, column 0  -> cell 0
    +----+----+
    | h1 | h2 |            row 0            -> cells 1, 2
    | a  | b  |            row 1            -> cells 4, 5
    | c  | d  |            row 2            -> cells 7, 8
    +----+----+
    token   [CLS] [SEP] h1 h2 a  b  c  d
    row       0     0   0  0  1  1  2  2
    column    0     0   1  2  1  2  1  2
    cell      0     0   1  2  4  5  7  8
    value     1     2   3  4  5  6  7  8

Example 1 (one two-token cell "a a'", row 2 missing, last token is padding in cell 0):

    [CLS] [SEP]
    +------+----+
    | h1   | h2 |
    | a a' | b  |
    +------+----+
    token   [CLS] [SEP] h1 h2 a  a' b  [PAD]
    row       0     0   0  0  1  1  1  0
    column    0     0   1  2  1  1  2  0
    cell      0     0   1  2  4  4  5  0
    value    -1    -2  -3 -4 -5 -6 -7 -8
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.models import segmented  # noqa: E402

ROW_IDS = [[0, 0, 0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1, 1, 0]]
COLUMN_IDS = [[0, 0, 1, 2, 1, 2, 1, 2], [0, 0, 1, 2, 1, 1, 2, 0]]
VALUES = [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]]


def _cell_index():
    features = {"row_ids": tf.constant(ROW_IDS), "column_ids": tf.constant(COLUMN_IDS)}
    return segmented.table_indices(features, max_num_rows=3, max_num_columns=3)


def _assert_close(actual, expected, atol=1e-5):
    expected = np.asarray(expected, dtype=np.float64)
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-6, atol=atol)


def test_product_index_map_indices_and_projections():
    row_index, col_index, cell_index = _cell_index()
    assert cell_index.num_segments == 9 and cell_index.batch_dims == 1
    # cell = row * 3 + column, e.g. example 0 token "c": 2 * 3 + 1 = 7.
    np.testing.assert_array_equal(cell_index.indices, [[0, 0, 1, 2, 4, 5, 7, 8], [0, 0, 1, 2, 4, 4, 5, 0]])
    # Projections of the token-level cell ids give back rows (id // 3) and columns (id % 3).
    np.testing.assert_array_equal(cell_index.project_outer(cell_index).indices, ROW_IDS)
    np.testing.assert_array_equal(cell_index.project_inner(cell_index).indices, COLUMN_IDS)
    # Projections of the cell segments 0..8: rows 0,0,0,1,1,1,2,2,2 and columns 0,1,2,0,1,2,...
    cells = segmented.range_index_map([2], 9)
    outer, inner = cell_index.project_outer(cells), cell_index.project_inner(cells)
    assert outer.num_segments == row_index.num_segments == 3
    assert inner.num_segments == col_index.num_segments == 3
    np.testing.assert_array_equal(outer.indices, [[0, 0, 0, 1, 1, 1, 2, 2, 2]] * 2)
    np.testing.assert_array_equal(inner.indices, [[0, 1, 2, 0, 1, 2, 0, 1, 2]] * 2)


def test_table_indices_clamp_rows_and_columns():
    # Row 5 > max_num_rows - 1 = 2 -> 2; columns 3 and 7 > max_num_columns - 1 = 2 -> 2.
    features = {
        "row_ids": tf.constant([[0, 0, 1, 5], [0, 2, 3, 1]]),
        "column_ids": tf.constant([[0, 3, 1, 7], [0, 2, 1, 4]]),
    }
    row_index, col_index, cell_index = segmented.table_indices(features, max_num_rows=3, max_num_columns=3)
    np.testing.assert_array_equal(row_index.indices, [[0, 0, 1, 2], [0, 2, 2, 1]])
    np.testing.assert_array_equal(col_index.indices, [[0, 2, 1, 2], [0, 2, 1, 2]])
    # cells: 0*3+0, 0*3+2, 1*3+1, 2*3+2 | 0, 2*3+2, 2*3+1, 1*3+2.
    np.testing.assert_array_equal(cell_index.indices, [[0, 2, 4, 8], [0, 8, 7, 5]])
    assert (row_index.num_segments, col_index.num_segments, cell_index.num_segments) == (3, 3, 9)


def test_reduce_sum_and_mean_per_cell():
    _, _, cell_index = _cell_index()
    sums, output_index = segmented.reduce_sum(tf.constant(VALUES), cell_index)
    # Example 0: cell 0 = 1 + 2 = 3, cells 3 and 6 are empty -> 0.
    # Example 1: cell 0 = -1 - 2 - 8 = -11 (padding is just a token of cell 0 here),
    #            cell 4 = -5 - 6 = -11, cells 3, 6, 7, 8 empty -> 0.
    _assert_close(sums, [[3, 3, 4, 0, 5, 6, 0, 7, 8], [-11, -3, -4, 0, -11, -7, 0, 0, 0]])
    np.testing.assert_array_equal(output_index.indices, [list(range(9))] * 2)
    assert output_index.num_segments == 9 and output_index.batch_dims == 1
    means, _ = segmented.reduce_mean(tf.constant(VALUES), cell_index)
    # Example 0: cell 0 = 3 / 2 = 1.5. Example 1: cell 0 = -11 / 3, cell 4 = -11 / 2 = -5.5.
    _assert_close(means, [[1.5, 3, 4, 0, 5, 6, 0, 7, 8], [-11 / 3, -3, -4, 0, -5.5, -7, 0, 0, 0]])


def test_reduce_max_and_min_give_zero_for_empty_segments():
    _, _, cell_index = _cell_index()
    maxima, _ = segmented.reduce_max(tf.constant(VALUES), cell_index)
    minima, _ = segmented.reduce_min(tf.constant(VALUES), cell_index)
    # Example 1: cell 0 holds -1, -2, -8 -> max -1, min -8; cell 4 holds -5, -6 -> max -5,
    # min -6. Empty cells give 0 (as HF's zero-initialised scatter), not -inf / +inf, even
    # though 0 is larger than every real value of example 1.
    _assert_close(maxima, [[2, 3, 4, 0, 5, 6, 0, 7, 8], [-1, -3, -4, 0, -5, -7, 0, 0, 0]])
    _assert_close(minima, [[1, 3, 4, 0, 5, 6, 0, 7, 8], [-8, -3, -4, 0, -6, -7, 0, 0, 0]])


def test_reduce_per_row_and_column():
    row_index, col_index, _ = _cell_index()
    row_sums, _ = segmented.reduce_sum(tf.constant(VALUES), row_index)
    # Example 0: row 0 = 1+2+3+4 = 10, row 1 = 5+6 = 11, row 2 = 7+8 = 15.
    # Example 1: row 0 = -1-2-3-4-8 = -18, row 1 = -5-6-7 = -18, row 2 empty = 0.
    _assert_close(row_sums, [[10, 11, 15], [-18, -18, 0]])
    column_means, _ = segmented.reduce_mean(tf.constant(VALUES), col_index)
    # Example 0: column 0 = (1+2)/2, column 1 = (3+5+7)/3 = 5, column 2 = (4+6+8)/3 = 6.
    # Example 1: column 0 = (-1-2-8)/3, column 1 = (-3-5-6)/3, column 2 = (-4-7)/2.
    _assert_close(column_means, [[1.5, 5, 6], [-11 / 3, -14 / 3, -5.5]])


def test_reduce_vector_values_and_integers():
    _, col_index, _ = _cell_index()
    vectors = tf.stack([tf.constant(VALUES), 10.0 * tf.constant(VALUES)], axis=-1)  # [2, 8, 2]
    sums, _ = segmented.reduce_sum(vectors, col_index)
    # Column sums of example 0: 3, 15, 18; the second component is ten times the first.
    assert sums.shape == (2, 3, 2)
    _assert_close(sums[0], [[3, 30], [15, 150], [18, 180]])
    labels = tf.constant([[0, 0, 0, 0, 1, 0, 1, 0], [0, 0, 0, 0, 0, 1, 0, 1]])
    maxima, _ = segmented.reduce_max(labels, col_index)
    # Integers stay integers; example 1: column 0 has the padding label 1, column 1 has a' = 1.
    assert maxima.dtype == tf.int32
    np.testing.assert_array_equal(maxima, [[0, 1, 0], [1, 1, 0]])
    means, _ = segmented.reduce_mean(tf.constant([[1, 2, 3, 3, 4, 4, 5, 6]] * 2), col_index)
    # Example 0, column 0 = (1+2)/2 = 1.5 -> 1 (integer means truncate, as HF).
    # Column 1 = (3+4+5)/3 = 4, column 2 = (3+4+6)/3 = 4.33 -> 4.
    assert means.dtype == tf.int32
    np.testing.assert_array_equal(means[0], [1, 4, 4])


def test_gather_spreads_cell_values_back_to_tokens():
    _, _, cell_index = _cell_index()
    means, _ = segmented.reduce_mean(tf.constant(VALUES), cell_index)
    # Every token gets its cell's mean: "a" and "a'" share -5.5, [PAD] shares cell 0's -11/3.
    _assert_close(
        segmented.gather(means, cell_index),
        [[1.5, 1.5, 3, 4, 5, 6, 7, 8], [-11 / 3, -11 / 3, -3, -4, -5.5, -5.5, -7, -11 / 3]],
    )
    vectors = tf.stack([means, -means], axis=-1)
    gathered = segmented.gather(vectors, cell_index)
    assert gathered.shape == (2, 8, 2)
    _assert_close(gathered[1, 4], [-5.5, 5.5])


def test_flatten_and_range_index_map():
    _, _, cell_index = _cell_index()
    flat = segmented.flatten(cell_index)
    # Example 1's ids move up by num_segments = 9.
    np.testing.assert_array_equal(flat.indices, [0, 0, 1, 2, 4, 5, 7, 8, 9, 9, 10, 11, 13, 13, 14, 9])
    assert flat.num_segments == 18 and flat.batch_dims == 0
    ranges = segmented.range_index_map([2], 3)
    np.testing.assert_array_equal(ranges.indices, [[0, 1, 2], [0, 1, 2]])
    assert ranges.num_segments == 3 and ranges.batch_dims == 1


def test_docstring_worked_example():
    features = {
        "row_ids": tf.constant([[0, 0, 0, 0, 0, 0, 1, 1, 2, 2]]),
        "column_ids": tf.constant([[0, 0, 0, 0, 1, 2, 1, 2, 2, 2]]),
    }
    _, _, cell_index = segmented.table_indices(features, 3, 3)
    cell_logits, cells = segmented.reduce_mean(tf.constant([[1.0, 1, 1, 1, 2, 3, 4, 5, 6, 8]]), cell_index)
    _assert_close(cell_logits, [[1, 2, 3, 0, 4, 5, 0, 0, 7]])
    column_logits, _ = segmented.reduce_max(cell_logits, cell_index.project_inner(cells))
    _assert_close(column_logits, [[1, 4, 7]])
    _assert_close(segmented.gather(cell_logits, cell_index), [[1, 1, 1, 1, 2, 3, 4, 5, 7, 7]])


def _all_ops(values, row_ids, column_ids):
    features = {"row_ids": row_ids, "column_ids": column_ids}
    _, col_index, cell_index = segmented.table_indices(features, 3, 3)
    results = [segmented.reduce_sum(values, cell_index)[0], segmented.reduce_mean(values, cell_index)[0]]
    results += [segmented.reduce_max(values, cell_index)[0], segmented.reduce_min(values, cell_index)[0]]
    results.append(segmented.gather(results[1], cell_index))
    results.append(segmented.reduce_sum(values[..., None] * tf.ones([2]), col_index)[0])
    results.append(segmented.reduce_max(tf.cast(values, tf.int32), cell_index)[0])
    results.append(cell_index.project_inner(cell_index).indices)
    results.append(segmented.flatten(cell_index).indices)
    return results


def test_xla_gives_the_same_results():
    args = (tf.constant(VALUES), tf.constant(ROW_IDS), tf.constant(COLUMN_IDS))
    eager = _all_ops(*args)
    compiled = tf.function(_all_ops, jit_compile=True)(*args)
    for expected, actual in zip(eager, compiled):
        np.testing.assert_array_equal(actual, expected)


def test_dynamic_batch_keeps_static_segment_dimension():
    spec = [tf.TensorSpec([None, None], tf.float32)] + [tf.TensorSpec([None, None], tf.int32)] * 2
    traced = tf.function(_all_ops, input_signature=spec, jit_compile=True)
    concrete = traced.get_concrete_function()
    assert concrete.structured_outputs[0].shape.as_list() == [None, 9]
    assert concrete.structured_outputs[5].shape.as_list() == [None, 3, 2]
    outputs = traced(tf.constant(VALUES), tf.constant(ROW_IDS), tf.constant(COLUMN_IDS))
    _assert_close(outputs[0][1], [-11, -3, -4, 0, -11, -7, 0, 0, 0])


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="must be integers"):
        segmented.IndexMap(tf.constant([[0.0, 1.0]]), 2)
    with pytest.raises(ValueError, match="num_segments must be positive"):
        segmented.IndexMap(tf.constant([[0, 1]]), 0)
    with pytest.raises(ValueError, match="batch_dims"):
        segmented.IndexMap(tf.constant([[0, 1]]), 2, batch_dims=3)
    with pytest.raises(ValueError, match="same batch_dims"):
        segmented.ProductIndexMap(segmented.IndexMap([[0, 1]], 2, 1), segmented.IndexMap([[0, 1]], 2, 0))
    with pytest.raises(ValueError, match="column_ids"):
        segmented.table_indices({"row_ids": tf.constant(ROW_IDS)}, 3, 3)
    with pytest.raises(ValueError, match="max_num_rows must be a positive int"):
        features = {"row_ids": tf.constant(ROW_IDS), "column_ids": tf.constant(COLUMN_IDS)}
        segmented.table_indices(features, 0, 3)
    _, _, cell_index = _cell_index()
    with pytest.raises(ValueError, match="do not start with the index shape"):
        segmented.reduce_sum(tf.zeros([2, 7]), cell_index)
    with pytest.raises(ValueError, match="values have 3 segments on axis 1, the index has 9"):
        segmented.gather(tf.zeros([2, 3]), cell_index)
