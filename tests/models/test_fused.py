"""The fused training kernels: the values and gradients of the unfused arithmetic, and the layers and
block that use them only in training."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as nlp_layers

from tapas_tf.models import fused
from tapas_tf.models.dropout import keep_threshold
from tapas_tf.models.encoder import gelu_exact, gelu_tanh
from tapas_tf.models.fused import TapasActivation, TapasLayerNorm, adopt
from tapas_tf.models.transformer_block import TapasTransformerBlock

EPS = 1e-12


@pytest.fixture(autouse=True)
def fused_on():
    """The kernels on, whatever a run traced before in this process chose."""
    with fused.enabled_scope(True):
        yield


def _normal(shape, seed, dtype=tf.float32):
    return tf.cast(tf.random.stateless_normal(shape, seed=[seed, 7]), dtype)


def _reference_norm(x, gamma, beta):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) / tf.sqrt(variance + EPS) * gamma + beta


def _value_and_gradients(fn, args, seed=3):
    """fn(*args) and the gradients of a random weighting of it with respect to every arg."""
    with tf.GradientTape() as tape:
        tape.watch(args)
        y = fn(*args)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * _normal(y.shape, seed))
    return y, tape.gradient(loss, args)


def _assert_close(actual, expected, tol):
    for a, e in zip(tf.nest.flatten(actual), tf.nest.flatten(expected)):
        np.testing.assert_allclose(tf.cast(a, tf.float32).numpy(), tf.cast(e, tf.float32).numpy(),
                                   rtol=tol, atol=tol)


def test_layer_norm_of_a_hand_checked_row():
    # Row [1, 2, 3, 6]: mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5.
    x = tf.constant([[1.0, 2.0, 3.0, 6.0]])
    y = fused.layer_norm(x, tf.ones([4]), tf.zeros([4]), EPS)
    np.testing.assert_allclose(y.numpy(), [[-2, -1, 0, 3] / np.sqrt(3.5)], rtol=1e-6)


@pytest.mark.parametrize("use_function", [False, True])
def test_layer_norm_values_and_gradients_are_the_unfused_ones(use_function):
    args = [_normal([2, 5, 8], 1), _normal([8], 2) + 1.0, _normal([8], 3)]
    ours = tf.function(fused.layer_norm, autograph=False) if use_function else fused.layer_norm
    got = _value_and_gradients(lambda x, g, b: ours(x, g, b, EPS), args)
    expected = _value_and_gradients(_reference_norm, args)
    _assert_close(got, expected, 2e-5)


def test_layer_norm_of_bfloat16_computes_in_float32_and_returns_the_asked_dtype():
    x = _normal([4, 16], 1, tf.bfloat16)
    gamma, beta = tf.ones([16]), tf.zeros([16])
    (y, grads) = _value_and_gradients(lambda x: fused.layer_norm(x, gamma, beta, EPS, tf.bfloat16), [x])
    assert y.dtype == tf.bfloat16 and grads[0].dtype == tf.bfloat16
    expected_y, expected_grads = _value_and_gradients(
        lambda x: _reference_norm(tf.cast(x, tf.float32), gamma, beta), [tf.cast(x, tf.float32)])
    _assert_close([y, grads], [expected_y, expected_grads], 2e-2)
    assert fused.layer_norm(x, gamma, beta, EPS).dtype == tf.float32


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_and_bias_gelu_values_and_gradients(approximate):
    x = _normal([3, 4, 6], 1) * 3.0
    got = _value_and_gradients(lambda x: fused.gelu(x, approximate), [x])
    expected = _value_and_gradients(lambda x: tf.nn.gelu(x, approximate=approximate), [x])
    _assert_close(got, expected, 1e-5)
    bias = _normal([6], 2)
    got = _value_and_gradients(lambda x, b: fused.bias_gelu(x, b, approximate), [x, bias])
    expected = _value_and_gradients(lambda x, b: tf.nn.gelu(x + b, approximate=approximate), [x, bias])
    _assert_close(got, expected, 1e-5)


def test_gelu_of_a_hand_checked_value():
    # GELU(1) = 1 * Phi(1) = 0.841345; its slope is Phi(1) + 1 * phi(1) = 0.841345 + 0.241971.
    x = tf.constant([1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fused.gelu(x)
    np.testing.assert_allclose(y.numpy(), [0.841345], rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [0.841345 + 0.241971], rtol=1e-5)


def _reference_residual_norm(x, residual, gamma, beta, bias, bits, rate):
    keep = tf.cast(bits >= keep_threshold(rate), tf.float32) / (1.0 - rate)
    return _reference_norm((x + bias) * keep + residual, gamma, beta)


@pytest.mark.parametrize("rate", [0.0, 0.5])
def test_residual_layer_norm_values_and_gradients(rate):
    shape = [2, 5, 8]
    bits = tf.random.stateless_uniform(shape, seed=[4, 4], minval=0, maxval=1 << 16, dtype=tf.int32)
    bits = tf.cast(bits, tf.uint16)
    args = [_normal(shape, 1), _normal(shape, 2), _normal([8], 3) + 1.0, _normal([8], 4), _normal([8], 5)]
    got = _value_and_gradients(
        lambda x, r, g, b, bias: fused.residual_layer_norm(x, r, g, b, EPS, bias=bias, dropout_bits=bits, rate=rate),
        args)
    expected = _value_and_gradients(
        lambda x, r, g, b, bias: _reference_residual_norm(x, r, g, b, bias, bits, rate), args)
    _assert_close(got, expected, 5e-5)


def test_residual_layer_norm_drops_where_the_bits_are_below_the_threshold():
    # rate 0.5: threshold 32768. The first value is dropped, so the row is [0, 2] + [1, 1] = [1, 3].
    x, residual = tf.constant([[5.0, 1.0]]), tf.constant([[1.0, 1.0]])
    bits = tf.constant([[32767, 32768]], tf.uint16)
    y = fused.residual_layer_norm(x, residual, tf.ones([2]), tf.zeros([2]), EPS, dropout_bits=bits, rate=0.5)
    np.testing.assert_allclose(y.numpy(), [[-1.0, 1.0]], rtol=1e-6)


def test_residual_layer_norm_refuses_a_rate_without_bits():
    with pytest.raises(ValueError, match="dropout_bits"):
        fused.residual_layer_norm(tf.ones([1, 2]), tf.ones([1, 2]), tf.ones([2]), tf.zeros([2]), EPS, rate=0.1)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_dropped_softmax_values_and_gradient_are_softmax_times_the_keep_mask(dtype):
    logits = _normal([2, 3, 4, 5], 1, dtype)
    keep = tf.random.stateless_uniform([2, 3, 4, 5], seed=[5, 5]) >= 0.3
    (kept, probabilities) = fused.dropped_softmax(logits, keep)
    got = _value_and_gradients(lambda x: fused.dropped_softmax(x, keep)[0], [logits])
    expected = _value_and_gradients(lambda x: tf.nn.softmax(x) * tf.cast(keep, x.dtype), [logits])
    tol = 2e-2 if dtype == tf.bfloat16 else 1e-6
    _assert_close(got, expected, tol)
    _assert_close(probabilities, tf.nn.softmax(logits), tol)
    assert kept.dtype == dtype and got[1][0].dtype == dtype
    # Without dropout: the softmax and its gradient.
    got = _value_and_gradients(lambda x: fused.dropped_softmax(x)[0], [logits])
    _assert_close(got, _value_and_gradients(tf.nn.softmax, [logits]), tol)


def test_dropped_softmax_zeroes_exactly_the_dropped_probabilities():
    # softmax([0, 0, ln 2]) = [1/4, 1/4, 1/2]; the second is dropped.
    kept, probabilities = fused.dropped_softmax(tf.math.log([[1.0, 1.0, 2.0]]), tf.constant([[True, False, True]]))
    np.testing.assert_allclose(kept.numpy(), [[0.25, 0.0, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(probabilities.numpy(), [[0.25, 0.25, 0.5]], rtol=1e-6)


def test_layer_norm_layer_fuses_in_training_only_and_keeps_keras_inference():
    ours = TapasLayerNorm(epsilon=EPS, name="norm")
    keras = tf_keras.layers.LayerNormalization(epsilon=EPS, name="norm")
    x = _normal([2, 3, 8], 1)
    ours(x), keras(x)
    keras.set_weights([w + 0.5 for w in ours.get_weights()])
    ours.set_weights(keras.get_weights())
    np.testing.assert_array_equal(ours(x, training=False).numpy(), keras(x).numpy())
    _assert_close(ours(x, training=True), keras(x), 2e-5)
    restored = TapasLayerNorm.from_config(ours.get_config())
    assert isinstance(restored, TapasLayerNorm) and restored.epsilon == EPS


def test_activation_layer_fuses_only_gelu(monkeypatch):
    calls = []
    monkeypatch.setattr(fused, "gelu", lambda x, approximate=False: calls.append(approximate) or tf.nn.gelu(x))
    x = _normal([2, 4], 1)
    for function in (gelu_exact, gelu_tanh, tf.nn.relu):
        TapasActivation(function)(x, training=True)
        TapasActivation(function)(x, training=False)
    assert calls == [False, True]


def test_adopt_turns_a_keras_layer_into_its_subclass_in_place_and_refuses_others():
    layer = tf_keras.layers.LayerNormalization(epsilon=EPS)
    assert adopt(layer, TapasLayerNorm) is layer and isinstance(layer, TapasLayerNorm)
    assert layer._call_spec.expects_training_arg
    with pytest.raises(TypeError, match="not a subclass"):
        adopt(tf_keras.layers.Dense(2), TapasLayerNorm)


BLOCK_ARGS = dict(num_attention_heads=2, inner_dim=32, inner_activation=gelu_exact, norm_first=False,
                  norm_epsilon=EPS, name="layer_0")


def _block_inputs():
    hidden = tf.random.stateless_normal([2, 6, 16], seed=[1, 2])
    mask = tf.constant(np.tril(np.ones([2, 6, 6], np.float32)))
    return [hidden, mask]


def _block_step(block, inputs, training):
    with tf.GradientTape() as tape:
        y = block(inputs, training=training)
        loss = tf.reduce_sum(y * _normal(y.shape, 9))
    return y, tape.gradient(loss, block.trainable_variables)


@pytest.mark.parametrize("use_function", [False, True])
def test_the_blocks_fused_training_path_is_its_unfused_one_without_dropout(use_function):
    block = TapasTransformerBlock(output_dropout=0.0, attention_dropout=0.0, **BLOCK_ARGS)
    inputs = _block_inputs()
    step = tf.function(_block_step, autograph=False) if use_function else _block_step
    fused_values = step(block, inputs, True)
    unfused_values = step(block, inputs, False)  # No dropout: inference is the same arithmetic.
    _assert_close(fused_values, unfused_values, 5e-5)


def test_the_block_builds_its_weights_with_the_parents_names_order_and_seeded_values():
    tf_keras.utils.set_random_seed(3)
    ours = TapasTransformerBlock(output_dropout=0.1, attention_dropout=0.1, **BLOCK_ARGS)
    ours(_block_inputs(), training=True)  # The first call is a training one: the fused path.
    tf_keras.utils.set_random_seed(3)
    theirs = nlp_layers.TransformerEncoderBlock(output_dropout=0.1, attention_dropout=0.1, **BLOCK_ARGS)
    theirs(_block_inputs())
    assert [(v.name, v.shape) for v in ours.weights] == [(v.name, v.shape) for v in theirs.weights]
    for mine, parents in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_array_equal(mine, parents)


def test_the_blocks_training_path_drops_and_trains():
    block = TapasTransformerBlock(output_dropout=0.5, attention_dropout=0.1, **BLOCK_ARGS)
    inputs = _block_inputs()
    (first, grads), (second, _) = _block_step(block, inputs, True), _block_step(block, inputs, True)
    assert not np.allclose(first.numpy(), second.numpy())
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
    assert len(grads) == len(block.trainable_variables)


def test_a_block_the_fused_path_does_not_cover_runs_the_parents_call(monkeypatch):
    monkeypatch.setattr(fused, "residual_layer_norm", lambda *a, **k: pytest.fail("fused path taken"))
    for args in (dict(BLOCK_ARGS, norm_first=True), dict(BLOCK_ARGS, inner_activation=tf.nn.relu),
                 dict(BLOCK_ARGS, inner_dropout=0.1)):
        block = TapasTransformerBlock(output_dropout=0.1, attention_dropout=0.1, **args)
        assert np.isfinite(block(_block_inputs(), training=True).numpy()).all()
