"""Tests of models/pretrain_model.py: the tied masked-LM head, its loss, the optional
next-sentence head, weight names and config round trips."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES  # noqa: E402
from tapas_tf.models.pretrain_model import MaskedLMHead, TapasForMaskedLM  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402

VOCAB, HIDDEN, SEQ = 30, 16, 10


def _config() -> TapasConfig:
    return tiny_config(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=1, intermediate_size=32,
                       max_position_embeddings=16)


def _features() -> dict:
    """Two examples; example 1 predicts only 2 of its 3 slots (weight 0 on the last)."""
    rng = np.random.default_rng(7)
    features = {name: tf.constant(rng.integers(0, 2, (2, SEQ)), tf.int32) for name in TOKEN_TYPE_FEATURES}
    features["input_ids"] = tf.constant(rng.integers(5, VOCAB, (2, SEQ)), tf.int32)
    features["input_mask"] = tf.ones([2, SEQ], tf.int32)
    features["masked_lm_positions"] = tf.constant([[1, 4, 7], [2, 3, 0]], tf.int32)
    features["masked_lm_ids"] = tf.constant([[6, 7, 8], [9, 10, 0]], tf.int32)
    features["masked_lm_weights"] = tf.constant([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    return features


def _model(use_next_sentence_prediction=False, seed=0) -> TapasForMaskedLM:
    tf_keras.utils.set_random_seed(seed)
    return TapasForMaskedLM(_config(), use_next_sentence_prediction=use_next_sentence_prediction)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_mlm_head_is_tied_to_the_embeddings():
    tf_keras.utils.set_random_seed(8)
    head = MaskedLMHead(vocab_size=5, hidden_act="relu", layer_norm_eps=1e-6)
    sequence = tf.random.normal([2, 4, 3])
    table = tf.random.normal([5, 3])
    positions = tf.constant([[3, 0], [1, 1]])
    head(sequence, positions, table)  # builds the transform
    head.output_bias.assign([0.0, 1.0, 2.0, 3.0, 4.0])
    logits = head(sequence, positions, table).numpy()

    gathered = np.stack([sequence.numpy()[0, [3, 0]], sequence.numpy()[1, [1, 1]]])
    hidden = np.maximum(gathered @ head.dense.kernel.numpy() + head.dense.bias.numpy(), 0.0)
    mean = hidden.mean(-1, keepdims=True)
    normed = (hidden - mean) / np.sqrt(((hidden - mean) ** 2).mean(-1, keepdims=True) + 1e-6)
    expected = normed * head.layer_norm.gamma.numpy() + head.layer_norm.beta.numpy()
    expected = expected @ table.numpy().T + [0.0, 1.0, 2.0, 3.0, 4.0]
    assert logits.shape == (2, 2, 5)
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)


def test_mlm_outputs_and_weighted_loss():
    model = _model()
    outputs = model(_features())
    assert set(outputs) == {"mlm_logits", "mlm_loss", "total_loss"}
    logits = outputs["mlm_logits"].numpy()
    assert logits.shape == (2, 3, VOCAB)
    log_probs = _log_softmax(logits)
    # Five weighted predictions: (nll of 6, 7, 8 in example 0 + 9, 10 in example 1) / (5 + 1e-5).
    picked = [(0, 0, 6), (0, 1, 7), (0, 2, 8), (1, 0, 9), (1, 1, 10)]
    nll = -np.array([log_probs[example, slot, word] for example, slot, word in picked])
    np.testing.assert_allclose(outputs["mlm_loss"].numpy(), nll.sum() / (5 + 1e-5), rtol=1e-5)
    assert outputs["total_loss"].numpy() == outputs["mlm_loss"].numpy()


def test_zero_weights_give_zero_loss():
    features = _features()
    features["masked_lm_weights"] = tf.zeros([2, 3])
    assert _model()(features)["mlm_loss"].numpy() == 0.0


def test_inference_without_labels():
    features = _features()
    for key in ("masked_lm_ids", "masked_lm_weights"):
        del features[key]
    assert set(_model()(features)) == {"mlm_logits"}


def test_next_sentence_head():
    features = _features()
    features["next_sentence_labels"] = tf.constant([[1], [0]])
    outputs = _model(use_next_sentence_prediction=True)(features)
    assert outputs["nsp_logits"].shape == (2, 2)
    log_probs = _log_softmax(outputs["nsp_logits"].numpy())
    np.testing.assert_allclose(outputs["nsp_loss"].numpy(), -(log_probs[0, 1] + log_probs[1, 0]) / 2, rtol=1e-5)
    np.testing.assert_allclose(
        outputs["total_loss"].numpy(), outputs["mlm_loss"].numpy() + outputs["nsp_loss"].numpy(), rtol=1e-6
    )


@pytest.mark.parametrize(
    "remove, nsp, message",
    [
        ("masked_lm_positions", False, "needs the feature masked_lm_positions"),
        ("masked_lm_weights", False, "needs the feature masked_lm_weights"),
        ("next_sentence_labels", True, "needs the feature next_sentence_labels"),
    ],
)
def test_missing_features_are_named(remove, nsp, message):
    features = _features()
    features.pop(remove, None)
    with pytest.raises(ValueError, match=message):
        _model(use_next_sentence_prediction=nsp)(features)


def test_weight_map():
    model = _model()
    weight_map = model.weight_map()  # builds on dummy features
    shapes = {name: tuple(v.shape) for name, v in weight_map.items()}
    assert shapes["cls/predictions/transform/dense/kernel"] == (HIDDEN, HIDDEN)
    assert shapes["cls/predictions/transform/LayerNorm/gamma"] == (HIDDEN,)
    assert shapes["cls/predictions/output_bias"] == (VOCAB,)
    assert shapes["bert/embeddings/word_embeddings"] == (VOCAB, HIDDEN)
    # No pooler without the next-sentence head, and no separate decoder matrix (tied).
    assert not any("pooler" in name or "seq_relationship" in name for name in shapes)
    assert len(weight_map) == len(model.weights)

    with_nsp = _model(use_next_sentence_prediction=True).weight_map()
    assert tuple(with_nsp["cls/seq_relationship/output_weights"].shape) == (2, HIDDEN)
    assert tuple(with_nsp["cls/seq_relationship/output_bias"].shape) == (2,)
    assert "bert/pooler/dense/kernel" in with_nsp


def test_get_config_round_trips():
    model = _model(use_next_sentence_prediction=True)
    restored = TapasForMaskedLM.from_config(model.get_config())
    assert restored.tapas_config == model.tapas_config
    assert restored.use_next_sentence_prediction is True
    head = MaskedLMHead(vocab_size=7, hidden_act="gelu_tanh", initializer_range=0.1, layer_norm_eps=1e-5, name="mlm")
    config = head.get_config()
    assert MaskedLMHead.from_config(config).get_config() == config
    clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(head))
    assert isinstance(clone, MaskedLMHead) and clone.get_config() == config


def test_a_few_adam_steps_reduce_the_loss():
    model = _model(seed=3)
    optimizer = tf_keras.optimizers.Adam(learning_rate=1e-2)
    features = _features()

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = model(features, training=True)["total_loss"]
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    first = train_step().numpy()
    for _ in range(9):
        last = train_step().numpy()
    assert np.isfinite(first) and last < first - 0.5
