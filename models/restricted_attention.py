"""Row and column attention for long tables (MATE, Eisenschlos et al., EMNLP 2021), in linear memory.

    segments = table_segments(features)       # <int32>[batch, 3, seq_len]: row ids, column ids, mask
    context = restricted_attention(query, key, value, segments, row_heads=2, block_size=64)

Full attention costs memory in seq_len^2. MATE restricts each head: the first `row_heads` heads let
a table token attend only to the tokens of its own row, the others to those of its own column;
the question ([CLS], the question, [SEP]: the tokens of column 0 within the first `global_tokens`
positions) is seen by every token and sees every token. Header tokens are row 0, so a row head
reads the header as one row and a column head reads each column with its header.

The linear version: per group of heads, the table tokens are sorted by (segment, position), cut
into blocks of `block_size`, and each block's queries attend to the keys of their own, previous and
next block that share their segment, plus the question's keys. Memory is seq_len x (3 x block_size +
global_tokens) per head, not seq_len^2. It equals the dense rule (`dense_mask` with full attention,
the reference the tests compare against) whenever no row or column is longer than `block_size`
tokens and the question fits `global_tokens`; a longer column is read in overlapping stretches, as
MATE's own efficient attention reads it.

This is a training option (`TapasConfig.attention_mode="row_column"`): no released checkpoint was
trained with it, so it is never the default.
"""

from typing import Mapping, Optional, Tuple

import tensorflow as tf

_NEGATIVE = -1e9


def table_segments(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """<int32>[batch, 3, seq_len]: row_ids, column_ids and input_mask, what the attention reads."""
    return tf.stack([tf.cast(features[name], tf.int32) for name in ("row_ids", "column_ids", "input_mask")],
                    axis=1)


def _global_tokens(segments: tf.Tensor, global_tokens: int) -> tf.Tensor:
    """<bool>[batch, seq_len]: the question's tokens (column 0, real, within the first positions)."""
    positions = tf.range(tf.shape(segments)[2])
    return (segments[:, 1] == 0) & (segments[:, 2] > 0) & (positions < global_tokens)[None, :]


def dense_mask(segments: tf.Tensor, num_heads: int, row_heads: int, global_tokens: int = 64) -> tf.Tensor:
    """<float32>[batch, num_heads, seq_len, seq_len]: 1 where a query may attend a key (the rule of
    the module docstring); the dense reference of `restricted_attention`, quadratic in memory."""
    valid = segments[:, 2] > 0
    is_global = _global_tokens(segments, global_tokens)
    masks = []
    for head in range(num_heads):
        segment = segments[:, 0] if head < row_heads else segments[:, 1]
        same = tf.equal(segment[:, :, None], segment[:, None, :])
        allowed = (same | is_global[:, :, None] | is_global[:, None, :]) & valid[:, None, :]
        masks.append(tf.cast(allowed, tf.float32))
    return tf.stack(masks, axis=1)


def restricted_attention(query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, segments: tf.Tensor, row_heads: int,
                         block_size: int = 64, global_tokens: int = 64, dropout=None,
                         training: Optional[bool] = None) -> tf.Tensor:
    """Row heads and column heads, in linear memory (the module docstring).

    Args:
      query: <float>[batch, seq_len, heads, key_dim], already scaled by 1/sqrt(key_dim).
      key: <float>[batch, seq_len, heads, key_dim].
      value: <float>[batch, seq_len, heads, value_dim].
      segments: <int32>[batch, 3, seq_len] (`table_segments`).
      row_heads: how many of the heads (the first) attend within the row; the rest within the column.
      block_size, global_tokens: see the module docstring.
      dropout: a `BitDropout` for the probabilities (its `call_unscaled`), or None.

    Returns:
      <float>[batch, seq_len, heads, value_dim].
    """
    heads = query.shape[2]
    if not 0 <= row_heads <= heads:
        raise ValueError(f"row_heads must be in [0, {heads}], got {row_heads}")
    parts = []
    for first, last, segment in ((0, row_heads, segments[:, 0]), (row_heads, heads, segments[:, 1])):
        if first == last:
            continue
        parts.append(_group(query[:, :, first:last], key[:, :, first:last], value[:, :, first:last], segment,
                            segments, block_size, global_tokens, dropout, training))
    return tf.concat(parts, axis=2) if len(parts) > 1 else parts[0]


def _group(query, key, value, segment, segments, block_size, global_tokens, dropout, training):
    """One group of heads (all row heads, or all column heads)."""
    length = tf.shape(query)[1]
    valid = segments[:, 2] > 0
    is_global = _global_tokens(segments, global_tokens)
    local_ok = valid & ~is_global
    pad = (-length) % block_size
    query, key, value = (tf.pad(t, [[0, 0], [0, pad], [0, 0], [0, 0]]) for t in (query, key, value))
    segment = tf.pad(segment, [[0, 0], [0, pad]], constant_values=-1)
    local_ok = tf.pad(local_ok, [[0, 0], [0, pad]])
    is_global = tf.pad(is_global, [[0, 0], [0, pad]])  # A sequence shorter than global_tokens too.
    padded = length + pad
    positions = tf.range(padded)[None, :]
    # Table tokens by (segment, position); the question's tokens and padding after them.
    sort_key = tf.where(local_ok, tf.cast(segment, tf.int64) * tf.cast(padded, tf.int64) + tf.cast(positions, tf.int64),
                        tf.cast(padded, tf.int64) * tf.cast(padded + 1, tf.int64) + tf.cast(positions, tf.int64))
    order = tf.argsort(sort_key, axis=1, stable=True)
    sorted_query, sorted_key, sorted_value = (tf.gather(t, order, batch_dims=1) for t in (query, key, value))
    sorted_segment = tf.gather(segment, order, batch_dims=1)
    sorted_ok = tf.gather(local_ok, order, batch_dims=1)

    blocks = padded // block_size
    q = _blocks(sorted_query, blocks, block_size)                                   # [B, C, b, n, d]
    k, v = (_neighbours(_blocks(t, blocks, block_size)) for t in (sorted_key, sorted_value))  # [B, C, 3b, n, d]
    seg_q = tf.reshape(sorted_segment, [-1, blocks, block_size])
    seg_k = _neighbours(tf.reshape(sorted_segment, [-1, blocks, block_size]), fill=-2)
    ok_k = _neighbours(tf.reshape(sorted_ok, [-1, blocks, block_size]), fill=False)
    local_allowed = tf.equal(seg_q[..., :, None], seg_k[..., None, :]) & ok_k[..., None, :]   # [B, C, b, 3b]

    first = tf.minimum(global_tokens, padded)
    global_key, global_value = key[:, :first], value[:, :first]                       # [B, G, n, d]
    global_allowed = is_global[:, :first]                                               # [B, G]

    local_scores = tf.einsum("bcqnd,bcknd->bcnqk", q, k)
    global_scores = tf.einsum("bcqnd,bknd->bcnqk", q, global_key)
    local_scores += (1.0 - tf.cast(local_allowed[:, :, None], local_scores.dtype)) * _NEGATIVE
    global_scores += (1.0 - tf.cast(global_allowed[:, None, None, None, :], global_scores.dtype)) * _NEGATIVE
    probabilities = tf.nn.softmax(tf.concat([local_scores, global_scores], axis=-1), axis=-1)
    probabilities, scale = _dropped(probabilities, dropout, training)
    width = 3 * block_size
    context = (tf.einsum("bcnqk,bcknd->bcqnd", probabilities[..., :width], v)
               + tf.einsum("bcnqk,bknd->bcqnd", probabilities[..., width:], global_value))
    context = tf.reshape(context, [-1, padded, context.shape[3], context.shape[4]])
    context = tf.gather(context, tf.argsort(order, axis=1), batch_dims=1)              # Back to positions.

    # The question's queries read every real token.
    full_scores = tf.einsum("bqnd,bknd->bnqk", query[:, :first], key)
    key_valid = tf.pad(valid, [[0, 0], [0, pad]])
    full_scores += (1.0 - tf.cast(key_valid[:, None, None, :], full_scores.dtype)) * _NEGATIVE
    full, full_scale = _dropped(tf.nn.softmax(full_scores, axis=-1), dropout, training)
    full_context = tf.einsum("bnqk,bknd->bqnd", full, value)
    if full_scale is not None:
        full_context *= full_scale
    if scale is not None:
        context *= scale
    head = tf.where(global_allowed[:, :, None, None], full_context, context[:, :first])
    return tf.concat([head, context[:, first:]], axis=1)[:, :length]


def _blocks(tensor: tf.Tensor, blocks, block_size: int) -> tf.Tensor:
    """<[B, T, n, d]> -> <[B, C, b, n, d]>."""
    return tf.reshape(tensor, [-1, blocks, block_size, tensor.shape[2], tensor.shape[3]])


def _neighbours(blocked: tf.Tensor, fill=0) -> tf.Tensor:
    """Each block with its previous and next one, along the block axis 2: <[B, C, b, ...]> -> <[B, C, 3b, ...]>."""
    edge = tf.fill(tf.concat([tf.shape(blocked)[:1], [1], tf.shape(blocked)[2:]], 0), tf.cast(fill, blocked.dtype))
    previous = tf.concat([edge, blocked[:, :-1]], axis=1)
    following = tf.concat([blocked[:, 1:], edge], axis=1)
    return tf.concat([previous, blocked, following], axis=2)


def _dropped(probabilities: tf.Tensor, dropout, training) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
    if dropout is None:
        return probabilities, None
    return dropout.call_unscaled(probabilities, training=training)
