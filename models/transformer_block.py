"""tf-models-official's transformer block with `BitDropout` in place of Keras's dropout.

`TapasTransformerBlock` is `official.nlp.modeling.layers.TransformerEncoderBlock` (same
arguments, weights, variable names and checkpoints) whose three dropouts (the attention
probabilities, the attention output and the block output) are `models.dropout.BitDropout`: in a
CPU training step they cost a third of the time of a bfloat16 step and a fifth of a float32 one
when Keras's dropout draws a float per value (see `models/dropout.py`). In training, the block
(BERT's post-norm one) ends each sublayer with one fused kernel for its bias, dropout, residual sum
and layer norm, runs the feed-forward bias and GELU as one, and the attention softmax's backward
pass as one (`models/fused.py`); the matrix products stay TensorFlow's. In inference all of these
are Keras's own, so a trained model answers exactly as before.
"""

import math

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as nlp_layers

from tapas_tf.models.dropout import BitDropout
from tapas_tf.models import fused
from tapas_tf.models.fused import TapasActivation, TapasLayerNorm, adopt
from tapas_tf.models.restricted_attention import restricted_attention


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasSelfAttention(tf_keras.layers.MultiHeadAttention):
    """Keras's multi-head attention, its probabilities dropped by `BitDropout`.

    The dropped probabilities are zeroed but not scaled; the context they weigh is scaled by
    1 / (1 - rate) instead: the same product, with the multiply on <[batch, seq_len, heads,
    head_size]> rather than <[batch, heads, seq_len, seq_len]> (8 times fewer values at 512
    tokens and a head size of 64).
    """

    def _build_attention(self, rank):
        super()._build_attention(rank)
        self._dropout_layer = BitDropout(rate=self._dropout, dtype=self._dtype_policy)

    def _compute_attention(self, query, key, value, attention_mask=None, training=None):
        """As Keras's (query <[B, T, N, key_dim]>, key and value <[B, S, N, dim]>, mask <[B, T, S]>);
        returns (context <[B, T, N, value_dim]>, probabilities <[B, N, T, S]>). With row and column
        heads (`restricted`: (row_heads, block_size, global_tokens)) the mask is the table's
        segments <int32>[B, 3, T] and no probabilities are returned (None): there is no T x T matrix."""
        query = tf.multiply(query, 1.0 / math.sqrt(float(self._key_dim)))
        restricted = getattr(self, "restricted", None)
        if restricted is not None and attention_mask is not None and attention_mask.dtype.is_integer:
            row_heads, block_size, global_tokens = restricted
            context = restricted_attention(query, key, value, attention_mask, row_heads, block_size, global_tokens,
                                           self._dropout_layer, training)
            return context, None
        scores = tf.einsum(self._dot_product_equation, key, query)
        if training is True and fused.enabled():
            dropped, probabilities, scale = self._fused_softmax(scores, attention_mask)
        else:
            probabilities = self._masked_softmax(scores, attention_mask)
            dropped, scale = self._dropout_layer.call_unscaled(probabilities, training=training)
        context = tf.einsum(self._combine_equation, dropped, value)
        return (context if scale is None else context * scale), probabilities

    def _fused_softmax(self, scores, attention_mask):
        """Training: Keras's masked scores, then `fused.dropped_softmax` (the softmax and the
        dropout's AND; the backward pass one fused kernel). Returns what `call_unscaled` would: the
        dropped probabilities, the probabilities (which carry no gradient here) and the scale."""
        if attention_mask is not None:
            for _ in range(scores.shape.rank - attention_mask.shape.rank):
                attention_mask = tf.expand_dims(attention_mask, axis=-len(self._attention_axes) * 2 - 1)
            # Keras's Softmax layer's additive mask (-1e9; float16's lowest for float16).
            lowest = tf.float16.min if scores.dtype == tf.float16 else -1e9
            scores += (1.0 - tf.cast(attention_mask, scores.dtype)) * tf.cast(lowest, scores.dtype)
        dropout = self._dropout_layer
        keep = dropout.draw_keep(tf.shape(scores)) if dropout.rate else None
        dropped, probabilities = fused.dropped_softmax(scores, keep)
        scale = None if keep is None else tf.cast(1.0 / (1.0 - dropout.rate), scores.dtype)
        return dropped, probabilities, scale


def _built(layer: tf_keras.layers.Layer, width: int) -> tf_keras.layers.Layer:
    """`layer`, built for inputs <[batch, seq_len, width]> if it was not: the fused path reads its
    weights without calling it. Built where its first call would build it, in the parent's call
    order and the layer's name scope, so the weights' names, their order and (from a seed) their
    initial values are the parent block's."""
    if not layer.built:
        with tf.name_scope(layer.name):
            layer.build(tf.TensorShape([None, None, width]))
    return layer


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasTransformerBlock(nlp_layers.TransformerEncoderBlock):
    """`TransformerEncoderBlock` with `BitDropout`; arguments and call as the parent's.

    Call args:
      inputs: [hidden <float32>[batch, seq_len, hidden], mask <float32>[batch, seq_len, seq_len]], or
        with attention_mode "row_column" the table's segments <int32>[batch, 3, seq_len]
        (`restricted_attention.table_segments`) as the mask.
      training: bool, apply dropout.

    Returns:
      <float32>[batch, seq_len, hidden] (the compute dtype under a mixed policy).
    """

    def __init__(self, *args, attention_mode: str = "full", row_heads: int = 0, attention_block_size: int = 64,
                 global_attention_tokens: int = 64, **kwargs):
        super().__init__(*args, **kwargs)
        self.attention_mode = attention_mode
        self.row_heads = row_heads
        self.attention_block_size = attention_block_size
        self.global_attention_tokens = global_attention_tokens

    def get_config(self):
        config = super().get_config()
        config.update(attention_mode=self.attention_mode, row_heads=self.row_heads,
                      attention_block_size=self.attention_block_size,
                      global_attention_tokens=self.global_attention_tokens)
        return config

    def build(self, input_shape):
        if self.attention_mode == "row_column":  # The mask is <int32>[B, 3, T]; the parent reads only hidden.
            input_shape = [input_shape[0], tf.TensorShape([input_shape[0][0], input_shape[0][1], input_shape[0][1]])]
        super().build(input_shape)
        # The parent made its attention layer as Keras's class; it builds (and makes its dropout)
        # on its first call. It becomes a TapasSelfAttention in place: a new object in its
        # attribute would be tracked last and reorder the block's weights (`get_weights`), while
        # the subclass adds no state, only its own `_build_attention`.
        if type(self._attention_layer) is tf_keras.layers.MultiHeadAttention:
            self._attention_layer.__class__ = TapasSelfAttention
        if self.attention_mode == "row_column":
            self._attention_layer.restricted = (self.row_heads, self.attention_block_size, self.global_attention_tokens)
        self._attention_dropout = BitDropout(rate=self._attention_dropout_rate)
        self._output_dropout = BitDropout(rate=self._output_dropout_rate)
        # Layer norms and the feed-forward activation run as fused kernels in training
        # (`models/fused.py`); same objects, so the weights keep their order.
        for norm in (self._attention_layer_norm, self._output_layer_norm):
            if type(norm) is tf_keras.layers.LayerNormalization:
                adopt(norm, TapasLayerNorm)
        if type(self._intermediate_activation_layer) is tf_keras.layers.Activation:
            adopt(self._intermediate_activation_layer, TapasActivation)

    def _fused_gelu(self):
        """True (tanh) or False (exact) for a GELU the fused path computes, None for another activation."""
        name = getattr(self._intermediate_activation_layer.activation, "__name__", "")
        return TapasActivation._FUSED.get(name)

    def _fuses(self, inputs, output_range) -> bool:
        """Whether this call is one the fused training path computes: BERT's post-norm block."""
        return (isinstance(inputs, (list, tuple)) and len(inputs) == 2 and not output_range
                and not self._output_range and not self._norm_first and self._use_query_residual
                and self._linformer_dim is None and not self._return_attention_scores
                and not self._inner_dropout and not self._use_rms_norm and self._fused_gelu() is not None
                and isinstance(self._attention_layer_norm, TapasLayerNorm)
                and isinstance(self._output_layer_norm, TapasLayerNorm))

    def call(self, inputs, output_range=None, training=None):
        if training is not True or not fused.enabled() or not self._fuses(inputs, output_range):
            return super().call(inputs, output_range=output_range)
        hidden, attention_mask = inputs
        # One cast of the (float32 under a mixed policy) hidden states for the three projections,
        # where each of them would cast its own copy.
        source = tf.cast(hidden, self._attention_layer.compute_dtype)
        attended = self._attention_layer(query=source, key=source, value=source, attention_mask=attention_mask)
        width = hidden.shape[-1]
        attended = self._residual_norm(attended, hidden, _built(self._attention_layer_norm, width),
                                       self._attention_dropout)
        intermediate = _built(self._intermediate_dense, width)
        compute_dtype = intermediate.compute_dtype
        inner = tf.einsum(intermediate.equation, tf.cast(attended, compute_dtype),
                          tf.cast(intermediate.kernel, compute_dtype))
        inner = fused.bias_gelu(inner, intermediate.bias, approximate=self._fused_gelu())
        output_dense = _built(self._output_dense, self._inner_dim)
        output = tf.einsum(output_dense.equation, inner, tf.cast(output_dense.kernel, compute_dtype))
        return self._residual_norm(output, attended, _built(self._output_layer_norm, width), self._output_dropout,
                                   bias=output_dense.bias)

    @staticmethod
    def _residual_norm(x, residual, norm: TapasLayerNorm, dropout: BitDropout, bias=None):
        """norm((x + bias) * dropout + residual) as `fused.residual_layer_norm`'s kernels."""
        bits = dropout.draw_bits(tf.shape(x)) if dropout.rate else None
        return fused.residual_layer_norm(x, residual, norm.gamma, norm.beta, norm.epsilon, bias=bias,
                                         dropout_bits=bits, rate=dropout.rate, out_dtype=norm.compute_dtype)
