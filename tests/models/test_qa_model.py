"""Tests of models/qa_model.py on a hand-built batch of two 2x2 tables (seq_len 24).

Example 0, a cell selection question (answer "c", no scalar answer):

    [CLS] which one [SEP]           tokens 0-3, row 0, column 0
    +-----+-------+
    | h1  | h2    |                 tokens 4, 5: row 0, columns 1, 2
    | a   | b     |                 tokens 6, 7: row 1
    | c c'| d     |                 tokens 8, 9 (one cell), 10: row 2
    +-----+-------+                 tokens 11-23: padding
    label_ids = 1 on tokens 8 and 9; answer NaN; aggregation NONE (0).

Example 1, a scalar answer 8 = 3 + 5 (SUM of column 1):

    [CLS] total [SEP]               tokens 0-2
    +-----+-----+
    | n   | m   |                   tokens 3, 4
    | 3   | x   |                   tokens 5, 6
    | 5   | y   |                   tokens 7, 8
    +-----+-----+                   tokens 9-23: padding
    label_ids = 1 on tokens 5 and 7 (the summed cells); answer 8; aggregation SUM (1);
    numeric_values 3 and 5 on tokens 5 and 7, NaN elsewhere.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402

SEQ = 24
NAN = float("nan")


def _pad(values, fill=0):
    return list(values) + [fill] * (SEQ - len(values))


def _batch() -> dict:
    columns = [_pad([0, 0, 0, 0, 1, 2, 1, 2, 1, 1, 2]), _pad([0, 0, 0, 1, 2, 1, 2, 1, 2])]
    rows = [_pad([0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2]), _pad([0, 0, 0, 0, 0, 1, 1, 2, 2])]
    numeric_values = [[NAN] * SEQ, _pad([NAN] * 5 + [3.0, NAN, 5.0], NAN)]
    features = {
        "input_ids": [_pad([1, 3, 4, 2, 5, 6, 7, 8, 9, 10, 11]), _pad([1, 12, 2, 13, 14, 15, 16, 17, 18])],
        "input_mask": [_pad([1] * 11), _pad([1] * 9)],
        "segment_ids": [_pad([0] * 4 + [1] * 7), _pad([0] * 3 + [1] * 6)],
        "column_ids": columns,
        "row_ids": rows,
        "prev_label_ids": [[0] * SEQ, [0] * SEQ],
        "column_ranks": [[0] * SEQ, _pad([0] * 5 + [1, 0, 2])],
        "inv_column_ranks": [[0] * SEQ, _pad([0] * 5 + [2, 0, 1])],
        "numeric_relations": [[0] * SEQ, [0] * SEQ],
        "label_ids": [_pad([0] * 8 + [1, 1]), _pad([0] * 5 + [1, 0, 1])],
    }
    batch = {key: tf.constant(value, tf.int32) for key, value in features.items()}
    batch.update(
        numeric_values=tf.constant(numeric_values, tf.float32),
        numeric_values_scale=tf.ones([2, SEQ], tf.float32),
        answer=tf.constant([NAN, 8.0]),
        aggregation_function_id=tf.constant([0, 1], tf.int32),
    )
    return batch


def _config(**overrides) -> TapasConfig:
    """The shared tiny config, cut to the batch: ids below 20, 24 tokens, 2x2 tables."""
    values = dict(vocab_size=20, max_position_embeddings=32, max_num_rows=4, max_num_columns=4)
    values.update(overrides)
    return tiny_config(**values)


def _weak_config(**overrides) -> TapasConfig:
    return _config(
        num_aggregation_labels=4,
        use_answer_as_supervision=True,
        cell_selection_preference=0.5,
        huber_loss_delta=25.0,
        **overrides,
    )


def _model(config: TapasConfig, seed: int = 0) -> TapasForQuestionAnswering:
    tf_keras.utils.set_random_seed(seed)
    return TapasForQuestionAnswering(config)


def _without_labels(batch: dict) -> dict:
    labels = ("label_ids", "numeric_values", "numeric_values_scale", "answer", "aggregation_function_id")
    return {key: value for key, value in batch.items() if key not in labels}


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * logits))  # no overflow at -10000


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_output_keys_and_shapes():
    model = _model(_config(num_aggregation_labels=4, num_classification_labels=2))
    batch = _batch()
    batch["classification_class_index"] = tf.constant([[0], [1]])  # [batch, 1] as parsed
    outputs = model(batch)
    shapes = {key: tuple(value.shape) for key, value in outputs.items()}
    assert shapes == {
        "token_logits": (2, SEQ),
        "column_logits": (2, 4),
        "logits": (2, SEQ),
        "probabilities": (2, SEQ),
        "aggregation_logits": (2, 4),
        "classification_logits": (2, 2),
        "total_loss": (),
        "selection_loss": (2,),
        "aggregation_loss": (2,),
        "answer_loss": (2,),
        "aggregate_mask": (2,),
        "expected_result": (2,),
        "selection_loss_in_total": (2,),
        "aggregation_loss_in_total": (2,),
        "answer_loss_in_total": (2,),
        "answer_loss_cut": (2,),
    }
    inference = model(_without_labels(batch))
    assert set(inference) == {
        "token_logits", "column_logits", "logits", "probabilities", "aggregation_logits", "classification_logits"
    }
    np.testing.assert_allclose(inference["logits"].numpy(), outputs["logits"].numpy())


def test_logits_keep_only_the_argmax_column():
    model = _model(_config())
    features = _without_labels(_batch())
    model(features)
    # A zero column head scores every real column 0: column 0 (not allowed) and the padding
    # column 3 get -10000, and the tie between columns 1 and 2 goes to the first, column 1.
    model.cell_selection_head.column_output_weights.assign(tf.zeros([32]))
    outputs = model(features)
    np.testing.assert_array_equal(outputs["column_logits"].numpy(), [[-10000.0, 0.0, 0.0, -10000.0]] * 2)
    logits, token_logits = outputs["logits"].numpy(), outputs["token_logits"].numpy()
    # Column 1 holds tokens 4 (h1), 6 (a), 8 and 9 (one cell "c c'") of example 0 and tokens
    # 3 (n), 5 (3), 7 (5) of example 1; they keep their cell's mean logit.
    inside = [[4, 6, 8, 9], [3, 5, 7]]
    np.testing.assert_allclose(logits[0, [4, 6]], token_logits[0, [4, 6]], rtol=1e-6)
    np.testing.assert_allclose(logits[0, 8:10], token_logits[0, 8:10].mean(), rtol=1e-5)
    np.testing.assert_allclose(logits[1, inside[1]], token_logits[1, inside[1]], rtol=1e-6)
    for example in range(2):
        outside = np.setdiff1d(np.arange(SEQ), inside[example])
        # Outside: the cell mean plus -10000, so about -10000 (padding cells once more).
        assert (logits[example, outside] < -9900).all() and (logits[example, outside] > -20100).all()
    probabilities = outputs["probabilities"].numpy()
    np.testing.assert_allclose(probabilities, _sigmoid(logits) * features["input_mask"].numpy(), rtol=1e-5, atol=1e-7)
    assert (probabilities[:, 11:] == 0).all()


def test_single_column_loss_terms():
    config = _config()
    outputs = _model(config)(_batch())
    # Supervised: total = mean(selection); no aggregation terms.
    np.testing.assert_allclose(outputs["total_loss"].numpy(), outputs["selection_loss"].numpy().mean(), rtol=1e-6)
    for key in ("aggregation_loss", "answer_loss", "aggregate_mask", "expected_result"):
        np.testing.assert_array_equal(outputs[key].numpy(), [0.0, 0.0])
    # The selection loss includes the column cross-entropy toward the gold column 1.
    column_nll = -_log_softmax(outputs["column_logits"].numpy())[:, 1]
    assert (outputs["selection_loss"].numpy() > column_nll).all()
    disabled = _model(config.replace(disable_per_token_loss=True))(_batch())
    assert disabled["total_loss"].numpy() == 0.0


def test_per_token_loss_without_column_selection():
    config = _config(select_one_column=False, positive_label_weight=10.0)
    outputs = _model(config)(_batch())
    assert "column_logits" not in outputs
    logits = outputs["token_logits"].numpy()
    np.testing.assert_array_equal(outputs["logits"].numpy(), logits)
    batch = _batch()
    labels, mask = batch["label_ids"].numpy(), batch["input_mask"].numpy()
    # Bernoulli NLL, weight 10 on positive tokens, averaged over the 11 and 9 real tokens.
    nll = np.log1p(np.exp(-logits)) * labels * 10.0 + np.log1p(np.exp(logits)) * (1 - labels)
    expected = (nll * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(outputs["selection_loss"].numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(outputs["total_loss"].numpy(), expected.mean(), rtol=1e-5)


def test_average_logits_per_cell():
    outputs = _model(_config(select_one_column=False, average_logits_per_cell=True))(_batch())
    token_logits, logits = outputs["token_logits"].numpy(), outputs["logits"].numpy()
    # Tokens 8 and 9 of example 0 form one cell; [CLS]..[SEP] and padding form cell (0, 0).
    np.testing.assert_allclose(logits[0, 8:10], token_logits[0, 8:10].mean(), rtol=1e-5)
    np.testing.assert_allclose(logits[0, 0], token_logits[0, [0, 1, 2, 3] + list(range(11, SEQ))].mean(), rtol=1e-5)
    np.testing.assert_allclose(logits[0, 6], token_logits[0, 6], rtol=1e-6)


def test_supervised_aggregation_loss():
    outputs = _model(_config(num_aggregation_labels=4))(_batch())
    log_probs = _log_softmax(outputs["aggregation_logits"].numpy())
    expected = -log_probs[[0, 1], [0, 1]]  # gold operators NONE and SUM
    np.testing.assert_allclose(outputs["aggregation_loss"].numpy(), expected, rtol=1e-5)
    np.testing.assert_array_equal(outputs["aggregate_mask"].numpy(), [0.0, 0.0])
    total = outputs["selection_loss"].numpy().mean() + expected.mean()
    np.testing.assert_allclose(outputs["total_loss"].numpy(), total, rtol=1e-5)
    _assert_parts_add_up(outputs)


def test_weak_supervision_loss_terms():
    batch = _batch()
    # Example 1's answer 8 is not in the table, so it has no cell labels (as WTQ conversion gives).
    batch["label_ids"] = tf.constant([_pad([0] * 8 + [1, 1]), [0] * SEQ], tf.int32)
    outputs = _model(_weak_config())(batch)
    # Example 0 has no scalar answer -> cell selection; example 1 has no cell labels -> aggregation.
    np.testing.assert_array_equal(outputs["aggregate_mask"].numpy(), [0.0, 1.0])

    probs = _sigmoid(outputs["logits"].numpy()[1])
    table = batch["row_ids"].numpy()[1] > 0
    values = np.nan_to_num(batch["numeric_values"].numpy()[1])
    count, total = (probs * table).sum(), (probs * table * values).sum()
    operators = np.exp(_log_softmax(outputs["aggregation_logits"].numpy()[1, 1:]))
    expected = operators @ [total, total / (count + 1e-10), count]
    np.testing.assert_allclose(outputs["expected_result"].numpy()[1], expected, rtol=1e-4)
    assert outputs["expected_result"].numpy()[0] != 0.0  # computed for every example

    error = abs(expected - 8.0)  # Huber with delta 25
    answer_loss = 0.5 * error**2 if error <= 25.0 else 25.0 * (error - 12.5)
    np.testing.assert_allclose(outputs["answer_loss"].numpy(), [0.0, answer_loss], rtol=1e-4)

    log_probs = _log_softmax(outputs["aggregation_logits"].numpy())
    operator_mass = np.exp(log_probs[1, 1:]).sum()
    aggregation = [-log_probs[0, 0], -np.log(operator_mass)]
    np.testing.assert_allclose(outputs["aggregation_loss"].numpy(), aggregation, rtol=1e-4)
    total_loss = outputs["selection_loss"].numpy()[0] / 2 + (aggregation[0] + aggregation[1] + answer_loss) / 2
    np.testing.assert_allclose(outputs["total_loss"].numpy(), total_loss, rtol=1e-4)
    assert np.isfinite(outputs["total_loss"].numpy())
    # The terms as they enter the total: example 1's cell labels do not count; nothing is cut.
    np.testing.assert_allclose(outputs["selection_loss_in_total"].numpy(),
                               [outputs["selection_loss"].numpy()[0], 0.0], rtol=1e-6)
    np.testing.assert_allclose(outputs["aggregation_loss_in_total"].numpy(), aggregation, rtol=1e-4)
    np.testing.assert_allclose(outputs["answer_loss_in_total"].numpy(), [0.0, answer_loss], rtol=1e-4)
    np.testing.assert_array_equal(outputs["answer_loss_cut"].numpy(), [0.0, 0.0])
    _assert_parts_add_up(outputs)


def _assert_parts_add_up(outputs):
    parts = sum(outputs[key].numpy().mean() for key in
                ("selection_loss_in_total", "aggregation_loss_in_total", "answer_loss_in_total"))
    np.testing.assert_allclose(parts, outputs["total_loss"].numpy(), rtol=1e-5)


def test_answer_loss_cutoff_drops_large_losses():
    batch = _batch()
    batch["label_ids"] = tf.constant([_pad([0] * 8 + [1, 1]), [0] * SEQ], tf.int32)
    outputs = _model(_weak_config(answer_loss_cutoff=1e-3))(batch)
    assert outputs["answer_loss"].numpy()[1] > 1e-3
    # Example 1 exceeds the cutoff: its aggregation and answer losses leave the total.
    log_probs = _log_softmax(outputs["aggregation_logits"].numpy())
    total = outputs["selection_loss"].numpy()[0] / 2 + (-log_probs[0, 0]) / 2
    np.testing.assert_allclose(outputs["total_loss"].numpy(), total, rtol=1e-4)
    np.testing.assert_array_equal(outputs["answer_loss_cut"].numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(outputs["answer_loss_in_total"].numpy(), [0.0, 0.0])
    np.testing.assert_allclose(outputs["aggregation_loss_in_total"].numpy(), [-log_probs[0, 0], 0.0], rtol=1e-4)
    _assert_parts_add_up(outputs)


def test_classification_loss_is_added():
    batch = _batch()
    batch["classification_class_index"] = tf.constant([1, 0])
    outputs = _model(_config(num_classification_labels=2))(batch)
    log_probs = _log_softmax(outputs["classification_logits"].numpy())
    total = outputs["selection_loss"].numpy().mean() - (log_probs[0, 1] + log_probs[1, 0]) / 2
    np.testing.assert_allclose(outputs["total_loss"].numpy(), total, rtol=1e-5)


@pytest.mark.parametrize(
    "config, missing",
    [
        (_weak_config(), "answer"),
        (_weak_config(), "numeric_values"),
        (_config(num_aggregation_labels=4), "aggregation_function_id"),
        (_config(num_classification_labels=2), "classification_class_index"),
    ],
)
def test_missing_label_features_are_named(config, missing):
    batch = _batch()
    batch.pop(missing, None)
    with pytest.raises(ValueError, match=missing):
        _model(config)(batch)


def test_config_must_be_a_tapas_config():
    with pytest.raises(ValueError, match="config must be a TapasConfig"):
        TapasForQuestionAnswering({"hidden_size": 32})


def test_weight_map_and_get_config_round_trip():
    config = _config(num_aggregation_labels=4, num_classification_labels=3)
    model = _model(config)
    weight_map = model.weight_map()  # builds the model on dummy features
    shapes = {name: tuple(variable.shape) for name, variable in weight_map.items()}
    assert shapes["bert/embeddings/token_type_embeddings_3"] == (2, 32)
    assert shapes["bert/encoder/layer_0/attention/self/query/kernel"] == (32, 2, 16)
    assert shapes["bert/encoder/layer_1/attention/output/dense/kernel"] == (2, 16, 32)
    assert shapes["bert/pooler/dense/kernel"] == (32, 32)
    assert shapes["output_weights"] == (32,) and shapes["output_bias"] == ()
    assert shapes["column_output_weights"] == (32,) and shapes["column_output_bias"] == ()
    assert shapes["output_weights_agg"] == (4, 32) and shapes["output_bias_agg"] == (4,)
    assert shapes["output_weights_cls"] == (3, 32) and shapes["output_bias_cls"] == (3,)
    assert {id(v) for v in weight_map.values()} == {id(v) for v in model.weights}
    assert len(weight_map) == len(model.weights)

    restored = TapasForQuestionAnswering.from_config(model.get_config())
    assert restored.tapas_config == config
    restored_map = restored.weight_map()
    assert {name: tuple(v.shape) for name, v in restored_map.items()} == shapes
    # Assigning by logical name reproduces the model exactly.
    for name, variable in weight_map.items():
        restored_map[name].assign(variable)
    features = _without_labels(_batch())
    np.testing.assert_allclose(restored(features)["logits"].numpy(), model(features)["logits"].numpy())
    assert set(dummy_features(2, 5)) == set(features)


def test_training_under_xla_learns_the_batch():
    """30 Adam steps of an XLA-compiled train step fit the cells of both examples."""
    config = _config(num_aggregation_labels=4)
    model = _model(config, seed=1)
    optimizer = tf_keras.optimizers.Adam(learning_rate=3e-3)
    batch = _batch()

    @tf.function(jit_compile=True)
    def train_step(features):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
        gradients = tape.gradient(outputs["total_loss"], model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return outputs

    first = train_step(batch)
    assert np.isfinite(first["total_loss"].numpy())
    for _ in range(29):
        train_step(batch)
    outputs = model(batch)
    assert outputs["total_loss"].numpy() < 0.5 * first["total_loss"].numpy()
    predicted = (outputs["probabilities"].numpy() > 0.5).astype(np.int32)
    np.testing.assert_array_equal(predicted, batch["label_ids"].numpy())
    # The operator head moves from uniform (log 4 = 1.386) toward the gold operators.
    assert outputs["aggregation_loss"].numpy().mean() < first["aggregation_loss"].numpy().mean() - 0.3


def test_weak_supervision_under_xla_matches_eager():
    batch = _batch()
    batch["label_ids"] = tf.constant([_pad([0] * 8 + [1, 1]), [0] * SEQ], tf.int32)
    model = _model(_weak_config(hidden_dropout_prob=0.1))
    compiled = tf.function(lambda features: model(features, training=False), jit_compile=True)(batch)
    eager = model(batch)
    assert set(compiled) == set(eager)
    for key in ("logits", "total_loss", "expected_result", "answer_loss", "aggregate_mask"):
        np.testing.assert_allclose(compiled[key].numpy(), eager[key].numpy(), rtol=1e-4, atol=1e-4)
