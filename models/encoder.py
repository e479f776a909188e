"""The TAPAS encoder: our table embeddings + tf-models-official transformer blocks + pooler.

Each layer is an `official.nlp.modeling.layers.TransformerEncoderBlock` set up as post-LN BERT
(`norm_first=False`), with the cheaper dropout of `models.dropout` (`TapasTransformerBlock`).
Its weights, as `weight_map` names them (TF1 names under `bert/encoder/layer_{i}/`; H = hidden,
N = heads, D = H / N head size, I = intermediate):

    TF1 name                               ours               TF1 / HF layout
    attention/self/query/kernel            [H, N, D]          TF1 [H, H]; HF weight [H, H] transposed
    attention/self/query/bias              [N, D]             [H]
    attention/self/key/{kernel,bias}       as query
    attention/self/value/{kernel,bias}     as query
    attention/output/dense/kernel          [N, D, H]          TF1 [H, H]; HF transposed
    attention/output/dense/bias            [H]                [H]
    attention/output/LayerNorm/{gamma,beta} [H]               [H]
    intermediate/dense/kernel              [H, I]             TF1 [H, I]; HF [I, H]
    intermediate/dense/bias                [I]
    output/dense/kernel                    [I, H]             TF1 [I, H]; HF [H, I]
    output/dense/bias                      [H]
    output/LayerNorm/{gamma,beta}          [H]

A TF1 value reaches our shape by a plain reshape (row-major: the H output features of the
query, key and value projections are N heads of D features each); an HF `nn.Linear` weight is
transposed first. The pooler is `bert/pooler/dense/{kernel [H, H], bias [H]}`.

Dropout differs from BERT in one training-only detail: the block drops the attention output
with `attention_dropout` (attention_probs_dropout_prob) where BERT uses hidden_dropout_prob;
both default to 0.1.
"""

from typing import Any, Callable, Dict, Mapping, Sequence

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as nlp_layers

from tapas_tf.models.config import TapasConfig
from tapas_tf.models.embeddings import TapasEmbeddings
from tapas_tf.models.restricted_attention import table_segments
from tapas_tf.models.transformer_block import TapasTransformerBlock


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
def gelu_exact(x: tf.Tensor) -> tf.Tensor:
    """GELU with the exact erf (Hugging Face's "gelu")."""
    return tf.nn.gelu(x, approximate=False)


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
    """GELU with the tanh approximation (the original TF1 BERT and TAPAS code)."""
    return tf.nn.gelu(x, approximate=True)


# The one place where activation names become functions.
_ACTIVATIONS: Dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "gelu": gelu_exact,
    "gelu_tanh": gelu_tanh,
    "relu": tf.nn.relu,
}


def get_activation(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
    """Maps a `TapasConfig.hidden_act` name to its function."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"Unknown activation {name!r}; expected one of {sorted(_ACTIVATIONS)}.")
    return _ACTIVATIONS[name]


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasEncoder(tf_keras.layers.Layer):
    """BERT encoder with TAPAS embeddings.

    Args:
      vocab_size: int, number of word ids.
      hidden_size: int, width H of every layer.
      num_hidden_layers: int, number of transformer blocks.
      num_attention_heads: int, heads N per block; must divide hidden_size.
      intermediate_size: int, feed-forward width I.
      hidden_act: str, "gelu", "gelu_tanh" or "relu".
      hidden_dropout_prob: float, dropout on embeddings and block outputs.
      attention_probs_dropout_prob: float, dropout on attention probabilities.
      max_position_embeddings: int, size of the position table.
      type_vocab_sizes: sequence of 7 ints, token-type vocabulary sizes.
      initializer_range: float, stddev of the truncated normal initialiser.
      layer_norm_eps: float, LayerNorm epsilon.
      reset_position_index_per_cell: bool, positions restart in each cell.
      use_position_embeddings, use_column_embeddings, use_row_embeddings, use_rank_embeddings:
        bools, the ablation switches of `TapasEmbeddings` (off: that table is not created).
      use_question_match_embeddings: bool, add `TapasEmbeddings`' table of the word pieces the
        question and the table share.
      question_match_ignored_ids: sequence of word-piece ids that never match.
      add_pooling_layer: bool, build the [CLS] pooler (the MLM model can do without).
      attention_mode: str, "full" or "row_column" (MATE's row and column heads, linear in memory;
        `restricted_attention`), with `attention_block_size` and `global_attention_tokens`.

    Call args:
      features: dict with "input_ids", "input_mask" and the seven token-type features, each
        <int32>[batch, seq_len].
      training: bool, apply dropout.

    Returns:
      dict with "sequence_output" <float32>[batch, seq_len, hidden] and, with the pooler,
      "pooled_output" <float32>[batch, hidden] (tanh dense on the [CLS] vector).

    Example:

        encoder = TapasEncoder.from_tapas_config(TapasConfig.from_preset("tiny"))
        outputs = encoder(features)
        outputs["sequence_output"].shape  # [batch, seq_len, 128]
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        num_hidden_layers: int,
        num_attention_heads: int,
        intermediate_size: int,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 1024,
        type_vocab_sizes: Sequence[int] = (3, 256, 256, 2, 256, 256, 10),
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        reset_position_index_per_cell: bool = True,
        use_position_embeddings: bool = True,
        use_column_embeddings: bool = True,
        use_row_embeddings: bool = True,
        use_rank_embeddings: bool = True,
        use_question_match_embeddings: bool = False,
        question_match_ignored_ids: Sequence[int] = (),
        add_pooling_layer: bool = True,
        attention_mode: str = "full",
        attention_block_size: int = 64,
        global_attention_tokens: int = 64,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) is not divisible by num_attention_heads ({num_attention_heads})."
            )
        activation = get_activation(hidden_act)
        initializer = tf_keras.initializers.TruncatedNormal(stddev=initializer_range)

        # === Layers ===
        self.embeddings = TapasEmbeddings(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_sizes=type_vocab_sizes,
            initializer_range=initializer_range,
            layer_norm_eps=layer_norm_eps,
            dropout_rate=hidden_dropout_prob,
            reset_position_index_per_cell=reset_position_index_per_cell,
            use_position_embeddings=use_position_embeddings,
            use_column_embeddings=use_column_embeddings,
            use_row_embeddings=use_row_embeddings,
            use_rank_embeddings=use_rank_embeddings,
            use_question_match_embeddings=use_question_match_embeddings,
            question_match_ignored_ids=question_match_ignored_ids,
            name="embeddings",
        )
        self.attention_mask = nlp_layers.SelfAttentionMask(name="attention_mask")
        self.transformer_layers = [
            # Post-LN BERT block; the dropout rates map as described in the module docstring.
            TapasTransformerBlock(
                num_attention_heads=num_attention_heads,
                inner_dim=intermediate_size,
                inner_activation=activation,
                output_dropout=hidden_dropout_prob,
                attention_dropout=attention_probs_dropout_prob,
                norm_first=False,
                norm_epsilon=layer_norm_eps,
                kernel_initializer=initializer,
                attention_mode=attention_mode,
                row_heads=num_attention_heads // 2,
                attention_block_size=attention_block_size,
                global_attention_tokens=global_attention_tokens,
                name=f"layer_{i}",
            )
            for i in range(num_hidden_layers)
        ]
        self.pooler = None
        if add_pooling_layer:
            self.pooler = tf_keras.layers.Dense(
                hidden_size, activation="tanh", kernel_initializer=initializer, name="pooler"
            )

        # === Config ===
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_sizes = tuple(type_vocab_sizes)
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.reset_position_index_per_cell = reset_position_index_per_cell
        self.use_position_embeddings = use_position_embeddings
        self.use_column_embeddings = use_column_embeddings
        self.use_row_embeddings = use_row_embeddings
        self.use_rank_embeddings = use_rank_embeddings
        self.use_question_match_embeddings = use_question_match_embeddings
        self.question_match_ignored_ids = tuple(int(i) for i in question_match_ignored_ids)
        self.add_pooling_layer = add_pooling_layer
        self.attention_mode = attention_mode
        self.attention_block_size = attention_block_size
        self.global_attention_tokens = global_attention_tokens

    @classmethod
    def from_tapas_config(cls, config: TapasConfig, **kwargs) -> "TapasEncoder":
        """The encoder described by the encoder fields of `config`."""
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            num_hidden_layers=config.num_hidden_layers,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            hidden_act=config.hidden_act,
            hidden_dropout_prob=config.hidden_dropout_prob,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            max_position_embeddings=config.max_position_embeddings,
            type_vocab_sizes=config.type_vocab_sizes,
            initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps,
            reset_position_index_per_cell=config.reset_position_index_per_cell,
            use_position_embeddings=config.use_position_embeddings,
            use_column_embeddings=config.use_column_embeddings,
            use_row_embeddings=config.use_row_embeddings,
            use_rank_embeddings=config.use_rank_embeddings,
            use_question_match_embeddings=config.use_question_match_embeddings,
            question_match_ignored_ids=config.question_match_ignored_ids,
            attention_mode=config.attention_mode,
            attention_block_size=config.attention_block_size,
            global_attention_tokens=config.global_attention_tokens,
            **kwargs,
        )

    def call(self, features: Mapping[str, tf.Tensor], training=None) -> Dict[str, tf.Tensor]:
        if "input_mask" not in features:
            raise ValueError("TapasEncoder needs the feature input_mask.")
        hidden = self.embeddings(features, training=training)
        if self.attention_mode == "row_column":
            # <int32>[batch, 3, seq_len]: what each block's row and column heads read.
            mask = table_segments(features)
        else:
            # <float32>[batch, seq_len, seq_len]: 1 where the key token is real, 0 for padding.
            mask = self.attention_mask(hidden, tf.cast(features["input_mask"], tf.int32))
        for layer in self.transformer_layers:
            hidden = layer([hidden, mask], training=training)
        outputs = {"sequence_output": hidden}
        if self.pooler is not None:
            outputs["pooled_output"] = self.pooler(hidden[:, 0, :])
        return outputs

    def get_embedding_table(self) -> tf.Variable:
        """The word embedding table <float32>[vocab_size, hidden] (for a tied MLM decoder)."""
        return self.embeddings.embedding_table

    def weight_map(self, prefix: str = "bert") -> Dict[str, tf.Variable]:
        """TF1 checkpoint name -> variable for the embeddings, every layer and the pooler.

        See the module docstring for the shapes. The encoder must be built (called once).
        """
        if not self.built:
            raise ValueError("Call the encoder once (or build the model) before asking for its weight map.")
        names = self.embeddings.weight_map(f"{prefix}/embeddings")
        for i, layer in enumerate(self.transformer_layers):
            names.update(_block_weight_map(layer, f"{prefix}/encoder/layer_{i}"))
        if self.pooler is not None:
            names[f"{prefix}/pooler/dense/kernel"] = self.pooler.kernel
            names[f"{prefix}/pooler/dense/bias"] = self.pooler.bias
        return names

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "num_hidden_layers": self.num_hidden_layers,
                "num_attention_heads": self.num_attention_heads,
                "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act,
                "hidden_dropout_prob": self.hidden_dropout_prob,
                "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_sizes": list(self.type_vocab_sizes),
                "initializer_range": self.initializer_range,
                "layer_norm_eps": self.layer_norm_eps,
                "reset_position_index_per_cell": self.reset_position_index_per_cell,
                "use_position_embeddings": self.use_position_embeddings,
                "use_column_embeddings": self.use_column_embeddings,
                "use_row_embeddings": self.use_row_embeddings,
                "use_rank_embeddings": self.use_rank_embeddings,
                "use_question_match_embeddings": self.use_question_match_embeddings,
                "question_match_ignored_ids": list(self.question_match_ignored_ids),
                "add_pooling_layer": self.add_pooling_layer,
                "attention_mode": self.attention_mode,
                "attention_block_size": self.attention_block_size,
                "global_attention_tokens": self.global_attention_tokens,
            }
        )
        return config


def _block_weight_map(block: tf_keras.layers.Layer, prefix: str) -> Dict[str, tf.Variable]:
    """TF1 names of one TransformerEncoderBlock's variables (its private sub-layers)."""
    try:
        attention = block._attention_layer
        parts = {
            "attention/self/query": attention._query_dense,
            "attention/self/key": attention._key_dense,
            "attention/self/value": attention._value_dense,
            "attention/output/dense": attention._output_dense,
            "attention/output/LayerNorm": block._attention_layer_norm,
            "intermediate/dense": block._intermediate_dense,
            "output/dense": block._output_dense,
            "output/LayerNorm": block._output_layer_norm,
        }
    except AttributeError as e:
        raise ValueError(
            f"TransformerEncoderBlock {block.name} does not have the expected sub-layers "
            f"(tf-models-official changed?): {e}"
        ) from e
    names = {}
    for name, layer in parts.items():
        if isinstance(layer, tf_keras.layers.LayerNormalization):
            names[f"{prefix}/{name}/gamma"] = layer.gamma
            names[f"{prefix}/{name}/beta"] = layer.beta
        else:
            names[f"{prefix}/{name}/kernel"] = layer.kernel
            names[f"{prefix}/{name}/bias"] = layer.bias
    return names

