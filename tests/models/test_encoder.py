"""Tests of models/encoder.py: activations, a numpy re-computation of one post-LN BERT layer
(which pins the documented weight layout), the attention mask, the pooler and the weight map."""

import math
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES  # noqa: E402
from tapas_tf.models.encoder import TapasEncoder, gelu_exact, gelu_tanh, get_activation  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402

HIDDEN, HEADS, HEAD_SIZE, INTERMEDIATE = 8, 2, 4, 16
BATCH, SEQ = 2, 6


def _config(**overrides) -> TapasConfig:
    """The shared tiny config at the sizes the numpy re-computation below is written for."""
    values = dict(
        vocab_size=20,
        hidden_size=HIDDEN,
        num_hidden_layers=1,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=16,
        type_vocab_sizes=(3, 4, 4, 2, 4, 4, 10),
        layer_norm_eps=1e-6,
    )
    values.update(overrides)
    return tiny_config(**values)


def _features() -> dict:
    """Two examples; the second has two padding tokens (input_mask 0)."""
    rng = np.random.default_rng(0)
    features = {name: tf.constant(rng.integers(0, 2, (BATCH, SEQ)), tf.int32) for name in TOKEN_TYPE_FEATURES}
    features["input_ids"] = tf.constant(rng.integers(1, 20, (BATCH, SEQ)), tf.int32)
    features["input_mask"] = tf.constant([[1] * 6, [1, 1, 1, 1, 0, 0]], tf.int32)
    return features


def test_activation_names():
    x = tf.constant([-2.0, -0.5, 0.0, 1.0, 3.0])
    exact = [v * 0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.numpy()]
    approx = [
        0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))) for v in x.numpy()
    ]
    np.testing.assert_allclose(get_activation("gelu")(x).numpy(), exact, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(get_activation("gelu_tanh")(x).numpy(), approx, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(get_activation("relu")(x).numpy(), [0.0, 0.0, 0.0, 1.0, 3.0])
    # The two GELUs differ: at -2 exact = -0.045500, tanh approximation = -0.045402.
    assert abs(exact[0] - approx[0]) > 5e-5
    with pytest.raises(ValueError, match="Unknown activation 'swish'"):
        get_activation("swish")


def test_activation_functions_are_serialisable():
    assert tf_keras.activations.deserialize(tf_keras.activations.serialize(gelu_tanh)) is gelu_tanh
    assert tf_keras.activations.deserialize(tf_keras.activations.serialize(gelu_exact)) is gelu_exact


def test_blocks_are_post_layer_norm_bert():
    encoder = TapasEncoder.from_tapas_config(_config(num_hidden_layers=2, hidden_act="gelu_tanh"))
    assert [layer.name for layer in encoder.transformer_layers] == ["layer_0", "layer_1"]
    block_config = encoder.transformer_layers[0].get_config()
    assert block_config["norm_first"] is False
    assert block_config["norm_epsilon"] == 1e-6
    assert block_config["inner_dim"] == INTERMEDIATE
    assert block_config["num_attention_heads"] == HEADS
    assert block_config["inner_activation"] is gelu_tanh


def _layer_norm(x, gamma, beta, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def _numpy_bert_layer(x: np.ndarray, mask: np.ndarray, w: dict, prefix: str) -> np.ndarray:
    """One BERT layer written from the TF1 layout: [H, H] kernels, obtained by reshaping ours."""

    def dense(inputs, name, in_dim, out_dim):
        kernel = w[f"{prefix}/{name}/kernel"].reshape(in_dim, out_dim)
        return inputs @ kernel + w[f"{prefix}/{name}/bias"].reshape(out_dim)

    def heads(t):  # [B, S, H] -> [B, N, S, D]
        return t.reshape(BATCH, SEQ, HEADS, HEAD_SIZE).transpose(0, 2, 1, 3)

    q = heads(dense(x, "attention/self/query", HIDDEN, HIDDEN))
    k = heads(dense(x, "attention/self/key", HIDDEN, HIDDEN))
    v = heads(dense(x, "attention/self/value", HIDDEN, HIDDEN))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_SIZE) + (1.0 - mask[:, None, None, :]) * -1e9
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, HIDDEN)
    attention = dense(context, "attention/output/dense", HIDDEN, HIDDEN)
    attention = _layer_norm(
        x + attention, w[f"{prefix}/attention/output/LayerNorm/gamma"], w[f"{prefix}/attention/output/LayerNorm/beta"]
    )
    inner = dense(attention, "intermediate/dense", HIDDEN, INTERMEDIATE)
    inner = np.vectorize(lambda t: t * 0.5 * (1.0 + math.erf(t / math.sqrt(2.0))))(inner)
    output = dense(inner, "output/dense", INTERMEDIATE, HIDDEN)
    return _layer_norm(attention + output, w[f"{prefix}/output/LayerNorm/gamma"], w[f"{prefix}/output/LayerNorm/beta"])


def test_one_layer_matches_numpy_bert_and_pooler():
    tf_keras.utils.set_random_seed(3)
    encoder = TapasEncoder.from_tapas_config(_config(initializer_range=0.3))
    features = _features()
    outputs = encoder(features)
    weights = {name: variable.numpy() for name, variable in encoder.weight_map().items()}
    embedded = encoder.embeddings(features).numpy()
    mask = features["input_mask"].numpy().astype(np.float32)

    expected = _numpy_bert_layer(embedded, mask, weights, "bert/encoder/layer_0")
    np.testing.assert_allclose(outputs["sequence_output"].numpy(), expected, atol=1e-4)
    pooled = np.tanh(expected[:, 0] @ weights["bert/pooler/dense/kernel"] + weights["bert/pooler/dense/bias"])
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), pooled, atol=1e-4)


def test_padding_does_not_change_real_tokens():
    tf_keras.utils.set_random_seed(4)
    encoder = TapasEncoder.from_tapas_config(_config(num_hidden_layers=2))
    features = _features()
    before = encoder(features)["sequence_output"].numpy()
    changed = dict(features)
    changed["input_ids"] = tf.tensor_scatter_nd_update(features["input_ids"], [[1, 4], [1, 5]], [17, 18])
    after = encoder(changed)["sequence_output"].numpy()
    np.testing.assert_allclose(after[1, :4], before[1, :4], atol=1e-6)
    np.testing.assert_array_equal(after[0], before[0])
    assert not np.allclose(after[1, 4:], before[1, 4:])


def test_weight_map_names_and_shapes():
    encoder = TapasEncoder.from_tapas_config(_config(num_hidden_layers=2))
    with pytest.raises(ValueError, match="Call the encoder once"):
        encoder.weight_map()
    encoder(_features())
    shapes = {name: tuple(variable.shape) for name, variable in encoder.weight_map().items()}
    layer = "bert/encoder/layer_1"
    assert shapes[f"{layer}/attention/self/query/kernel"] == (HIDDEN, HEADS, HEAD_SIZE)
    assert shapes[f"{layer}/attention/self/key/bias"] == (HEADS, HEAD_SIZE)
    assert shapes[f"{layer}/attention/self/value/kernel"] == (HIDDEN, HEADS, HEAD_SIZE)
    assert shapes[f"{layer}/attention/output/dense/kernel"] == (HEADS, HEAD_SIZE, HIDDEN)
    assert shapes[f"{layer}/attention/output/dense/bias"] == (HIDDEN,)
    assert shapes[f"{layer}/attention/output/LayerNorm/gamma"] == (HIDDEN,)
    assert shapes[f"{layer}/intermediate/dense/kernel"] == (HIDDEN, INTERMEDIATE)
    assert shapes[f"{layer}/output/dense/kernel"] == (INTERMEDIATE, HIDDEN)
    assert shapes[f"{layer}/output/LayerNorm/beta"] == (HIDDEN,)
    assert shapes["bert/pooler/dense/kernel"] == (HIDDEN, HIDDEN)
    assert shapes["bert/embeddings/token_type_embeddings_3"] == (2, HIDDEN)
    # 11 embedding variables + 16 per layer + 2 pooler; every variable is named exactly once.
    assert len(shapes) == 11 + 2 * 16 + 2 == len(encoder.weights)
    assert {id(v) for v in encoder.weight_map().values()} == {id(v) for v in encoder.weights}


def test_without_pooler():
    encoder = TapasEncoder.from_tapas_config(_config(), add_pooling_layer=False)
    outputs = encoder(_features())
    assert set(outputs) == {"sequence_output"}
    assert not any("pooler" in name for name in encoder.weight_map())


def test_get_config_round_trip():
    encoder = TapasEncoder.from_tapas_config(_config(hidden_act="relu"), name="encoder")
    config = encoder.get_config()
    assert config["hidden_act"] == "relu"
    assert config["type_vocab_sizes"] == [3, 4, 4, 2, 4, 4, 10]
    restored = TapasEncoder.from_config(config)
    assert restored.get_config() == config
    clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(encoder))
    assert isinstance(clone, TapasEncoder) and clone.get_config() == config
    outputs = restored(_features())
    assert outputs["sequence_output"].shape == (BATCH, SEQ, HIDDEN)
    assert outputs["pooled_output"].shape == (BATCH, HIDDEN)


def test_bad_arguments():
    with pytest.raises(ValueError, match="not divisible"):
        TapasEncoder(vocab_size=10, hidden_size=10, num_hidden_layers=1, num_attention_heads=3, intermediate_size=8)
    with pytest.raises(ValueError, match="Unknown activation 'tanh'"):
        TapasEncoder(
            vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
            hidden_act="tanh",
        )
    features = _features()
    del features["input_mask"]
    with pytest.raises(ValueError, match="needs the feature input_mask"):
        TapasEncoder.from_tapas_config(_config())(features)
