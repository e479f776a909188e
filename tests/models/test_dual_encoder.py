"""The retrieval dual encoder: config, towers, pooling, serialisation and the in-batch loss."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tapas_tf.models.dual_encoder import (
    QUESTION_IDS,
    QUESTION_MASK,
    DualEncoderConfig,
    TableDualEncoder,
    TowerPooling,
    dummy_retrieval_features,
)
from tapas_tf.models.losses import in_batch_retrieval_loss
from tests.model_fixtures import tiny_config


def _config(**overrides) -> DualEncoderConfig:
    values = dict(encoder=tiny_config(), projection_dim=8, max_query_length=16, max_table_length=32)
    values.update(overrides)
    return DualEncoderConfig(**values)


def _model(**overrides) -> TableDualEncoder:
    tf.random.set_seed(3)
    model = TableDualEncoder(_config(**overrides))
    model(dummy_retrieval_features())
    return model


def _features(batch: int = 3, table_length: int = 10, query_length: int = 6) -> dict:
    rng = np.random.default_rng(0)
    features = {k: tf.constant(v) for k, v in dummy_retrieval_features(batch, table_length, query_length).items()}
    features["input_ids"] = tf.constant(rng.integers(1, 20, size=(batch, table_length)), tf.int32)
    features["segment_ids"] = tf.constant([[0] * 4 + [1] * (table_length - 4)] * batch, tf.int32)
    features["column_ids"] = tf.constant([[0] * 4 + [1, 2] * ((table_length - 4) // 2)] * batch, tf.int32)
    features[QUESTION_IDS] = tf.constant(rng.integers(1, 20, size=(batch, query_length)), tf.int32)
    return features


def test_config_round_trips_through_a_dict_and_a_file(tmp_path):
    config = _config(pooling="mean", normalize=True, logit_scale=20.0)
    assert DualEncoderConfig.from_dict(config.to_dict()) == config
    config.to_json_file(tmp_path / "dual_encoder.json")
    assert DualEncoderConfig.from_json_file(tmp_path / "dual_encoder.json") == config
    assert config.embedding_dim == 8
    assert _config(projection_dim=0).embedding_dim == 32


@pytest.mark.parametrize("changes, message", [
    ({"pooling": "max"}, "pooling must be one of pooled, cls, mean"),
    ({"projection_dim": -1}, "projection_dim must be 0"),
    ({"max_query_length": 2}, r"max_query_length must be in \[3, 256\]"),
    ({"max_table_length": 257}, r"max_table_length must be in \[3, 256\]"),
    ({"logit_scale": 0.0}, "logit_scale must be positive"),
])
def test_config_refuses_bad_values(changes, message):
    with pytest.raises(ValueError, match=message):
        _config(**changes)


def test_config_refuses_unknown_keys():
    with pytest.raises(ValueError, match="Unknown DualEncoderConfig keys: temperature"):
        DualEncoderConfig.from_dict({**_config().to_dict(), "temperature": 1.0})


def test_towers_give_one_vector_per_question_and_per_table():
    model = _model()
    outputs = model(_features(batch=3))
    assert outputs["query_embeddings"].shape == (3, 8)
    assert outputs["table_embeddings"].shape == (3, 8)
    # Either half alone.
    assert set(model({QUESTION_IDS: _features()[QUESTION_IDS], QUESTION_MASK: _features()[QUESTION_MASK]})) == {
        "query_embeddings"}


def test_the_query_tower_sees_every_token_type_at_zero():
    """A question is encoded as the table tower would encode it with an empty table."""
    model = _model(share_encoders=True)
    features = _features(batch=2)
    query = model.embed_queries(features[QUESTION_IDS], features[QUESTION_MASK])
    as_table = dummy_retrieval_features(2, 6)
    as_table["input_ids"] = features[QUESTION_IDS]
    pooled = model.pooling(model.table_encoder(as_table), as_table["input_mask"])
    # Shared encoders, but each tower has its own projection.
    np.testing.assert_allclose(query.numpy(), model.query_projection(pooled).numpy(), atol=1e-5)


def test_mean_pooling_ignores_padding():
    model = _model(pooling="mean")
    features = _features(batch=2, query_length=6)
    mask = tf.constant([[1, 1, 1, 1, 0, 0]] * 2, tf.int32)
    ids = features[QUESTION_IDS].numpy()
    other = ids.copy()
    other[:, 4:] = 7  # Different ids under the padding.
    first = model.embed_queries(tf.constant(ids), mask)
    second = model.embed_queries(tf.constant(other), mask)
    np.testing.assert_allclose(first.numpy(), second.numpy(), atol=1e-5)
    shorter = model.embed_queries(tf.constant(ids[:, :4]), mask[:, :4])
    np.testing.assert_allclose(first.numpy(), shorter.numpy(), atol=1e-5)


def test_pooling_layer_values_on_a_hand_made_sequence():
    sequence = tf.constant([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    outputs = {"sequence_output": sequence, "pooled_output": tf.constant([[0.5, -0.5]])}
    mask = tf.constant([[1, 1, 0]])
    np.testing.assert_allclose(TowerPooling("mean")(outputs, mask).numpy(), [[2.0, 3.0]])
    np.testing.assert_allclose(TowerPooling("cls")(outputs, mask).numpy(), [[1.0, 2.0]])
    np.testing.assert_allclose(TowerPooling("pooled")(outputs, mask).numpy(), [[0.5, -0.5]])
    assert TowerPooling.from_config(TowerPooling("mean").get_config()).pooling == "mean"


def test_normalize_gives_unit_vectors():
    outputs = _model(normalize=True)(_features())
    for name in ("query_embeddings", "table_embeddings"):
        np.testing.assert_allclose(np.linalg.norm(outputs[name].numpy(), axis=1), 1.0, atol=1e-5)


def test_no_projection_keeps_the_hidden_size():
    model = _model(projection_dim=0)
    assert model(_features())["table_embeddings"].shape == (3, 32)
    assert "table_projection" not in model.weight_map()


def test_weight_map_has_google_names_and_shared_towers_share_variables():
    separate = _model().weight_map()
    assert "bert/encoder/layer_0/attention/self/query/kernel" in separate
    assert "bert_1/encoder/layer_1/output/LayerNorm/gamma" in separate
    assert separate["table_projection"].shape == (32, 8)
    assert separate["text_projection"].shape == (32, 8)
    assert separate["bert/embeddings/word_embeddings"] is not separate["bert_1/embeddings/word_embeddings"]
    shared = _model(share_encoders=True).weight_map()
    assert shared["bert/embeddings/word_embeddings"] is shared["bert_1/embeddings/word_embeddings"]


def test_from_config_of_get_config_computes_the_same_embeddings():
    model = _model()
    copy = TableDualEncoder.from_config(model.get_config())
    copy(dummy_retrieval_features())
    copy.set_weights(model.get_weights())
    features = _features()
    for name, value in model(features).items():
        np.testing.assert_allclose(copy(features)[name].numpy(), value.numpy(), atol=1e-6)
    assert copy.dual_config == model.dual_config


def test_in_batch_loss_on_a_hand_computed_case():
    queries = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    tables = tf.constant([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # gold 0, gold 1, a hard negative
    loss = in_batch_retrieval_loss(queries, tables).numpy()
    # Question 0's logits: [2, 0, 1], gold 0; question 1's: [0, 1, 1], gold 1.
    expected = [-2 + math.log(math.exp(2) + 1 + math.e), -1 + math.log(1 + 2 * math.e)]
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    scaled = in_batch_retrieval_loss(queries, tables, logit_scale=2.0).numpy()
    np.testing.assert_allclose(scaled[0], -4 + math.log(math.exp(4) + 1 + math.exp(2)), rtol=1e-6)


def test_in_batch_loss_masks_another_copy_of_the_gold_table():
    queries = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    tables = tf.constant([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    # Table 2 is question 1's gold table again (another question of the batch on the same table).
    ids = tf.constant([10, 11, 11], tf.int64)
    loss = in_batch_retrieval_loss(queries, tables, table_ids=ids).numpy()
    np.testing.assert_allclose(loss[0], -2 + math.log(math.exp(2) + 1 + math.e), rtol=1e-6)
    np.testing.assert_allclose(loss[1], -1 + math.log(1 + math.e), rtol=1e-5)


def test_the_loss_trains_the_towers_to_match():
    """A few steps of in-batch training put each question's table first."""
    model = _model(normalize=True, logit_scale=10.0)
    features = _features(batch=4)
    # Each table and question gets tokens of its own: random ids can make two tables nearly equal at
    # initialisation, and then 40 steps do not always pull them apart.
    features["input_ids"] = tf.constant([[2 + 3 * i + j % 3 for j in range(10)] for i in range(4)], tf.int32)
    features[QUESTION_IDS] = tf.constant([[2 + 3 * i + j % 2 for j in range(6)] for i in range(4)], tf.int32)
    optimizer = tf_keras.optimizers.Adam(1e-3)
    for _ in range(40):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = tf.reduce_mean(in_batch_retrieval_loss(outputs["query_embeddings"], outputs["table_embeddings"],
                                                          logit_scale=10.0))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    outputs = model(features)
    scores = outputs["query_embeddings"].numpy() @ outputs["table_embeddings"].numpy().T
    assert list(scores.argmax(axis=1)) == [0, 1, 2, 3]
