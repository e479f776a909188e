"""Tests of models/heads.py with hand-set weights on a hand-drawn table.

One example, max_num_rows = 3, max_num_columns = 4 (column 3 never occurs: a padding column),
hidden size 2. Feature 0 of a token feeds the token logit, feature 1 the column logit:

    token       [CLS] h1  h2  a   b   c   c'  [PAD]
    row           0   0   0   1   1   2   2   0
    column        0   1   2   1   2   1   1   0
    input_mask    1   1   1   1   1   1   1   0
    h[:, 0]       0   1   2   3   4   5   6   7
    h[:, 1]       1   2   4   6   8   10  20  100

Token logits with w = [1, 0], b = 0.5, temperature 2: (h0 + 0.5) / 2.

Column logits with w_col = [0, 1], b_col = 1: token values h1 + 1 = 2 3 5 7 9 11 21 101.
Cell means: (0,0) = ([CLS] 2 + [PAD] 101) / 2 = 51.5 with cell_mask = mean(1, 0) = 0.5;
(0,1) = 3, (1,1) = 7, (2,1) = (11 + 21) / 2 = 16; (0,2) = 5, (1,2) = 9; other cells are empty.
Column means over existing cells, weighted by cell_mask:
  column 0: 51.5 * 0.5 / 0.5 = 51.5, then -10000 (column 0 not allowed) -> -9948.5
  column 1: (3 + 7 + 16) / 3 = 26 / 3
  column 2: (5 + 9) / 2 = 7
  column 3: no cell: 0 / (0 + 1e-10) = 0, then -10000 (padding column) -> -10000
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.models import segmented  # noqa: E402
from tapas_tf.models.heads import AggregationHead, CellSelectionHead, ClassificationHead  # noqa: E402

SEQUENCE_OUTPUT = tf.constant(
    [[[0, 1], [1, 2], [2, 4], [3, 6], [4, 8], [5, 10], [6, 20], [7, 100]]], tf.float32
)
FEATURES = {
    "row_ids": tf.constant([[0, 0, 0, 1, 1, 2, 2, 0]]),
    "column_ids": tf.constant([[0, 1, 2, 1, 2, 1, 1, 0]]),
}
INPUT_MASK = tf.constant([[1, 1, 1, 1, 1, 1, 1, 0]], tf.float32)


def _indices():
    _, _, cell_index = segmented.table_indices(FEATURES, max_num_rows=3, max_num_columns=4)
    cell_mask, _ = segmented.reduce_mean(INPUT_MASK, cell_index)
    return cell_index, cell_mask


def _cell_head(**kwargs) -> CellSelectionHead:
    head = CellSelectionHead(**kwargs)
    head.build(SEQUENCE_OUTPUT.shape)
    head.output_weights.assign([1.0, 0.0])
    head.output_bias.assign(0.5)
    if head.select_one_column:
        head.column_output_weights.assign([0.0, 1.0])
        head.column_output_bias.assign(1.0)
    return head


def test_token_and_column_logits():
    cell_index, cell_mask = _indices()
    outputs = _cell_head(temperature=2.0)(SEQUENCE_OUTPUT, cell_index=cell_index, cell_mask=cell_mask)
    np.testing.assert_allclose(
        outputs["token_logits"].numpy(), [[0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75]], rtol=1e-6
    )
    np.testing.assert_allclose(outputs["column_logits"].numpy(), [[-9948.5, 26 / 3, 7.0, -10000.0]], rtol=1e-6)


def test_allow_empty_column_selection_keeps_column_zero():
    cell_index, cell_mask = _indices()
    outputs = _cell_head(allow_empty_column_selection=True)(SEQUENCE_OUTPUT, cell_index=cell_index, cell_mask=cell_mask)
    np.testing.assert_allclose(outputs["column_logits"].numpy(), [[51.5, 26 / 3, 7.0, -10000.0]], rtol=1e-6)


def test_without_column_selection():
    head = _cell_head(select_one_column=False)
    outputs = head(SEQUENCE_OUTPUT)
    assert set(outputs) == {"token_logits"}
    np.testing.assert_allclose(outputs["token_logits"].numpy()[0, :2], [0.5, 1.5])
    assert set(head.weight_map()) == {"output_weights", "output_bias"}


def test_column_selection_needs_indices():
    with pytest.raises(ValueError, match="needs cell_index and cell_mask"):
        _cell_head()(SEQUENCE_OUTPUT)


def test_cell_weights_initialisation():
    tf_keras.utils.set_random_seed(5)
    zero = CellSelectionHead(init_cell_selection_weights_to_zero=True)
    zero.build((None, None, 64))
    assert not zero.output_weights.numpy().any() and not zero.column_output_weights.numpy().any()
    normal = CellSelectionHead(initializer_range=0.02)
    normal.build((None, None, 64))
    weights = normal.output_weights.numpy()
    # Truncated normal: nonzero, within two standard deviations.
    assert weights.any() and np.abs(weights).max() <= 0.04
    assert normal.output_bias.shape == () and normal.column_output_bias.shape == ()
    shapes = {name: tuple(v.shape) for name, v in normal.weight_map().items()}
    assert shapes == {
        "output_weights": (64,),
        "output_bias": (),
        "column_output_weights": (64,),
        "column_output_bias": (),
    }


def test_temperature_must_be_positive():
    with pytest.raises(ValueError, match="temperature must be positive"):
        CellSelectionHead(temperature=0.0)


@pytest.mark.parametrize("head_class, suffix", [(AggregationHead, "agg"), (ClassificationHead, "cls")])
def test_pooled_heads(head_class, suffix):
    head = head_class(num_labels=3)
    pooled = tf.constant([[1.0, 2.0], [0.0, -1.0]])
    head(pooled)
    # TF1 layout [num_labels, hidden]: logits = pooled . W^T + b.
    head.output_weights.assign([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    head.output_bias.assign([0.0, 0.5, -1.0])
    # Example 0: [1, 2 + 0.5, 3 - 1]; example 1: [0, -1 + 0.5, -1 - 1].
    np.testing.assert_allclose(head(pooled).numpy(), [[1.0, 2.5, 2.0], [0.0, -0.5, -2.0]])
    shapes = {name: tuple(v.shape) for name, v in head.weight_map().items()}
    assert shapes == {f"output_weights_{suffix}": (3, 2), f"output_bias_{suffix}": (3,)}


@pytest.mark.parametrize("head_class", [AggregationHead, ClassificationHead])
def test_pooled_heads_need_labels(head_class):
    with pytest.raises(ValueError, match="positive int num_labels"):
        head_class(num_labels=0)


@pytest.mark.parametrize(
    "layer",
    [
        CellSelectionHead(
            temperature=0.5,
            initializer_range=0.1,
            init_cell_selection_weights_to_zero=True,
            select_one_column=False,
            allow_empty_column_selection=True,
            name="cell_selection",
        ),
        AggregationHead(num_labels=4, initializer_range=0.05, name="aggregation"),
        ClassificationHead(num_labels=2, name="classification"),
    ],
)
def test_get_config_round_trip(layer):
    config = layer.get_config()
    restored = type(layer).from_config(config)
    assert restored.get_config() == config
    clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    assert type(clone) is type(layer) and clone.get_config() == config
