"""BitDropout: Keras's dropout, from 16 random bits per value."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tapas_tf.models.dropout import BitDropout, dropout_mask, keep_threshold, random_bits16


def test_the_threshold_gives_the_rate_to_a_sixteen_bit_step():
    assert keep_threshold(0.0) == 0 and keep_threshold(0.1) == 6554 and keep_threshold(0.5) == 32768
    assert abs(keep_threshold(0.1) / 65536 - 0.1) < 1 / 131072
    for rate in (-0.1, 1.0):
        with pytest.raises(ValueError, match=r"dropout rate must be in \[0, 1\)"):
            keep_threshold(rate)


def test_random_bits_have_the_shape_asked_for_and_are_uniform():
    odd = random_bits16(tf.constant([3, 5, 7]), tf.constant([1, 2]))  # 105 values: an odd count
    assert odd.dtype == tf.uint16 and odd.shape == (3, 5, 7)
    bits = random_bits16(tf.constant([1_000_000]), tf.constant([3, 4])).numpy().astype(np.int64)
    counts = np.bincount(bits >> 12, minlength=16)  # 16 bins of 4,096 values each
    assert np.all(np.abs(counts / 1_000_000 - 1 / 16) < 0.002)
    # Both halves of a 32-bit draw are used, and a seed gives the same bits again.
    assert len(np.unique(bits[:2000])) > 1900
    again = random_bits16(tf.constant([1_000_000]), tf.constant([3, 4])).numpy()
    assert np.array_equal(bits, again)


def test_the_mask_is_zero_or_the_kept_scale():
    mask = dropout_mask(tf.constant([400, 500]), 0.25, tf.float32, tf.constant([5, 6])).numpy()
    assert set(np.unique(mask)) == {0.0, np.float32(1 / 0.75)}
    assert abs((mask == 0).mean() - 0.25) < 0.005


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_training_drops_at_the_rate_scales_the_rest_and_the_gradient_takes_the_same_mask(dtype):
    layer = BitDropout(0.1, dtype=tf_keras.mixed_precision.Policy(dtype))
    x = tf.cast(tf.reshape(tf.range(1, 200_001, dtype=tf.float32), [400, 500]) / 1000.0, dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * 3.0)
    grad = tape.gradient(loss, x)
    y, x_, grad = (tf.cast(t, tf.float32).numpy() for t in (y, x, grad))
    dropped = y == 0
    assert abs(dropped.mean() - 0.1) < 0.003
    scale = float(tf.cast(1 / 0.9, dtype))
    kept_expected = tf.cast(tf.cast(x_, dtype) * tf.cast(scale, dtype), tf.float32).numpy()
    np.testing.assert_array_equal(y[~dropped], kept_expected[~dropped])
    np.testing.assert_array_equal(grad[dropped], 0.0)
    np.testing.assert_allclose(grad[~dropped], 3.0 * scale, rtol=1e-2 if dtype == "bfloat16" else 1e-6)


def test_inference_and_rate_zero_are_the_identity():
    x = tf.random.uniform([4, 8])
    np.testing.assert_array_equal(BitDropout(0.5)(x, training=False).numpy(), x.numpy())
    np.testing.assert_array_equal(BitDropout(0.0)(x, training=True).numpy(), x.numpy())


def test_a_training_tensor_chooses_in_the_graph():
    layer = BitDropout(0.5)
    x = tf.ones([100, 100])

    @tf.function
    def run(training):
        return layer(x, training=training)

    assert np.array_equal(run(tf.constant(False)).numpy(), x.numpy())
    assert 0.4 < (run(tf.constant(True)).numpy() == 0).mean() < 0.6


def test_a_global_seed_repeats_the_masks():
    def masks():
        tf.random.set_seed(7)
        layer = BitDropout(0.3)
        return [layer(tf.ones([50, 50]), training=True).numpy() for _ in range(2)]

    first, second = masks(), masks()
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert not np.array_equal(first[0], first[1])  # each call draws anew


def test_config_round_trip_and_refusals():
    layer = BitDropout(0.2, seed=3, name="drop")
    again = BitDropout.from_config(layer.get_config())
    assert (again.rate, again.seed, again.name) == (0.2, 3, "drop")
    restored = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    assert isinstance(restored, BitDropout)
    with pytest.raises(ValueError, match="noise_shape is not supported"):
        BitDropout(0.1, noise_shape=(1, 5))
    with pytest.raises(ValueError, match="dropout rate"):
        BitDropout(1.0)
