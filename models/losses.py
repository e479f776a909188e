"""TAPAS question-answering losses as pure tensor functions (no layers, no config objects).

The maths follows Hugging Face transformers' PyTorch TAPAS and the original TAPAS classifier,
term by term, so a parity test can compare every loss at 1e-4:

* cell selection: the hierarchical single-column loss (`single_column_cell_selection_loss`)
  or the weighted per-token loss (`per_token_selection_loss`), and the thresholded prediction
  logits of the single-column model (`single_column_selection_logits`);
* weak supervision: which examples go to aggregation (`compute_aggregate_mask`), the aggregation
  operator loss (`aggregation_loss`), the expected answer of soft cell and operator choices
  (`expected_result`) and the Huber loss against the gold answer (`answer_loss`);
* `classification_loss` for the table-entailment head.

Ties in an argmax go to the first (smallest) index, as `torch.argmax`.
"""

from typing import Optional, Tuple

import tensorflow as tf

from tapas_tf.models import segmented

EPSILON_ZERO_DIVISION = 1e-10
CLOSE_ENOUGH_TO_LOG_ZERO = -10000.0
AVERAGE_APPROXIMATION_FUNCTIONS = ("ratio", "first_order", "second_order")
# Aggregation operators in the order of the aggregation logits; index 0 is "no aggregation".
NUM_AGGREGATION_OPERATORS = 4  # NONE, SUM, AVERAGE, COUNT


def _first_argmax(values: tf.Tensor) -> tf.Tensor:
    """Argmax over the last axis; ties go to the smallest index, also under XLA.

    Args:
      values: <float32>[batch, n].

    Returns:
      <int32>[batch].
    """
    size = tf.shape(values)[-1]
    is_max = values >= tf.reduce_max(values, axis=-1, keepdims=True)
    return tf.reduce_min(tf.where(is_max, tf.range(size), size), axis=-1)


def _column_ids_of_cells(cell_index: segmented.IndexMap, column_logits: tf.Tensor, caller: str) -> tf.Tensor:
    """Column id of every cell segment, after checking the indices fit `column_logits`.

    Returns:
      <int32>[batch, num_cells].
    """
    if not isinstance(cell_index, segmented.ProductIndexMap):
        raise ValueError(f"{caller}: cell_index must be a ProductIndexMap(row_index, col_index).")
    num_columns = cell_index.inner_index.num_segments
    if column_logits.shape[-1] is not None and column_logits.shape[-1] != num_columns:
        raise ValueError(
            f"{caller}: column_logits have {column_logits.shape[-1]} columns, cell_index has {num_columns}."
        )
    cells = segmented.range_index_map(cell_index.batch_shape(), cell_index.num_segments)
    return cell_index.project_inner(cells).indices


def single_column_cell_selection_loss(
    token_logits: tf.Tensor,
    column_logits: tf.Tensor,
    label_ids: tf.Tensor,
    cell_index: segmented.ProductIndexMap,
    col_index: segmented.IndexMap,
    cell_mask: tf.Tensor,
) -> tf.Tensor:
    """Hierarchical cell selection loss: pick the gold column, then the gold cells inside it.

    The gold column is the one with the most labelled tokens (first one on ties), or column 0
    ("no column") when no token is labelled. The loss is the column cross-entropy plus the mean
    Bernoulli NLL of the cells of the gold column (cell logit = mean token logit, cell label =
    max token label); the cell term is 0 when no token is labelled.

    Args:
      token_logits: <float32>[batch, seq_len] cell selection logits per token.
      column_logits: <float32>[batch, max_num_columns].
      label_ids: <int32>[batch, seq_len] 1 for answer tokens.
      cell_index: ProductIndexMap(row_index, col_index) of the tokens' cells.
      col_index: IndexMap of the tokens' columns, num_segments = max_num_columns.
      cell_mask: <float32>[batch, num_cells] 1 for cells that exist (not padding).

    Returns:
      <float32>[batch] selection loss per example.
    """
    column_of_cell = _column_ids_of_cells(cell_index, column_logits, "single_column_cell_selection_loss")
    labels = tf.cast(label_ids, tf.float32)
    labels_per_column, _ = segmented.reduce_sum(labels, col_index)
    no_cell_selected = tf.equal(tf.reduce_max(labels_per_column, axis=-1), 0.0)
    column_label = tf.where(no_cell_selected, 0, _first_argmax(labels_per_column))
    column_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=column_label, logits=column_logits)

    logits_per_cell, _ = segmented.reduce_mean(token_logits, cell_index)
    labels_per_cell, _ = segmented.reduce_max(labels, cell_index)
    in_gold_column = tf.cast(tf.equal(column_of_cell, column_label[:, None]), tf.float32)
    cell_weight = in_gold_column * cell_mask
    cell_nll = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels_per_cell, logits=logits_per_cell)
    # Mean over the existing cells of the gold column.
    cell_loss = tf.reduce_sum(cell_nll * cell_weight, axis=1) / (
        tf.reduce_sum(cell_weight, axis=1) + EPSILON_ZERO_DIVISION
    )
    return column_loss + tf.where(no_cell_selected, tf.zeros_like(cell_loss), cell_loss)


def single_column_selection_logits(
    token_logits: tf.Tensor,
    column_logits: tf.Tensor,
    cell_index: segmented.ProductIndexMap,
    cell_mask: tf.Tensor,
) -> tf.Tensor:
    """Per-token logits that only select cells of the model's most likely column.

    Every token gets its cell's mean logit; cells that are padding, in column 0, or outside the
    argmax column of `column_logits` (first one on ties) get CLOSE_ENOUGH_TO_LOG_ZERO added, so
    their probability is 0. This is what prediction thresholds.

    Args:
      token_logits: <float32>[batch, seq_len].
      column_logits: <float32>[batch, max_num_columns].
      cell_index: ProductIndexMap(row_index, col_index) of the tokens' cells.
      cell_mask: <float32>[batch, num_cells] 1 for cells that exist.

    Returns:
      <float32>[batch, seq_len].
    """
    column_of_cell = _column_ids_of_cells(cell_index, column_logits, "single_column_selection_logits")
    logits_per_cell, _ = segmented.reduce_mean(token_logits, cell_index)
    selected_column = _first_argmax(column_logits)
    is_selected = tf.logical_and(
        tf.equal(column_of_cell, selected_column[:, None]), tf.not_equal(column_of_cell, 0)
    )
    keep = cell_mask * tf.cast(is_selected, tf.float32)
    return segmented.gather(logits_per_cell + CLOSE_ENOUGH_TO_LOG_ZERO * (1.0 - keep), cell_index)


def per_token_selection_loss(
    logits: tf.Tensor, label_ids: tf.Tensor, input_mask: tf.Tensor, positive_label_weight: float
) -> tf.Tensor:
    """Weighted Bernoulli NLL per token, averaged over the real (input_mask) tokens.

    Args:
      logits: <float32>[batch, seq_len].
      label_ids: <int32>[batch, seq_len] 1 for answer tokens.
      input_mask: <int32|float32>[batch, seq_len] 1 for real tokens, 0 for padding.
      positive_label_weight: weight of the NLL of answer tokens (others weigh 1).

    Returns:
      <float32>[batch].
    """
    labels = tf.cast(label_ids, tf.float32)
    mask = tf.cast(input_mask, tf.float32)
    weight = tf.where(tf.equal(labels, 0.0), 1.0, positive_label_weight)
    nll = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits) * weight
    return tf.reduce_sum(nll * mask, axis=1) / (tf.reduce_sum(mask, axis=1) + EPSILON_ZERO_DIVISION)


def compute_aggregate_mask(
    answer: tf.Tensor,
    aggregation_logits: tf.Tensor,
    label_ids: tf.Tensor,
    cell_selection_preference: float,
) -> tf.Tensor:
    """1.0 for the examples that learn through aggregation, 0.0 for those that select cells.

    An example with a scalar answer aggregates, unless its answer also appears in the table
    (some label > 0) and the model puts at most `cell_selection_preference` of its mass on
    the aggregation operators. No gradient flows through the mask.

    Args:
      answer: <float32>[batch] scalar answer, NaN when there is none.
      aggregation_logits: <float32>[batch, num_agg], index 0 = no aggregation.
      label_ids: <int32>[batch, seq_len].
      cell_selection_preference: threshold on the aggregation operators' total probability.

    Returns:
      <float32>[batch].
    """
    if cell_selection_preference is None:
        raise ValueError("compute_aggregate_mask needs a cell_selection_preference, got None.")
    aggregate = tf.cast(tf.logical_not(tf.math.is_nan(answer)), tf.float32)
    operator_mass = tf.reduce_sum(tf.nn.softmax(aggregation_logits, axis=-1)[:, 1:], axis=1)
    is_pred_cell_selection = operator_mass <= cell_selection_preference
    has_cell_labels = tf.reduce_sum(label_ids, axis=1) > 0
    mask = tf.where(tf.logical_and(is_pred_cell_selection, has_cell_labels), 0.0, aggregate)
    return tf.stop_gradient(mask)


def aggregation_loss(
    aggregation_logits: tf.Tensor,
    aggregate_mask: Optional[tf.Tensor],
    aggregation_function_id: Optional[tf.Tensor],
    use_answer_as_supervision: bool,
    num_aggregation_labels: int,
    aggregation_loss_weight: float,
) -> tf.Tensor:
    """Loss of the aggregation operator head.

    Known part: cross-entropy toward the gold operator (strong supervision), or, with answer
    supervision, toward NONE for the cell selection examples (aggregate_mask 0). Unknown part
    (answer supervision only): -log P(some operator other than NONE) for aggregation examples.

    Args:
      aggregation_logits: <float32>[batch, num_agg].
      aggregate_mask: <float32>[batch] from `compute_aggregate_mask`; needed (and only used)
        with answer supervision.
      aggregation_function_id: <int32>[batch] gold operator; needed without answer supervision.
      use_answer_as_supervision: weak supervision from the answer only.
      num_aggregation_labels: num_agg.
      aggregation_loss_weight: factor on the whole loss.

    Returns:
      <float32>[batch].
    """
    if aggregation_logits.shape[-1] is not None and aggregation_logits.shape[-1] != num_aggregation_labels:
        raise ValueError(
            f"aggregation_logits have {aggregation_logits.shape[-1]} labels, "
            f"num_aggregation_labels is {num_aggregation_labels}."
        )
    log_probs = tf.nn.log_softmax(aggregation_logits, axis=-1)
    if not use_answer_as_supervision:
        if aggregation_function_id is None:
            raise ValueError("aggregation_loss needs aggregation_function_id without answer supervision.")
        one_hot = tf.one_hot(aggregation_function_id, num_aggregation_labels)
        return aggregation_loss_weight * -tf.reduce_sum(one_hot * log_probs, axis=-1)
    if aggregate_mask is None:
        raise ValueError("aggregation_loss needs aggregate_mask with use_answer_as_supervision.")
    known = -log_probs[:, 0] * (1.0 - aggregate_mask)
    # log P(op != NONE) = logsumexp(operator logits) - logsumexp(all logits): the same value as
    # log(sum of the probabilities), without underflowing to log(0).
    log_operator_mass = tf.reduce_logsumexp(aggregation_logits[:, 1:], axis=-1) - tf.reduce_logsumexp(
        aggregation_logits, axis=-1
    )
    unknown = -log_operator_mass * aggregate_mask
    return aggregation_loss_weight * (known + unknown)


def _average(
    probs: tf.Tensor, values: tf.Tensor, count: tf.Tensor, total: tf.Tensor, function: str
) -> tf.Tensor:
    """Approximate expected average of the values of a random cell set (paper, appendix).

    Args:
      probs: <float32>[batch, seq_len] scaled selection probabilities.
      values: <float32>[batch, seq_len] numeric values, 0 for non-numbers.
      count: <float32>[batch] sum of probs.
      total: <float32>[batch] sum of probs * values.
      function: one of AVERAGE_APPROXIMATION_FUNCTIONS.

    Returns:
      <float32>[batch].
    """
    if function == "ratio":
        return total / (count + EPSILON_ZERO_DIVISION)
    # Expected size of the set given that the token is in it: 1 + sum of the other probs.
    others = count[:, None] - probs + 1.0
    if function == "first_order":
        return tf.reduce_sum(values * probs / others, axis=1)
    point_variance = probs * (1.0 - probs)
    others_variance = tf.reduce_sum(point_variance, axis=1, keepdims=True) - point_variance
    multiplier = (others_variance / tf.square(others) + 1.0) / others
    return tf.reduce_sum(values * probs * multiplier, axis=1)


def expected_result(
    cell_probs: tf.Tensor,
    numeric_values: tf.Tensor,
    numeric_values_scale: tf.Tensor,
    table_mask: tf.Tensor,
    aggregation_logits: tf.Tensor,
    average_approximation_function: str,
    aggregation_temperature: float,
) -> tf.Tensor:
    """Expected answer of the soft cell selection under the soft aggregation operator.

    With p = cell_probs / numeric_values_scale * table_mask: COUNT = sum p, SUM = sum p * v
    (NaN values count as 0), AVERAGE per `average_approximation_function`; the three are
    weighted by softmax(aggregation_logits[:, 1:] / aggregation_temperature).

    Args:
      cell_probs: <float32>[batch, seq_len] selection probability of every token.
      numeric_values: <float32>[batch, seq_len] NaN where the token has no number.
      numeric_values_scale: <float32>[batch, seq_len] (1 unless a cell holds several numbers).
      table_mask: <int32|float32>[batch, seq_len] 1 for table body tokens.
      aggregation_logits: <float32>[batch, 4] for NONE, SUM, AVERAGE, COUNT.
      average_approximation_function: "ratio", "first_order" or "second_order".
      aggregation_temperature: temperature of the operator softmax.

    Returns:
      <float32>[batch].
    """
    if average_approximation_function not in AVERAGE_APPROXIMATION_FUNCTIONS:
        raise ValueError(
            f"Unknown average_approximation_function {average_approximation_function!r}; "
            f"expected one of {AVERAGE_APPROXIMATION_FUNCTIONS}."
        )
    if aggregation_logits.shape[-1] not in (None, NUM_AGGREGATION_OPERATORS):
        raise ValueError(
            f"expected_result needs {NUM_AGGREGATION_OPERATORS} aggregation logits (NONE, SUM, AVERAGE, "
            f"COUNT), got {aggregation_logits.shape[-1]}."
        )
    probs = cell_probs / numeric_values_scale * tf.cast(table_mask, tf.float32)
    values = tf.where(tf.math.is_nan(numeric_values), tf.zeros_like(numeric_values), numeric_values)
    count = tf.reduce_sum(probs, axis=1)
    total = tf.reduce_sum(probs * values, axis=1)
    average = _average(probs, values, count, total, average_approximation_function)
    operator_probs = tf.nn.softmax(aggregation_logits[:, 1:] / aggregation_temperature, axis=-1)
    results = tf.stack([total, average, count], axis=1)
    return tf.reduce_sum(results * operator_probs, axis=1)


def _huber(predictions: tf.Tensor, targets: tf.Tensor, delta: float) -> tf.Tensor:
    """Element-wise Huber loss: 0.5 x^2 if |x| <= delta else delta * (|x| - 0.5 delta)."""
    error = tf.abs(predictions - targets)
    return tf.where(error <= delta, 0.5 * tf.square(error), delta * (error - 0.5 * delta))


def answer_loss(
    answer: tf.Tensor,
    aggregate_mask: tf.Tensor,
    expected_result: tf.Tensor,  # pylint: disable=redefined-outer-name
    huber_loss_delta: Optional[float],
    answer_loss_cutoff: Optional[float],
    answer_loss_importance: float,
    use_normalized_answer_loss: bool,
) -> Tuple[tf.Tensor, tf.Tensor]:
    """Huber loss between the expected result and the gold answer, for aggregation examples.

    Both sides are multiplied by aggregate_mask before the Huber loss. With
    `use_normalized_answer_loss`, both are first divided by max(|expected|, |answer|) + EPS
    (no gradient through it) and the Huber delta is 1.0, as in TAPAS and HF.

    Args:
      answer: <float32>[batch] gold scalar answer, NaN when there is none (counts as 0).
      aggregate_mask: <float32>[batch] from `compute_aggregate_mask`.
      expected_result: <float32>[batch] from `expected_result`.
      huber_loss_delta: Huber delta; required unless use_normalized_answer_loss.
      answer_loss_cutoff: examples whose Huber loss exceeds it get mask 0; None keeps all.
      answer_loss_importance: factor on the returned loss.
      use_normalized_answer_loss: compare relative rather than absolute errors.

    Returns:
      answer_loss: <float32>[batch] importance * huber * aggregate_mask.
      large_answer_loss_mask: <float32>[batch] 0 where huber > answer_loss_cutoff, else 1.
    """
    answer = tf.where(tf.math.is_nan(answer), tf.zeros_like(answer), answer)
    if use_normalized_answer_loss:
        normalizer = tf.stop_gradient(
            tf.maximum(tf.abs(expected_result), tf.abs(answer)) + EPSILON_ZERO_DIVISION
        )
        expected_result, answer = expected_result / normalizer, answer / normalizer
        huber = _huber(expected_result * aggregate_mask, answer * aggregate_mask, 1.0)
    else:
        if huber_loss_delta is None:
            raise ValueError("answer_loss needs huber_loss_delta unless use_normalized_answer_loss is set.")
        huber = _huber(expected_result * aggregate_mask, answer * aggregate_mask, huber_loss_delta)
    if answer_loss_cutoff is None:
        large_answer_loss_mask = tf.ones_like(huber)
    else:
        large_answer_loss_mask = tf.where(huber > answer_loss_cutoff, 0.0, 1.0)
    return answer_loss_importance * huber * aggregate_mask, large_answer_loss_mask


def classification_loss(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Softmax cross-entropy of the classification head.

    Args:
      logits: <float32>[batch, num_classes].
      labels: <int32>[batch] gold class index.

    Returns:
      <float32>[batch].
    """
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def in_batch_retrieval_loss(query_embeddings: tf.Tensor, table_embeddings: tf.Tensor,
                            table_ids: Optional[tf.Tensor] = None, logit_scale: float = 1.0) -> tf.Tensor:
    """Softmax cross-entropy of each question against every table of the batch (DTR's loss).

    Question i's gold table is table i; every other table of the batch is a negative, and so is
    each mined hard negative, which comes after the batch's gold tables:

        tables = [gold_0 .. gold_{b-1}, negatives ...]
        logits = logit_scale * Q T^T          <float32>[b, num_tables]
        loss_i = -log softmax(logits_i)[i]

    A negative that is the same table as question i's gold (same `table_ids`; several questions
    of a batch often share a table) is no negative: it is masked out of question i's softmax.

    Args:
      query_embeddings: <float32>[b, dim].
      table_embeddings: <float32>[num_tables, dim], num_tables >= b, gold tables first.
      table_ids: optional <int64>[num_tables], an id (hash) per table.
      logit_scale: float, multiplies the inner products.

    Returns:
      <float32>[b], the loss per question.
    """
    logits = logit_scale * tf.matmul(query_embeddings, table_embeddings, transpose_b=True)
    batch = tf.shape(query_embeddings)[0]
    num_tables = tf.shape(table_embeddings)[0]
    # <bool>[b, num_tables]: True at (i, i).
    gold = tf.equal(tf.range(batch)[:, None], tf.range(num_tables)[None, :])
    if table_ids is not None:
        table_ids = tf.reshape(table_ids, [-1])
        same_table = tf.equal(table_ids[:batch, None], table_ids[None, :])
        logits = tf.where(same_table & ~gold, CLOSE_ENOUGH_TO_LOG_ZERO, logits)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.range(batch), logits=logits)
