"""TapasTransformerBlock: tf-models' block with BitDropout, and the same weights and answers."""

import numpy as np
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as nlp_layers

from tapas_tf.models.dropout import BitDropout
from tapas_tf.models.transformer_block import TapasSelfAttention, TapasTransformerBlock

ARGS = dict(num_attention_heads=2, inner_dim=32, inner_activation="gelu", output_dropout=0.1,
            attention_dropout=0.1, norm_first=False, name="layer_0")


def _inputs():
    hidden = tf.random.stateless_normal([2, 6, 16], seed=[1, 2])
    mask = tf.constant(np.tril(np.ones([2, 6, 6], np.float32)))
    return [hidden, mask]


def test_same_variables_and_same_inference_output_as_the_parent_block():
    ours, theirs = TapasTransformerBlock(**ARGS), nlp_layers.TransformerEncoderBlock(**ARGS)
    inputs = _inputs()
    ours(inputs), theirs(inputs)
    assert [v.name for v in ours.weights] == [v.name for v in theirs.weights]
    assert [v.shape for v in ours.weights] == [v.shape for v in theirs.weights]
    ours.set_weights(theirs.get_weights())
    np.testing.assert_array_equal(ours(inputs, training=False).numpy(), theirs(inputs, training=False).numpy())


def test_every_dropout_of_the_block_draws_bits():
    block = TapasTransformerBlock(**ARGS)
    block(_inputs(), training=True)
    assert isinstance(block._attention_layer, TapasSelfAttention)
    assert isinstance(block._attention_layer._dropout_layer, BitDropout)
    assert isinstance(block._attention_dropout, BitDropout) and isinstance(block._output_dropout, BitDropout)
    assert (block._attention_layer._dropout_layer.rate, block._output_dropout.rate) == (0.1, 0.1)


def test_training_output_differs_between_calls_and_inference_does_not():
    block = TapasTransformerBlock(**ARGS)
    inputs = _inputs()
    first, second = (block(inputs, training=True).numpy() for _ in range(2))
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(block(inputs, training=False).numpy(), block(inputs, training=False).numpy())


def test_a_checkpoint_of_the_parent_block_restores_into_ours(tmp_path):
    theirs = nlp_layers.TransformerEncoderBlock(**ARGS)
    inputs = _inputs()
    expected = theirs(inputs, training=False).numpy()
    path = tf.train.Checkpoint(block=theirs).save(str(tmp_path / "ckpt"))
    ours = TapasTransformerBlock(**ARGS)
    ours(inputs)
    tf.train.Checkpoint(block=ours).restore(path).assert_consumed()
    np.testing.assert_array_equal(ours(inputs, training=False).numpy(), expected)


def test_config_round_trip():
    block = TapasTransformerBlock(**ARGS)
    again = tf_keras.layers.deserialize(tf_keras.layers.serialize(block))
    assert isinstance(again, TapasTransformerBlock) and again.get_config() == block.get_config()
