"""Segmented tensors: per-cell, per-row and per-column reductions of token values.

An `IndexMap` assigns every token a segment id in `[0, num_segments)`, for instance its row,
its column or its cell. `reduce_*` fold token values into one value per segment, `gather`
spreads per-segment values back onto the tokens. Examples in a batch never share segments:
the ops shift the ids of example `b` by `b * num_segments` and call the flat
`tf.math.unsorted_segment_*` ops once, so everything has static shapes and compiles under
XLA (`tf.function(jit_compile=True)`).

Worked example. One example, `max_num_rows=3`, `max_num_columns=3`:

    [CLS] which year [SEP]          (question: row 0, column 0)
    +-------+----------------+
    | year  | city           |      (header: row 0, columns 1 and 2)
    +-------+----------------+
    | 2004  | athens         |      (row 1)
    | 2008  | bei ##jing     |      (row 2)
    +-------+----------------+

    token       [CLS] which year [SEP] year city 2004 athens bei ##jing
    row_ids       0     0     0    0     0    0    1     1    2     2
    column_ids    0     0     0    0     1    2    1     2    2     2
    cell id       0     0     0    0     1    2    4     5    8     8   (row * 3 + column)
    logits        1     1     1    1     2    3    4     5    6     8

    row_index = IndexMap(row_ids, num_segments=3)
    col_index = IndexMap(column_ids, num_segments=3)
    cell_index = ProductIndexMap(row_index, col_index)      # 9 cells
    cell_logits, cells = reduce_mean(logits, cell_index)
    # cell_logits = [[1, 2, 3, 0, 4, 5, 0, 0, 7]]  (cells 3, 6, 7 are empty -> 0)
    col_logits, _ = reduce_max(cell_logits, cell_index.project_inner(cells))
    # col_logits = [[1, 4, 7]]  (column 2 holds cells 2, 5, 8 -> max(3, 5, 7))
    gather(cell_logits, cell_index)
    # [[1, 1, 1, 1, 2, 3, 4, 5, 7, 7]]: "bei" and "##jing" share their cell's mean

Empty segments. All four reductions return 0 for a segment that no token maps to, as Hugging
Face TAPAS does (its scatter starts from zeros and excludes them from the reduction). In
particular `reduce_max` and `reduce_min` give 0, not -inf/+inf, for empty segments, while a
non-empty segment of negative values keeps its (negative) maximum.

Indices must lie in `[0, num_segments)`; they are not checked at run time (that would need a
host round trip, and XLA drops asserts). An id of `num_segments` or more would spill into the
next example's segments: build table index maps with `table_indices`, which clamps them.
"""

import math
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import tensorflow as tf

Dim = Union[int, tf.Tensor]


class IndexMap:
    """Groups the entries of a tensor into segments.

    Attributes:
      indices: <int32|int64>[batch, seq_len] segment id of every entry (any number of leading
        batch dimensions is allowed; `batch_dims` says how many there are).
      num_segments: number of segments per example (a Python int for user-built maps; a scalar
        tensor only for the flat map that `flatten` builds when the batch size is dynamic).
      batch_dims: number of leading batch dimensions of `indices`.
    """

    def __init__(self, indices, num_segments: Dim, batch_dims: int = 1):
        self.indices = tf.convert_to_tensor(indices)
        if not self.indices.dtype.is_integer:
            raise ValueError(f"IndexMap indices must be integers, got {self.indices.dtype.name}.")
        if isinstance(num_segments, bool) or (
            not isinstance(num_segments, (int, tf.Tensor)) and not hasattr(num_segments, "__index__")
        ):
            raise ValueError(f"num_segments must be an int, got {num_segments!r}.")
        if not isinstance(num_segments, tf.Tensor):
            num_segments = int(num_segments)
            if num_segments <= 0:
                raise ValueError(f"num_segments must be positive, got {num_segments}.")
        rank = self.indices.shape.rank
        if not isinstance(batch_dims, int) or batch_dims < 0 or (rank is not None and batch_dims > rank):
            raise ValueError(f"batch_dims must be an int in [0, rank={rank}], got {batch_dims!r}.")
        self.num_segments = num_segments
        self.batch_dims = batch_dims

    def batch_shape(self) -> List[Dim]:
        """The leading `batch_dims` dimensions of `indices` (static ints where known)."""
        return _dims(self.indices, 0, self.batch_dims)


class ProductIndexMap(IndexMap):
    """The product of two index maps: segment (i, j) holds the entries in both i and j.

    For rows (outer) and columns (inner) this is the cell index: id = row * num_columns + column,
    num_segments = num_rows * num_columns.
    """

    def __init__(self, outer_index: IndexMap, inner_index: IndexMap):
        if outer_index.batch_dims != inner_index.batch_dims:
            raise ValueError(
                "outer_index and inner_index must have the same batch_dims, got "
                f"{outer_index.batch_dims} and {inner_index.batch_dims}."
            )
        if outer_index.indices.dtype != inner_index.indices.dtype:
            raise ValueError(
                "outer_index and inner_index must have the same dtype, got "
                f"{outer_index.indices.dtype.name} and {inner_index.indices.dtype.name}."
            )
        super().__init__(
            indices=outer_index.indices * inner_index.num_segments + inner_index.indices,
            num_segments=outer_index.num_segments * inner_index.num_segments,
            batch_dims=inner_index.batch_dims,
        )
        self.outer_index = outer_index
        self.inner_index = inner_index

    def project_outer(self, index: IndexMap) -> IndexMap:
        """Maps product ids (e.g. cells) to outer ids (rows): id // inner.num_segments."""
        return IndexMap(
            tf.math.floordiv(index.indices, self.inner_index.num_segments),
            self.outer_index.num_segments,
            index.batch_dims,
        )

    def project_inner(self, index: IndexMap) -> IndexMap:
        """Maps product ids (e.g. cells) to inner ids (columns): id % inner.num_segments."""
        return IndexMap(
            tf.math.floormod(index.indices, self.inner_index.num_segments),
            self.inner_index.num_segments,
            index.batch_dims,
        )


def _dims(tensor: tf.Tensor, start: int, end: Optional[int] = None) -> List[Dim]:
    """Dimensions start..end of `tensor`: Python ints where static, scalar tensors otherwise."""
    static = tensor.shape.as_list()[start:end]
    dynamic = tf.shape(tensor)
    return [dim if dim is not None else dynamic[start + i] for i, dim in enumerate(static)]


def _product(dims: Sequence[Dim]) -> Dim:
    """Product of dimensions, a Python int when all are static."""
    if all(isinstance(dim, int) for dim in dims):
        return math.prod(dims)
    return tf.reduce_prod(tf.stack([tf.cast(dim, tf.int32) for dim in dims]))


def flatten(index: IndexMap) -> IndexMap:
    """Flattens a batched index map into one 1-D map whose examples use distinct segments.

    Args:
      index: IndexMap with indices <int>[batch, seq_len].

    Returns:
      IndexMap with indices <int>[batch * seq_len] equal to
      `indices + b * num_segments` for example b, num_segments = batch * index.num_segments
      and batch_dims = 0.
    """
    batch_size = _product(index.batch_shape())
    dtype = index.indices.dtype
    offset = tf.range(batch_size, dtype=dtype) * tf.cast(index.num_segments, dtype)
    inner_rank = index.indices.shape.rank - index.batch_dims
    offset = tf.reshape(offset, index.batch_shape() + [1] * inner_rank)
    return IndexMap(
        tf.reshape(index.indices + offset, [-1]),
        num_segments=index.num_segments * batch_size,
        batch_dims=0,
    )


def range_index_map(batch_shape: Sequence[Dim], num_segments: int) -> IndexMap:
    """An index map whose indices are range(num_segments) for every example.

    Args:
      batch_shape: the batch dimensions, e.g. [batch].
      num_segments: number of segments.

    Returns:
      IndexMap with indices <int32>[batch, num_segments], row b equal to [0, .., num_segments-1].
    """
    batch_shape = list(batch_shape)
    indices = tf.broadcast_to(tf.range(num_segments), batch_shape + [num_segments])
    return IndexMap(indices, num_segments, batch_dims=len(batch_shape))


def _segment_reduce(values, index: IndexMap, reduction: str) -> Tuple[tf.Tensor, IndexMap]:
    """Reduces `values` over the segments of `index` (see `reduce_sum`)."""
    values = tf.convert_to_tensor(values)
    index_rank = index.indices.shape.rank
    if values.shape.rank is None or values.shape.rank < index_rank:
        raise ValueError(
            f"values of shape {values.shape} have a lower rank than the index {index.indices.shape}."
        )
    if not values.shape[:index_rank].is_compatible_with(index.indices.shape):
        raise ValueError(
            f"values of shape {values.shape} do not start with the index shape {index.indices.shape}."
        )
    flat_index = flatten(index)
    vector_shape = _dims(values, index_rank)
    flat_values = tf.reshape(values, [-1] + vector_shape)
    segment_ids, num_flat = flat_index.indices, flat_index.num_segments

    if reduction == "sum":
        output = tf.math.unsorted_segment_sum(flat_values, segment_ids, num_flat)
    else:
        # Token count per segment, shaped [num_flat, 1, ...] to broadcast over vector dims.
        ones = tf.ones(tf.shape(segment_ids), tf.float32)
        count = tf.math.unsorted_segment_sum(ones, segment_ids, num_flat)
        count = tf.reshape(count, [-1] + [1] * len(vector_shape))
        if reduction == "mean":
            # Integers (and half floats) are averaged in float32 as HF does, then cast back:
            # integer means truncate toward 0.
            compute_dtype = tf.float64 if values.dtype == tf.float64 else tf.float32
            total = tf.math.unsorted_segment_sum(tf.cast(flat_values, compute_dtype), segment_ids, num_flat)
            output = tf.cast(total / tf.maximum(tf.cast(count, compute_dtype), 1.0), values.dtype)
        else:
            reduce_fn = tf.math.unsorted_segment_max if reduction == "max" else tf.math.unsorted_segment_min
            output = reduce_fn(flat_values, segment_ids, num_flat)
            # TF fills empty segments with the dtype's lowest/highest value; HF gives 0.
            output = tf.where(count > 0, output, tf.zeros_like(output))

    batch_shape = index.batch_shape()
    output = tf.reshape(output, batch_shape + [index.num_segments] + vector_shape)
    return output, range_index_map(batch_shape, index.num_segments)


def reduce_sum(values, index: IndexMap) -> Tuple[tf.Tensor, IndexMap]:
    """Sums `values` per segment; empty segments give 0.

    Args:
      values: <float32|int>[batch, seq_len] or <float32|int>[batch, seq_len, d].
      index: IndexMap with indices <int>[batch, seq_len].

    Returns:
      output: <values.dtype>[batch, num_segments] (or [batch, num_segments, d]);
      output_index: IndexMap with indices <int32>[batch, num_segments] = range(num_segments).
    """
    return _segment_reduce(values, index, "sum")


def reduce_mean(values, index: IndexMap) -> Tuple[tf.Tensor, IndexMap]:
    """Averages `values` per segment; empty segments give 0.

    Integer values are averaged in float32 and cast back, truncating toward zero (as HF).

    Args:
      values: <float32|int>[batch, seq_len] or <float32|int>[batch, seq_len, d].
      index: IndexMap with indices <int>[batch, seq_len].

    Returns:
      output: <values.dtype>[batch, num_segments] (or [batch, num_segments, d]);
      output_index: IndexMap with indices <int32>[batch, num_segments] = range(num_segments).
    """
    return _segment_reduce(values, index, "mean")


def reduce_max(values, index: IndexMap) -> Tuple[tf.Tensor, IndexMap]:
    """Element-wise maximum of `values` per segment; empty segments give 0 (not -inf).

    Args:
      values: <float32|int>[batch, seq_len] or <float32|int>[batch, seq_len, d].
      index: IndexMap with indices <int>[batch, seq_len].

    Returns:
      output: <values.dtype>[batch, num_segments] (or [batch, num_segments, d]);
      output_index: IndexMap with indices <int32>[batch, num_segments] = range(num_segments).
    """
    return _segment_reduce(values, index, "max")


def reduce_min(values, index: IndexMap) -> Tuple[tf.Tensor, IndexMap]:
    """Element-wise minimum of `values` per segment; empty segments give 0 (not +inf).

    Args:
      values: <float32|int>[batch, seq_len] or <float32|int>[batch, seq_len, d].
      index: IndexMap with indices <int>[batch, seq_len].

    Returns:
      output: <values.dtype>[batch, num_segments] (or [batch, num_segments, d]);
      output_index: IndexMap with indices <int32>[batch, num_segments] = range(num_segments).
    """
    return _segment_reduce(values, index, "min")


def gather(values, index: IndexMap) -> tf.Tensor:
    """Looks up every entry's segment value: out[b, i] = values[b, index.indices[b, i]].

    Args:
      values: <any>[batch, num_segments] or <any>[batch, num_segments, d].
      index: IndexMap with indices <int>[batch, seq_len].

    Returns:
      <values.dtype>[batch, seq_len] (or [batch, seq_len, d]).
    """
    values = tf.convert_to_tensor(values)
    axis = index.batch_dims
    if values.shape.rank is None or values.shape.rank <= axis:
        raise ValueError(f"values of shape {values.shape} have no segment axis after {axis} batch dims.")
    num_segments = values.shape[axis]
    expected = index.num_segments
    if isinstance(expected, int) and num_segments is not None and num_segments != expected:
        raise ValueError(f"values have {num_segments} segments on axis {axis}, the index has {expected}.")
    return tf.gather(values, index.indices, axis=axis, batch_dims=axis)


def table_indices(
    features: Mapping[str, tf.Tensor], max_num_rows: int, max_num_columns: int
) -> Tuple[IndexMap, IndexMap, ProductIndexMap]:
    """Row, column and cell index maps of a batch of table features.

    Row ids are clamped to max_num_rows - 1 and column ids to max_num_columns - 1 (as HF does),
    so rows or columns beyond the limits share the last segment instead of overflowing.

    Args:
      features: dict with "row_ids" and "column_ids", each <int32>[batch, seq_len].
      max_num_rows: number of row segments (question and header tokens are row 0).
      max_num_columns: number of column segments (question tokens are column 0).

    Returns:
      row_index (num_segments=max_num_rows), col_index (num_segments=max_num_columns) and
      cell_index = ProductIndexMap(row_index, col_index) (num_segments = rows * columns).
    """
    missing = [key for key in ("row_ids", "column_ids") if key not in features]
    if missing:
        raise ValueError(f"features lack {', '.join(missing)} needed for the table indices.")
    for name, limit in (("max_num_rows", max_num_rows), ("max_num_columns", max_num_columns)):
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ValueError(f"{name} must be a positive int, got {limit!r}.")
    row_ids = tf.convert_to_tensor(features["row_ids"])
    column_ids = tf.convert_to_tensor(features["column_ids"])
    row_ids = tf.minimum(row_ids, tf.cast(max_num_rows - 1, row_ids.dtype))
    column_ids = tf.minimum(column_ids, tf.cast(max_num_columns - 1, column_ids.dtype))
    row_index = IndexMap(row_ids, max_num_rows)
    col_index = IndexMap(column_ids, max_num_columns)
    return row_index, col_index, ProductIndexMap(row_index, col_index)
