"""Row and column attention (models/restricted_attention.py) against its dense reference.

The input, 2 examples of 40 positions (the second padded after 31):

    positions 0-4    [CLS] question [SEP]       row 0, column 0   (seen by all, sees all)
    positions 5-7    header, one token per column  row 0, columns 1-3
    positions 8-...  body rows of 3 cells, 1-2 tokens each, row ids 1.., columns 1-3

No row or column is longer than the block (16), so the linear attention must equal dense
attention under `dense_mask` exactly (to float error), head by head.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.restricted_attention import dense_mask, restricted_attention  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering  # noqa: E402

LENGTH, HEADS, DIM = 40, 4, 8


def segments_of(real: int, seed: int):
    rng = np.random.default_rng(seed)
    rows, columns = [0] * 5 + [0, 0, 0], [0] * 5 + [1, 2, 3]
    row = 1
    while len(rows) < real:
        for column in (1, 2, 3):
            for _ in range(rng.integers(1, 3)):
                if len(rows) < real:
                    rows.append(row)
                    columns.append(column)
        row += 1
    mask = [1] * real + [0] * (LENGTH - real)
    pad = [0] * (LENGTH - real)
    return np.array([rows + pad, columns + pad, mask], np.int32)


@pytest.mark.parametrize("row_heads", [0, 2, 4])
def test_linear_row_and_column_attention_equals_the_dense_reference(row_heads):
    segments = tf.constant(np.stack([segments_of(LENGTH, 0), segments_of(31, 1)]))
    rng = np.random.default_rng(2)
    query, key, value = (tf.constant(rng.normal(size=(2, LENGTH, HEADS, DIM)), tf.float32) for _ in range(3))
    linear = restricted_attention(query, key, value, segments, row_heads=row_heads, block_size=16, global_tokens=8)
    mask = dense_mask(segments, HEADS, row_heads, global_tokens=8)
    scores = tf.einsum("bqnd,bknd->bnqk", query, key) + (1.0 - mask) * -1e9
    dense = tf.einsum("bnqk,bknd->bqnd", tf.nn.softmax(scores, axis=-1), value)
    real = segments[:, 2][:, :, None, None] > 0  # Padding queries' outputs are never read.
    np.testing.assert_allclose(tf.where(real, linear, 0.0).numpy(), tf.where(real, dense, 0.0).numpy(), atol=1e-5)


@pytest.mark.parametrize("length, block, global_tokens", [(8, 32, 64), (12, 4, 64), (40, 64, 8)])
def test_sequences_shorter_than_a_block_or_the_question_window(length, block, global_tokens):
    segments = tf.constant(segments_of(LENGTH, 0)[None, :, :length])
    rng = np.random.default_rng(3)
    query, key, value = (tf.constant(rng.normal(size=(1, length, HEADS, DIM)), tf.float32) for _ in range(3))
    linear = restricted_attention(query, key, value, segments, row_heads=2, block_size=block,
                                  global_tokens=global_tokens)
    mask = dense_mask(segments, HEADS, 2, global_tokens=global_tokens)
    scores = tf.einsum("bqnd,bknd->bnqk", query, key) + (1.0 - mask) * -1e9
    dense = tf.einsum("bnqk,bknd->bqnd", tf.nn.softmax(scores, axis=-1), value)
    if length > block + 1:  # Rows and columns longer than a block are read in stretches (not exact).
        assert linear.shape == dense.shape
    else:
        np.testing.assert_allclose(linear.numpy(), dense.numpy(), atol=1e-5)


def test_the_rule_row_heads_see_their_row_column_heads_their_column_all_see_the_question():
    segments = tf.constant(segments_of(LENGTH, 0)[None])
    mask = dense_mask(segments, 2, 1, global_tokens=8).numpy()[0]
    rows, columns = segments.numpy()[0, 0], segments.numpy()[0, 1]
    body = [p for p in range(8, LENGTH)]
    for q in body:
        for k in body:
            assert mask[0, q, k] == (rows[q] == rows[k])
            assert mask[1, q, k] == (columns[q] == columns[k])
        assert mask[:, q, :5].all() and mask[:, :5, q].all()


def test_a_model_with_row_column_attention_builds_trains_a_step_and_round_trips_its_config():
    config = TapasConfig.from_preset("tiny", attention_mode="row_column", attention_block_size=16,
                                     global_attention_tokens=8, max_position_embeddings=64)
    model = TapasForQuestionAnswering(config)
    segments = segments_of(LENGTH, 0)
    features = {name: tf.zeros((1, LENGTH), tf.int32) for name in (
        "input_ids", "segment_ids", "prev_label_ids", "column_ranks", "inv_column_ranks", "numeric_relations")}
    features.update(row_ids=tf.constant(segments[None, 0]), column_ids=tf.constant(segments[None, 1]),
                    input_mask=tf.constant(segments[None, 2]))
    outputs = model(features)
    assert outputs["probabilities"].shape == (1, LENGTH)
    with tf.GradientTape() as tape:  # Training: dropout and the fused block path read the segments too.
        loss = tf.reduce_sum(model(features, training=True)["probabilities"])
    gradients = tape.gradient(loss, model.trainable_variables)
    query_kernel = [g for v, g in zip(model.trainable_variables, gradients) if "query" in v.name]
    assert query_kernel and all(g is not None and np.isfinite(g.numpy()).all() for g in query_kernel)
    assert model.encoder.transformer_layers[0]._attention_layer.restricted == (1, 16, 8)  # tiny: 2 heads.
    assert TapasConfig.from_dict(config.to_dict()) == config
    block = model.encoder.transformer_layers[0]
    assert block.get_config()["attention_mode"] == "row_column"
    with pytest.raises(ValueError, match="attention_mode"):
        TapasConfig.from_preset("tiny", attention_mode="sparse")
