"""TAPAS input embeddings: word + position + seven table token types, then LayerNorm and dropout.

The seven token types tell the encoder where a token sits in the table:

    feature            vocab  meaning
    segment_ids          3    0 question, 1 table
    column_ids         256    column, from 1; 0 for question and padding
    row_ids            256    row, from 1 for body rows; 0 for question, header and padding
    prev_label_ids       2    1 if the token was in the previous answer (SQA)
    column_ranks       256    rank of the cell's value in its column, 0 if none
    inv_column_ranks   256    rank in reverse order
    numeric_relations   10    bit set of relations between the question's numbers and the cell

With `reset_position_index_per_cell`, a token's position restarts at 0 at the first token of its
cell, so the position says where the token is inside its cell. A hand-drawn example:

    token        [CLS] how many [SEP] name age  bob  4  ##2
    column_ids     0    0   0    0     1    2    1   2   2
    row_ids        0    0   0    0     0    0    1   1   1
    position       0    1   2    3     0    0    0   0   1

Question tokens and padding share cell (0, 0), whose first token is [CLS], so they keep their
absolute positions.

With `use_question_match_embeddings` (off by default, and absent from released TAPAS models), an
eighth table marks the word pieces the question and the table share: 1 on a table token whose id
also occurs in the question, 2 on a question token whose id also occurs in the table, 0 elsewhere.
It is computed in the model from input_ids and segment_ids (`question_match_ids`), so the data
and the exported signatures do not change. [PAD] and the ids in `question_match_ignored_ids`
(special tokens, punctuation, function words) never match. A two-layer model learns string matching slowly from
attention alone; this hands it the overlap directly, as the exact-match features of reading
comprehension models do.

The ablations of the paper's Table 7 switch single embeddings off: `use_position_embeddings`,
`use_column_embeddings` (column_ids), `use_row_embeddings` (row_ids) and `use_rank_embeddings`
(column_ranks and inv_column_ranks). A switched-off table is not created and adds nothing to the
sum; the ids themselves are still read elsewhere (cell positions, the cell index of the heads).
"""

from typing import Any, Dict, Mapping, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

# TOKEN_TYPE_FEATURES: the seven token-type feature names, in the order of `type_vocab_sizes`.
from tapas_tf.features.example_features import TOKEN_TYPE_FEATURES
from tapas_tf.models.dropout import BitDropout
from tapas_tf.models.fused import TapasLayerNorm

# Token-type features whose table an ablation switch (a constructor argument) can remove.
TOKEN_TYPE_SWITCHES: Dict[str, str] = {
    "column_ids": "use_column_embeddings",
    "row_ids": "use_row_embeddings",
    "column_ranks": "use_rank_embeddings",
    "inv_column_ranks": "use_rank_embeddings",
}


def cell_position_ids(column_ids: tf.Tensor, row_ids: tf.Tensor, max_position_embeddings: int) -> tf.Tensor:
    """Position of every token relative to the first token of its cell.

    A cell is a (column_id, row_id) pair, so question and padding tokens (cell (0, 0)) count
    from [CLS]. Positions are capped at max_position_embeddings - 1, as Hugging Face does.
    The first token of each cell is found by comparing every pair of tokens: the [batch, seq,
    seq] comparison is smaller than one attention map, fuses into a reduction under XLA and,
    unlike a segment reduction, does not depend on the size of the id vocabularies.

    Args:
      column_ids: <int32>[batch, seq_len].
      row_ids: <int32>[batch, seq_len].
      max_position_embeddings: int, size of the position table.

    Returns:
      <int32>[batch, seq_len] position ids.
    """
    column_ids = tf.convert_to_tensor(column_ids)
    row_ids = tf.convert_to_tensor(row_ids)
    seq_length = tf.shape(column_ids)[1]
    positions = tf.range(seq_length, dtype=tf.int32)
    # same_cell[b, i, j]: tokens i and j of example b are in the same cell.
    same_cell = tf.logical_and(
        tf.equal(column_ids[:, :, None], column_ids[:, None, :]),
        tf.equal(row_ids[:, :, None], row_ids[:, None, :]),
    )
    # j = i is always in the same cell, so the minimum is at most i.
    first_position = tf.reduce_min(tf.where(same_cell, positions[None, None, :], seq_length), axis=-1)
    return tf.minimum(positions[None, :] - first_position, max_position_embeddings - 1)


# The values of `question_match_ids`.
NO_MATCH, TABLE_TOKEN_IN_QUESTION, QUESTION_TOKEN_IN_TABLE = 0, 1, 2
QUESTION_MATCH_VOCAB_SIZE = 3


def question_match_ids(input_ids: tf.Tensor, segment_ids: tf.Tensor, countable: tf.Tensor) -> tf.Tensor:
    """Which tokens' word pieces occur on the other side of [SEP].

    Args:
      input_ids: <int32>[batch, seq_len].
      segment_ids: <int32>[batch, seq_len], 0 for the question (and padding), 1 for the table.
      countable: <bool>[vocab_size], false for the word pieces that never match
        (`countable_pieces`).

    Returns:
      <int32>[batch, seq_len]: TABLE_TOKEN_IN_QUESTION on a table token whose id is also a
      question token's, QUESTION_TOKEN_IN_TABLE on a question token whose id is also a table
      token's, NO_MATCH elsewhere.
    """
    input_ids = tf.convert_to_tensor(input_ids, tf.int32)
    segment_ids = tf.convert_to_tensor(segment_ids, tf.int32)
    counts = tf.gather(countable, input_ids)
    question = tf.logical_and(counts, tf.equal(segment_ids, 0))
    table = tf.logical_and(counts, tf.equal(segment_ids, 1))
    # same_id[b, i, j]: tokens i and j of example b are the same word piece.
    same_id = tf.equal(input_ids[:, :, None], input_ids[:, None, :])
    in_question = tf.reduce_any(tf.logical_and(same_id, question[:, None, :]), axis=-1)
    in_table = tf.reduce_any(tf.logical_and(same_id, table[:, None, :]), axis=-1)
    table_match = tf.cast(tf.logical_and(table, in_question), tf.int32) * TABLE_TOKEN_IN_QUESTION
    question_match = tf.cast(tf.logical_and(question, in_table), tf.int32) * QUESTION_TOKEN_IN_TABLE
    return table_match + question_match


def countable_pieces(vocab_size: int, ignored_ids: Sequence[int]) -> tf.Tensor:
    """<bool>[vocab_size]: false at id 0 ([PAD]) and at every id of `ignored_ids`."""
    countable = np.ones([vocab_size], dtype=bool)
    countable[0] = False
    countable[np.asarray(list(ignored_ids), dtype=np.int64)] = False
    return tf.constant(countable)


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasEmbeddings(tf_keras.layers.Layer):
    """Sums word, position and the seven token-type embeddings, then LayerNorm and dropout.

    Weights (TF1 checkpoint names under `bert/embeddings/`, see `weight_map`):
      word_embeddings <float32>[vocab_size, hidden]; position_embeddings
      <float32>[max_position_embeddings, hidden]; token_type_embeddings_{i}
      <float32>[type_vocab_sizes[i], hidden] for i in 0..6; LayerNorm gamma and beta
      <float32>[hidden]. A table switched off below is not created (its attribute, or its entry
      of `token_type_embeddings`, is None) and is missing from `weight_map`. With
      `use_question_match_embeddings`, question_match_embeddings <float32>[3, hidden] too.

    Args:
      vocab_size: int, number of word ids.
      hidden_size: int, embedding width.
      max_position_embeddings: int, size of the position table.
      type_vocab_sizes: sequence of 7 ints, sizes of the token-type tables.
      initializer_range: float, stddev of the truncated normal initialiser.
      layer_norm_eps: float, LayerNorm epsilon.
      dropout_rate: float, dropout on the normalised sum.
      reset_position_index_per_cell: bool, use `cell_position_ids` instead of absolute positions.
      use_position_embeddings: bool, add the position table (off: no position information).
      use_column_embeddings: bool, add the column_ids table (token_type_embeddings_1).
      use_row_embeddings: bool, add the row_ids table (token_type_embeddings_2).
      use_rank_embeddings: bool, add the column_ranks and inv_column_ranks tables
        (token_type_embeddings_4 and _5).
      use_question_match_embeddings: bool, add the table of `question_match_ids`.
      question_match_ignored_ids: sequence of word-piece ids that never match.

    Call args:
      features: dict with "input_ids" and the seven `TOKEN_TYPE_FEATURES`, each
        <int32>[batch, seq_len].
      training: bool, apply dropout.

    Returns:
      <float32>[batch, seq_len, hidden].
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        max_position_embeddings: int,
        type_vocab_sizes: Sequence[int],
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        dropout_rate: float = 0.1,
        reset_position_index_per_cell: bool = True,
        use_position_embeddings: bool = True,
        use_column_embeddings: bool = True,
        use_row_embeddings: bool = True,
        use_rank_embeddings: bool = True,
        use_question_match_embeddings: bool = False,
        question_match_ignored_ids: Sequence[int] = (),
        **kwargs,
    ):
        super().__init__(**kwargs)
        if len(type_vocab_sizes) != len(TOKEN_TYPE_FEATURES):
            raise ValueError(
                f"type_vocab_sizes must have {len(TOKEN_TYPE_FEATURES)} entries "
                f"({', '.join(TOKEN_TYPE_FEATURES)}), got {list(type_vocab_sizes)}."
            )
        # === Layers ===
        self.layer_norm = TapasLayerNorm(axis=-1, epsilon=layer_norm_eps, name="LayerNorm")
        self.dropout = BitDropout(rate=dropout_rate)

        # === Config ===
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_sizes = tuple(type_vocab_sizes)
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout_rate = dropout_rate
        self.reset_position_index_per_cell = reset_position_index_per_cell
        self.use_position_embeddings = use_position_embeddings
        self.use_column_embeddings = use_column_embeddings
        self.use_row_embeddings = use_row_embeddings
        self.use_rank_embeddings = use_rank_embeddings
        self.use_question_match_embeddings = use_question_match_embeddings
        self.question_match_ignored_ids = tuple(int(i) for i in question_match_ignored_ids)

    def _uses_token_type(self, feature: str) -> bool:
        """False when an ablation switch removes the table of token-type `feature`."""
        switch = TOKEN_TYPE_SWITCHES.get(feature)
        return switch is None or bool(getattr(self, switch))

    def build(self, input_shape=None):
        self.word_embeddings = self._table("word_embeddings", self.vocab_size)
        self.position_embeddings = None
        if self.use_position_embeddings:
            self.position_embeddings = self._table("position_embeddings", self.max_position_embeddings)
        # One entry per token type; None where an ablation switch removes the table.
        self.token_type_embeddings = [
            self._table(f"token_type_embeddings_{i}", size) if self._uses_token_type(feature) else None
            for i, (feature, size) in enumerate(zip(TOKEN_TYPE_FEATURES, self.type_vocab_sizes))
        ]
        self.question_match_embeddings = None
        if self.use_question_match_embeddings:
            self.question_match_embeddings = self._table("question_match_embeddings", QUESTION_MATCH_VOCAB_SIZE)
            self._countable_pieces = countable_pieces(self.vocab_size, self.question_match_ignored_ids)
        with tf.name_scope(self.layer_norm.name):
            self.layer_norm.build([None, None, self.hidden_size])
        super().build(input_shape)

    def _table(self, name: str, rows: int) -> tf.Variable:
        return self.add_weight(
            name=name,
            shape=(rows, self.hidden_size),
            initializer=tf_keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )

    def call(self, features: Mapping[str, tf.Tensor], training=None) -> tf.Tensor:
        missing = [key for key in ("input_ids",) + TOKEN_TYPE_FEATURES if key not in features]
        if missing:
            raise ValueError(f"TapasEmbeddings needs features {', '.join(missing)}.")
        input_ids = tf.cast(features["input_ids"], tf.int32)
        embeddings = tf.gather(self.word_embeddings, input_ids)
        if self.position_embeddings is not None:
            embeddings += tf.gather(self.position_embeddings, self._position_ids(features, input_ids))
        for name, table in zip(TOKEN_TYPE_FEATURES, self.token_type_embeddings):
            if table is not None:
                embeddings += tf.gather(table, tf.cast(features[name], tf.int32))
        if self.question_match_embeddings is not None:
            matches = question_match_ids(input_ids, tf.cast(features["segment_ids"], tf.int32),
                                         self._countable_pieces)
            embeddings += tf.gather(self.question_match_embeddings, matches)
        return self.dropout(self.layer_norm(embeddings, training=training), training=training)

    def _position_ids(self, features: Mapping[str, tf.Tensor], input_ids: tf.Tensor) -> tf.Tensor:
        """<int32>[batch or 1, seq_len]: positions in the cell, or absolute positions."""
        if self.reset_position_index_per_cell:
            return cell_position_ids(
                tf.cast(features["column_ids"], tf.int32),
                tf.cast(features["row_ids"], tf.int32),
                self.max_position_embeddings,
            )
        return tf.range(tf.shape(input_ids)[1])[None, :]

    @property
    def embedding_table(self) -> tf.Variable:
        """The word embedding table <float32>[vocab_size, hidden], tied to the MLM decoder."""
        return self.word_embeddings

    def weight_map(self, prefix: str = "bert/embeddings") -> Dict[str, tf.Variable]:
        """TF1 checkpoint name -> variable; every shape equals the TF1 shape.

        Tables switched off are left out; `disabled_weight_names` lists their names.
        """
        names = {"word_embeddings": self.word_embeddings}
        if self.position_embeddings is not None:
            names["position_embeddings"] = self.position_embeddings
        for i, table in enumerate(self.token_type_embeddings):
            if table is not None:
                names[f"token_type_embeddings_{i}"] = table
        if self.question_match_embeddings is not None:
            names["question_match_embeddings"] = self.question_match_embeddings
        names["LayerNorm/gamma"] = self.layer_norm.gamma
        names["LayerNorm/beta"] = self.layer_norm.beta
        return {f"{prefix}/{name}": variable for name, variable in names.items()}

    def disabled_weight_names(self, prefix: str = "bert/embeddings") -> Dict[str, str]:
        """TF1 name of every table an ablation switch removes -> the switch, e.g.
        {"bert/embeddings/token_type_embeddings_2": "use_row_embeddings"}."""
        disabled = {}
        if not self.use_position_embeddings:
            disabled[f"{prefix}/position_embeddings"] = "use_position_embeddings"
        for i, feature in enumerate(TOKEN_TYPE_FEATURES):
            if not self._uses_token_type(feature):
                disabled[f"{prefix}/token_type_embeddings_{i}"] = TOKEN_TYPE_SWITCHES[feature]
        return disabled

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "hidden_size": self.hidden_size,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_sizes": list(self.type_vocab_sizes),
                "initializer_range": self.initializer_range,
                "layer_norm_eps": self.layer_norm_eps,
                "dropout_rate": self.dropout_rate,
                "reset_position_index_per_cell": self.reset_position_index_per_cell,
                "use_position_embeddings": self.use_position_embeddings,
                "use_column_embeddings": self.use_column_embeddings,
                "use_row_embeddings": self.use_row_embeddings,
                "use_rank_embeddings": self.use_rank_embeddings,
                "use_question_match_embeddings": self.use_question_match_embeddings,
                "question_match_ignored_ids": list(self.question_match_ignored_ids),
            }
        )
        return config
