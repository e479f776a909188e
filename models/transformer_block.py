"""tf-models-official's transformer block with `BitDropout` in place of Keras's dropout.

`TapasTransformerBlock` is `official.nlp.modeling.layers.TransformerEncoderBlock` (same
arguments, weights, variable names and checkpoints) whose three dropouts (the attention
probabilities, the attention output and the block output) are `models.dropout.BitDropout`: in a
CPU training step they cost a third of the time of a bfloat16 step and a fifth of a float32 one
when Keras's dropout draws a float per value (see `models/dropout.py`). In inference both are the
identity, so a trained model answers exactly as before.
"""

import math

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as nlp_layers

from tapas_tf.models.dropout import BitDropout


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
        returns (context <[B, T, N, value_dim]>, probabilities <[B, N, T, S]>)."""
        query = tf.multiply(query, 1.0 / math.sqrt(float(self._key_dim)))
        scores = tf.einsum(self._dot_product_equation, key, query)
        probabilities = self._masked_softmax(scores, attention_mask)
        dropped, scale = self._dropout_layer.call_unscaled(probabilities, training=training)
        context = tf.einsum(self._combine_equation, dropped, value)
        return (context if scale is None else context * scale), probabilities


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasTransformerBlock(nlp_layers.TransformerEncoderBlock):
    """`TransformerEncoderBlock` with `BitDropout`; arguments and call as the parent's.

    Call args:
      inputs: [hidden <float32>[batch, seq_len, hidden], mask <float32>[batch, seq_len, seq_len]].
      training: bool, apply dropout.

    Returns:
      <float32>[batch, seq_len, hidden] (the compute dtype under a mixed policy).
    """

    def build(self, input_shape):
        super().build(input_shape)
        # The parent made its attention layer as Keras's class; it builds (and makes its dropout)
        # on its first call. It becomes a TapasSelfAttention in place: a new object in its
        # attribute would be tracked last and reorder the block's weights (`get_weights`), while
        # the subclass adds no state, only its own `_build_attention`.
        if type(self._attention_layer) is tf_keras.layers.MultiHeadAttention:
            self._attention_layer.__class__ = TapasSelfAttention
        self._attention_dropout = BitDropout(rate=self._attention_dropout_rate)
        self._output_dropout = BitDropout(rate=self._output_dropout_rate)
