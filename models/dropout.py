"""Dropout from 16 random bits per value, applied as one multiply.

Keras's `Dropout` draws a uniform float per value (`RandomUniform`), compares it with the rate,
scales the input and selects: four passes forward and two or three backward. In a TAPAS training
step on a CPU the attention probabilities' dropout alone draws batch x heads x seq_len^2 values a
layer (134 million a step for mini at batch 32 and 512 tokens), and the profile of a step
(`benchmarks/profile_train_step.py`) put dropout at a third of a bfloat16 step on an AMX Xeon.

`BitDropout` draws full-range random integers (`StatelessRandomUniformFullInt`, Philox) and reads
each 32-bit draw as two 16-bit values: half the generator's work of a float per value. A value is
kept when its 16 bits are at least `round(rate * 65536)`: the drop probability is the rate to
within 1 / 131072. The kept values are scaled by 1 / (1 - rate) through one multiply by a
{0, 1 / (1 - rate)} mask, and the gradient is one multiply by the same mask.

The randomness follows TensorFlow's op seeds as Keras's dropout does: a fresh pair of stateless
seeds per call from a seeded stateful op, so `tf.random.set_seed` (or the layer's `seed`) makes a
run repeatable. The masks differ from Keras's (another generator), the statistics do not.
"""

from typing import Optional, Tuple, Union

import tensorflow as tf
import tf_keras

_BITS = 16
_LEVELS = 1 << _BITS


def keep_threshold(rate: float) -> int:
    """The smallest kept 16-bit value: P(bits < threshold) is the drop rate, to 1 / 131072."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    return int(round(rate * _LEVELS))


def random_bits16(shape: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """<uint16>[*shape] uniform random values, two from each 32-bit draw.

    Args:
      shape: <int32>[rank], the output's shape.
      seed: <int32>[2], the stateless seed.
    """
    count = tf.reduce_prod(shape)
    draws = tf.random.stateless_uniform([(count + 1) // 2], seed=seed, minval=None, maxval=None,
                                        dtype=tf.uint32)
    bits = tf.reshape(tf.bitcast(draws, tf.uint16), [-1])
    return tf.reshape(bits[:count], shape)


def keep_mask(shape: tf.Tensor, rate: float, seed: tf.Tensor) -> tf.Tensor:
    """<bool>[*shape]: True for a kept value, False (with probability `rate`) for a dropped one."""
    return random_bits16(shape, seed) >= keep_threshold(rate)


def dropout_mask(shape: tf.Tensor, rate: float, dtype: tf.DType, seed: tf.Tensor) -> tf.Tensor:
    """<dtype>[*shape]: 0 for a dropped value, 1 / (1 - rate) for a kept one."""
    return tf.cast(keep_mask(shape, rate, seed), dtype) * tf.cast(1.0 / (1.0 - rate), dtype)


@tf.custom_gradient
def _multiply_by_mask(inputs: tf.Tensor, mask: tf.Tensor):
    def grad(upstream):
        return upstream * mask, None

    return inputs * mask, grad


# Floats as integers of their width, so that zeroing a value is a bitwise AND with 0.
_SAME_WIDTH_INT = {tf.bfloat16: tf.int16, tf.float16: tf.int16, tf.float32: tf.int32, tf.float64: tf.int64}


def zero_dropped(inputs: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
    """`inputs` where `keep`, 0 elsewhere, unscaled; the gradient is zeroed the same way.

    A bitwise AND of the values' bits with all-ones or all-zeros words: one integer pass each way,
    where a multiply of bfloat16 values converts each to float32 and back on CPUs.

    Args:
      inputs: <float>[...] values.
      keep: <bool>[...] the same shape.
    """
    as_int = _SAME_WIDTH_INT[inputs.dtype.base_dtype]
    words = -tf.cast(keep, as_int)  # -1: every bit set

    def apply(values: tf.Tensor) -> tf.Tensor:
        return tf.bitcast(tf.bitwise.bitwise_and(tf.bitcast(values, as_int), words), values.dtype)

    @tf.custom_gradient
    def zeroed(values):
        return apply(values), apply

    return zeroed(inputs)


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class BitDropout(tf_keras.layers.Dropout):
    """`tf_keras.layers.Dropout` with the same arguments and meaning, drawing 16 bits per value.

    Args:
      rate: float in [0, 1), the share of values set to 0 in training.
      noise_shape: not supported (a value of a shape other than the input's raises).
      seed: optional int, the op seed of the per-call stateless seeds.

    Call args:
      inputs: a tensor of any shape and floating dtype.
      training: bool; False (inference) returns `inputs` unchanged.
    """

    def __init__(self, rate: float, noise_shape=None, seed: Optional[int] = None, **kwargs):
        if noise_shape is not None:
            raise ValueError("BitDropout drops each value on its own: noise_shape is not supported")
        keep_threshold(rate)
        super().__init__(rate, noise_shape=None, seed=seed, **kwargs)

    def _dropping(self, training) -> Union[bool, tf.Tensor]:
        """False (inference, or rate 0: nothing to drop), True, or a <bool>[] tensor that decides
        in the graph."""
        if training is None:
            training = tf_keras.backend.learning_phase()
        if self.rate == 0 or (isinstance(training, bool) and not training):
            return False
        return True if isinstance(training, bool) else tf.cast(training, tf.bool)

    def _seed(self) -> tf.Tensor:
        """<int32>[2]: a fresh stateless seed per call, from the op seed (`self.seed`)."""
        return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32, seed=self.seed)

    def call(self, inputs, training=None):
        dropping = self._dropping(training)
        if dropping is False:
            return tf.identity(inputs)

        def dropped():
            mask = dropout_mask(tf.shape(inputs), self.rate, inputs.dtype, self._seed())
            return _multiply_by_mask(inputs, mask)

        if dropping is True:
            return dropped()
        return tf.cond(dropping, dropped, lambda: tf.identity(inputs))

    def draw_bits(self, shape: tf.Tensor) -> tf.Tensor:
        """<uint16>[*shape]: one training call's random bits, for a fused kernel that drops the values
        itself (below `keep_threshold(self.rate)`: dropped; kept ones scaled by 1 / (1 - rate))."""
        return random_bits16(shape, self._seed())

    def draw_keep(self, shape: tf.Tensor) -> tf.Tensor:
        """<bool>[*shape]: one training call's mask (False: drop), for a caller that applies it
        itself; the kept values are to be scaled by 1 / (1 - rate)."""
        return keep_mask(shape, self.rate, self._seed())

    def call_unscaled(self, inputs: tf.Tensor, training=None) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
        """(the input with dropped values zeroed but the kept ones not scaled, the scale): for a
        caller that scales a smaller tensor downstream, e.g. attention's context rather than its
        probabilities. The scale, in the input's dtype, is 1 / (1 - rate) in training and 1 when
        `training` is a tensor that says no; None (nothing to scale) in inference or at rate 0.
        """
        dropping = self._dropping(training)
        if dropping is False:
            return tf.identity(inputs), None

        def dropped():
            keep = keep_mask(tf.shape(inputs), self.rate, self._seed())
            return zero_dropped(inputs, keep), tf.cast(1.0 / (1.0 - self.rate), inputs.dtype)

        if dropping is True:
            return dropped()
        return tf.cond(dropping, dropped, lambda: (tf.identity(inputs), tf.ones([], inputs.dtype)))
