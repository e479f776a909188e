"""The element-wise parts of a training step as one XLA kernel forward and one backward each.

Without them a CPU training step runs layer normalisation as about eight TensorFlow ops forward and
fifteen backward, and the exact GELU as six and ten, each a pass over memory; under the
`mixed_bfloat16` policy each pass also converts every bfloat16 value to float32 and back, and
Keras adds casts around its float32 layers. The profile of a mini step on an AMX Xeon
(`benchmarks/profile_train_step.py`) put the two at 28% of a bfloat16 step, more than all its
matrix products. Here each part is a `tf.function(jit_compile=True)` forward and backward tied by
`tf.custom_gradient`: XLA fuses each into one loop over memory that reads bfloat16 and computes in
float32, while the matrix products around them stay with TensorFlow's (oneDNN's) kernels, which
XLA's CPU back end does not match.

  layer_norm            layer normalisation (the embeddings')
  residual_layer_norm   a post-norm sublayer's end: its bias, dropout, residual sum and layer norm
  bias_gelu             the feed-forward layer's bias and GELU (exact or tanh)
  gelu                  GELU alone
  dropped_softmax       the attention softmax and dropout (forward: TensorFlow's softmax, whose
                        oneDNN kernel beats XLA's; backward: one kernel)

The arithmetic is the layers' own, in float32: the mean and variance of the last axis,
(x - mean) * rsqrt(variance + epsilon) * gamma + beta, and x * Phi(x) (or its tanh form) for GELU;
the tests compare values and gradients with the unfused ops. `TapasLayerNorm`, `TapasActivation` and
`models.transformer_block` use the kernels in training (`training=True`) only, when `enabled()`
(the trainer's choice; `enabled_scope(True)` for a loop of one's own); in inference they
are Keras's layers, so a SavedModel, a LiteRT model and every answer are unchanged, and no input
length compiles a kernel at serving time. Training compiles each kernel once per input shape (a
bucketed run: once per bucket length).
"""

import contextlib
import functools
import math
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf
import tf_keras

from tapas_tf.models.dropout import keep_threshold, zero_dropped

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715


# Off until a caller turns it on: the trainer decides per run (`tapas_tf.training.fused_choice`),
# since for small models compiling the kernels costs more than they save.
_enabled = False


def enabled() -> bool:
    """Whether training calls traced from now on use the fused kernels (off by default; the
    trainer sets it for its steps, `tapas_tf.training.fused_choice`)."""
    return _enabled


def set_enabled(value: bool) -> None:
    """Turns the fused kernels on or off for training calls traced from now on (a traced step keeps
    what it was traced with)."""
    global _enabled
    _enabled = bool(value)


@contextlib.contextmanager
def enabled_scope(value: bool) -> Iterator[None]:
    """`set_enabled(value)` inside the block, the previous setting after it."""
    previous = enabled()
    set_enabled(value)
    try:
        yield
    finally:
        set_enabled(previous)


def _moments(x: tf.Tensor, epsilon: float) -> Tuple[tf.Tensor, tf.Tensor]:
    """(mean, 1 / sqrt(variance + epsilon)) of the last axis, <float32>[..., 1] each."""
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
    return mean, tf.math.rsqrt(variance + epsilon)


def _column_sums(x: tf.Tensor) -> tf.Tensor:
    """<float32>[H]: the sums of <float32>[..., H] over all but the last axis, as a product with a
    row of ones: XLA's CPU back end runs a reduction over the leading axes as a slow windowed
    reduction (6.4 against 3.9 ms for a layer norm's backward pass at [32, 256, 256])."""
    rows = tf.reshape(x, [-1, x.shape[-1]])
    return tf.reshape(tf.matmul(tf.ones([1, tf.shape(rows)[0]], x.dtype), rows), [-1])


@functools.lru_cache(maxsize=None)
def _layer_norm_kernels(epsilon: float, out_dtype: tf.DType) -> Callable:
    """The custom-gradient layer norm of one epsilon and output dtype (traced once, compiled per shape)."""

    @tf.function(jit_compile=True)
    def forward(x, gamma, beta):
        xf = tf.cast(x, tf.float32)
        mean, inv = _moments(xf, epsilon)
        return tf.cast((xf - mean) * inv * gamma + beta, out_dtype), mean, inv

    @tf.function(jit_compile=True)
    def backward(x, gamma, mean, inv, dy):
        xf = tf.cast(x, tf.float32)
        dyf = tf.cast(dy, tf.float32)
        normed = (xf - mean) * inv
        d_gamma = _column_sums(dyf * normed)
        d_beta = _column_sums(dyf)
        dx = _row_moments_backward(dyf * gamma, normed, inv)
        return tf.cast(dx, x.dtype), d_gamma, d_beta

    @tf.custom_gradient
    def layer_norm(x, gamma, beta):
        y, mean, inv = forward(x, gamma, beta)
        return y, lambda dy: backward(x, gamma, mean, inv, dy)

    return layer_norm


def layer_norm(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float,
               out_dtype: tf.DType = tf.float32) -> tf.Tensor:
    """Layer normalisation over the last axis, as one fused kernel each way.

    Args:
      x: <float32 or bfloat16>[..., H].
      gamma, beta: <float32>[H], the scale and offset.
      epsilon: added to the variance.
      out_dtype: the output's dtype (the layer's compute dtype).

    Returns:
      <out_dtype>[..., H]; the gradient reaches x (in its dtype), gamma and beta.
    """
    return _layer_norm_kernels(float(epsilon), tf.as_dtype(out_dtype))(
        x, tf.cast(gamma, tf.float32), tf.cast(beta, tf.float32))


def _gelu_value_and_slope(x: tf.Tensor, approximate: bool) -> Tuple[tf.Tensor, tf.Tensor]:
    """GELU(x) and its derivative, float32 in and out."""
    if approximate:
        inner = _TANH_SCALE * (x + _TANH_CUBIC * x * x * x)
        t = tf.tanh(inner)
        value = 0.5 * x * (1.0 + t)
        slope = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _TANH_SCALE * (1.0 + 3.0 * _TANH_CUBIC * x * x)
        return value, slope
    cdf = 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))
    return x * cdf, cdf + x * tf.exp(-0.5 * x * x) * _INV_SQRT_2PI


@functools.lru_cache(maxsize=None)
def _gelu_kernels(approximate: bool) -> Callable:
    @tf.function(jit_compile=True)
    def forward(x):
        value, _ = _gelu_value_and_slope(tf.cast(x, tf.float32), approximate)
        return tf.cast(value, x.dtype)

    @tf.function(jit_compile=True)
    def backward(x, dy):
        _, slope = _gelu_value_and_slope(tf.cast(x, tf.float32), approximate)
        return tf.cast(tf.cast(dy, tf.float32) * slope, x.dtype)

    @tf.custom_gradient
    def gelu(x):
        return forward(x), lambda dy: backward(x, dy)

    return gelu


def gelu(x: tf.Tensor, approximate: bool = False) -> tf.Tensor:
    """GELU (exact, or the tanh approximation) as one fused kernel each way.

    Args:
      x: <float32 or bfloat16>[...]; computed in float32, returned in x's dtype.
    """
    return _gelu_kernels(bool(approximate))(x)


def _row_moments_backward(d_normed: tf.Tensor, normed: tf.Tensor, inv: tf.Tensor) -> tf.Tensor:
    """The gradient of a layer norm's input from that of its normalised values, <float32>[..., H]."""
    return inv * (d_normed - tf.reduce_mean(d_normed, axis=-1, keepdims=True)
                  - normed * tf.reduce_mean(d_normed * normed, axis=-1, keepdims=True))


@functools.lru_cache(maxsize=None)
def _residual_layer_norm_kernels(epsilon: float, out_dtype: tf.DType, biased: bool, rate: float) -> Callable:
    """The custom-gradient bias, dropout, residual sum and layer norm of one configuration."""
    threshold = keep_threshold(rate)
    scale = 1.0 / (1.0 - rate)

    def summed(x, bias, bits, residual):
        """<float32>: (x + bias) * dropout mask + residual, and the dropout mask (or None)."""
        xf = tf.cast(x, tf.float32)
        if biased:
            xf += bias
        mask = None
        if rate:
            mask = tf.where(bits >= threshold, scale, 0.0)
            xf *= mask
        return xf + tf.cast(residual, tf.float32), mask

    @tf.function(jit_compile=True)
    def forward(x, bias, bits, residual, gamma, beta):
        total, _ = summed(x, bias, bits, residual)
        mean, inv = _moments(total, epsilon)
        return tf.cast((total - mean) * inv * gamma + beta, out_dtype), mean, inv

    @tf.function(jit_compile=True)
    def backward(x, bias, bits, residual, gamma, mean, inv, dy):
        total, mask = summed(x, bias, bits, residual)
        normed = (total - mean) * inv
        dyf = tf.cast(dy, tf.float32)
        d_total = _row_moments_backward(dyf * gamma, normed, inv)
        d_biased = d_total * mask if rate else d_total
        d_bias = _column_sums(d_biased) if biased else tf.zeros([0])
        return (tf.cast(d_biased, x.dtype), d_bias, tf.cast(d_total, residual.dtype),
                _column_sums(dyf * normed), _column_sums(dyf))

    @tf.custom_gradient
    def residual_layer_norm(x, bias, bits, residual, gamma, beta):
        y, mean, inv = forward(x, bias, bits, residual, gamma, beta)

        def grad(dy):
            dx, d_bias, d_residual, d_gamma, d_beta = backward(x, bias, bits, residual, gamma, mean, inv, dy)
            return dx, (d_bias if biased else None), None, d_residual, d_gamma, d_beta

        return y, grad

    return residual_layer_norm


def residual_layer_norm(x: tf.Tensor, residual: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float,
                        bias: Optional[tf.Tensor] = None, dropout_bits: Optional[tf.Tensor] = None,
                        rate: float = 0.0, out_dtype: tf.DType = tf.float32) -> tf.Tensor:
    """LayerNorm((x + bias) * dropout + residual): a post-norm transformer's sublayer output, as one
    fused kernel each way.

    Args:
      x: <float32 or bfloat16>[..., H], a sublayer's output (before its bias, if `bias` is given).
      residual: <float32 or bfloat16>[..., H], the sublayer's input.
      gamma, beta: <float32>[H].
      epsilon: added to the variance.
      bias: optional <float>[H], added to x.
      dropout_bits: optional <uint16>[..., H] from `models.dropout.random_bits16`: a value of x is
        dropped where its bits are below `keep_threshold(rate)`, and kept ones are scaled by
        1 / (1 - rate), as `BitDropout` does.
      rate: the dropout rate (0: no dropout; `dropout_bits` is then not read).
      out_dtype: the output's dtype.

    Returns:
      <out_dtype>[..., H]; computed in float32; the gradient reaches x, residual, bias, gamma, beta.
    """
    if rate and dropout_bits is None:
        raise ValueError("a dropout rate needs dropout_bits")
    kernels = _residual_layer_norm_kernels(float(epsilon), tf.as_dtype(out_dtype), bias is not None, float(rate))
    empty = tf.zeros([0])  # Stands for an input left out; the kernels do not read it.
    return kernels(x, empty if bias is None else tf.cast(bias, tf.float32),
                   dropout_bits if rate else tf.zeros([0], tf.uint16), residual,
                   tf.cast(gamma, tf.float32), tf.cast(beta, tf.float32))


@functools.lru_cache(maxsize=None)
def _bias_gelu_kernels(approximate: bool) -> Callable:
    @tf.function(jit_compile=True)
    def forward(x, bias):
        value, _ = _gelu_value_and_slope(tf.cast(x, tf.float32) + bias, approximate)
        return tf.cast(value, x.dtype)

    @tf.function(jit_compile=True)
    def backward(x, bias, dy):
        _, slope = _gelu_value_and_slope(tf.cast(x, tf.float32) + bias, approximate)
        return tf.cast(tf.cast(dy, tf.float32) * slope, x.dtype)

    @tf.custom_gradient
    def bias_gelu(x, bias):
        def grad(dy):
            dz = backward(x, bias, dy)
            # The bias's gradient, outside XLA: for a wide layer XLA's CPU product needs the gradient
            # in float32 and runs slower than TensorFlow's (oneDNN's) product in the input's dtype
            # (15.9 against 8.3 ms for the whole backward pass at [32, 256, 1024] in bfloat16), which
            # accumulates in float32 as the unfused layer's sum does.
            rows = tf.reshape(dz, [-1, dz.shape[-1]])
            d_bias = tf.matmul(tf.ones([1, tf.shape(rows)[0]], dz.dtype), rows)
            return dz, tf.cast(tf.reshape(d_bias, [-1]), tf.float32)

        return forward(x, bias), grad

    return bias_gelu


def bias_gelu(x: tf.Tensor, bias: tf.Tensor, approximate: bool = False) -> tf.Tensor:
    """GELU(x + bias), a feed-forward layer's activation, as one fused kernel each way.

    Args:
      x: <float32 or bfloat16>[..., I], the product before its bias.
      bias: <float>[I].

    Returns:
      <x.dtype>[..., I], computed in float32; the gradient reaches x and bias.
    """
    return _bias_gelu_kernels(bool(approximate))(x, tf.cast(bias, tf.float32))


@functools.lru_cache(maxsize=None)
def _dropped_softmax_kernels(dropped: bool) -> Callable:
    @tf.function(jit_compile=True)
    def backward(p, keep, d_kept):
        g = tf.cast(d_kept, tf.float32)
        if dropped:
            g = tf.where(keep, g, 0.0)
        pf = tf.cast(p, tf.float32)
        return tf.cast(pf * (g - tf.reduce_sum(g * pf, axis=-1, keepdims=True)), p.dtype)

    @tf.custom_gradient
    def dropped_softmax(logits, keep):
        p = tf.nn.softmax(logits, axis=-1)
        kept = zero_dropped(p, keep) if dropped else tf.identity(p)

        def grad(d_kept, unused_d_p):
            return backward(p, keep, d_kept), None

        return (kept, tf.stop_gradient(p)), grad

    return dropped_softmax


def dropped_softmax(logits: tf.Tensor, keep: Optional[tf.Tensor] = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Attention probabilities with the dropped ones zeroed (not scaled), and their gradient as one
    fused kernel.

    The forward pass is TensorFlow's softmax (oneDNN's kernel; XLA's CPU softmax was no faster) and
    a bitwise AND; the backward pass, p * (g - sum(g * p)) with the dropped gradients zeroed, is one
    XLA kernel where TensorFlow runs five ops over [B, N, T, S] (11.4 against 18.3 ms at
    [32, 4, 256, 256] in bfloat16).

    Args:
      logits: <float>[..., S], the masked attention scores.
      keep: None (no dropout) or <bool>[..., S]: False zeroes the probability.

    Returns:
      (the dropped probabilities, the probabilities), <logits.dtype>[..., S] each. The gradient
      reaches `logits` through the first; the second is for inspection (Keras's
      `return_attention_scores`) and carries none.
    """
    kernels = _dropped_softmax_kernels(keep is not None)
    return kernels(logits, tf.zeros([0], tf.bool) if keep is None else keep)


def _fused_in_training(layer: tf_keras.layers.Layer) -> None:
    """What a layer of this module needs beyond its parent's state: the fused kernels read a
    bfloat16 input as it is (the layers' own calls cast where Keras would), and Keras passes
    `training` to a call only when the call's signature, read at construction, names it."""
    layer._autocast = False
    layer._init_call_fn_args()


def adopt(layer: tf_keras.layers.Layer, cls: type) -> tf_keras.layers.Layer:
    """Turns a built-in Keras layer into its subclass here, in place (`cls` is `TapasLayerNorm` for a
    `LayerNormalization`, `TapasActivation` for an `Activation`).

    For layers that another library's layer makes, e.g. tf-models' transformer block: the subclasses
    add no state, and a new object in the parent's attribute would be tracked last and reorder the
    parent's weights."""
    if not issubclass(cls, type(layer)):
        raise TypeError(f"{cls.__name__} is not a subclass of {type(layer).__name__}")
    layer.__class__ = cls
    _fused_in_training(layer)
    return layer


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasLayerNorm(tf_keras.layers.LayerNormalization):
    """Keras's layer normalisation (same arguments, weights and inference); in training over the last
    axis, `layer_norm`'s fused kernels.

    Call args:
      inputs: <float>[..., H]; cast to the compute dtype as Keras does.
      training: True for the fused kernels; anything else runs Keras's own ops.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _fused_in_training(self)

    def _fusable(self, inputs) -> bool:
        return (len(self.axis) == 1 and self.axis[0] in (-1, inputs.shape.rank - 1)
                and self.center and self.scale and not isinstance(inputs, tf.RaggedTensor))

    def call(self, inputs, training=None):
        if training is True and enabled() and self._fusable(inputs):
            return layer_norm(inputs, self.gamma, self.beta, self.epsilon, self.compute_dtype)
        return super().call(inputs)


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasActivation(tf_keras.layers.Activation):
    """Keras's `Activation`; in training, GELU (exact or tanh, by the function's name) runs as
    `gelu`'s fused kernels in the input's dtype, so that a bfloat16 input is not cast to float32
    and back around it. Other activations, and inference, are Keras's."""

    _FUSED = {"gelu_exact": False, "gelu_tanh": True}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _fused_in_training(self)

    def call(self, inputs, training=None):
        name = getattr(self.activation, "__name__", "")
        if training is True and enabled() and name in self._FUSED:
            return gelu(inputs, approximate=self._FUSED[name])
        return super().call(tf.cast(inputs, self.compute_dtype))
