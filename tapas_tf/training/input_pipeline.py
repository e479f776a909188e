"""tf.data input: classifier or masked-LM TFRecords -> batches of model features.

    dataset = make_dataset("OUT/tf_examples/train.tfrecord", max_seq_length=512, batch_size=32,
                           training=True, shuffle_buffer=10_000, seed=1)
    features = next(iter(dataset))
    features["input_ids"]   # <int32>[32, 512]
    features["answer"]      # <float32>[32]

Records are batched first and parsed a batch at a time (`tf.io.parse_example`), which is
several times faster than parsing one record per call. Training batches drop their remainder so
that every shape is static, as TPUs and XLA want. Strings are not parsed: TPUs cannot take
them, and `question_id_ints` carries the question id.

Pass `max_predictions_per_seq` to read masked-LM pre-training examples (as
tapas-tf create-pretrain-data writes them) instead: the masked_lm_* features are then
<int32>/<float32>[batch, max_predictions_per_seq] (see `example_features.pretrain_parsing_spec`).

Length buckets (`bucket_lengths`, training only): examples are grouped by real length (the position
of their last real token + 1) into the smallest bucket that holds them, and each batch's per-token
features are cut to its bucket's length, so a batch of short examples costs what its length does,
not what max_seq_length does:

    dataset = make_dataset(..., max_seq_length=512, batch_size=32, training=True,
                           bucket_lengths=(128, 256, 384, 512))
    features["input_ids"]   # <int32>[32, 128], [32, 256], [32, 384] or [32, 512]; spec [32, None]

Only padding is cut, and the model masks padding, so each example's loss is unchanged. Per-example
and masked_lm_* features keep their shapes (masked positions point at real tokens, so they stay
below the bucket's length).

With a `seed` (or no shuffling) a training dataset is the same sequence of batches each time it is
made: the shuffle is seeded and reshuffles every epoch in a seeded order, and reading, parsing and
bucketing keep their input's order. `skip_batches` then resumes that sequence where a run stopped
(the trainer skips the batches of the steps a resumed run already took):

    dataset = make_dataset(..., training=True, seed=1, skip_batches=1000)  # Batches 1001, 1002, ...
"""

import os
import re

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from typing import Dict, List, Optional, Sequence, Tuple  # noqa: E402

import tensorflow as tf  # noqa: E402

from tapas_tf.features import example_features  # noqa: E402

# Features with one value per example: parsed as [batch, 1], returned as [batch].
SCALAR_FEATURES = (example_features.INT_SCALAR_FEATURES + example_features.FLOAT_SCALAR_FEATURES
                   + example_features.PRETRAIN_INT_SCALAR_FEATURES)
# Features with one value per token: what length buckets cut (named: question_id_ints and the
# masked_lm_* features can have max_seq_length values too).
TOKEN_FEATURES = example_features.INT_TOKEN_FEATURES + example_features.FLOAT_TOKEN_FEATURES


def input_files(file_pattern: str) -> List[str]:
    """The files matching `file_pattern` (a path or glob, local or gs://), sorted.

    Raises:
      FileNotFoundError: nothing matches.
    """
    files = sorted(tf.io.gfile.glob(file_pattern))
    if not files:
        raise FileNotFoundError(
            f"No input file matches {file_pattern!r}; run --mode=create_data (for PRETRAIN, "
            "tapas-tf create-pretrain-data) first or pass --train_file.")
    return files


class DamagedDataError(ValueError):
    """A TFRecord file cannot be read to its end: cut short (an interrupted copy) or damaged."""


_RECREATE = "recreate it with --mode=create_data or copy it again"


def _data_loss_reason(error: tf.errors.DataLossError) -> str:
    """The useful part of a DataLossError, e.g. "truncated record at 464".

    TensorFlow wraps it in the name of the op's function and device, and never names the file.
    """
    match = re.search(r"(truncated|corrupted) record at \d+", error.message)
    return match.group(0) if match else error.message.strip().splitlines()[0]


# Files whose first record `check_examples` reads; enough to catch data of another length
# without reading a thousand shards from cloud storage.
_FILES_CHECKED = 10


def check_examples(file_pattern: str, max_seq_length: int,
                   max_predictions_per_seq: Optional[int] = None) -> List[str]:
    """Checks that the first record of the (first few) matching files is a classifier example
    (or a masked-LM example, given `max_predictions_per_seq`).

    Args:
      file_pattern: path or glob of TFRecord files of tf.Examples.
      max_seq_length: the number of values every per-token feature must have.
      max_predictions_per_seq: masked-LM examples with this many masked_lm_* values; None for
        classifier examples.

    Returns:
      The matching files, sorted.

    Raises:
      FileNotFoundError: nothing matches `file_pattern`.
      ValueError: a file is empty, is not a TFRecord of tf.Examples (DamagedDataError), lacks a
        classifier feature, or has examples of another sequence length (the message names the file
        and both lengths). A file damaged after its first record passes; reading it later fails,
        and `damaged_file_error` names it.
    """
    files = input_files(file_pattern)
    for path in files[:_FILES_CHECKED]:
        try:
            record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.DataLossError as e:
            raise DamagedDataError(
                f"{path} is not a TFRecord file, or is truncated or corrupt ({_data_loss_reason(e)}); "
                f"{_RECREATE}") from e
        if record is None:
            raise ValueError(f"{path} holds no examples.")
        _check_record(path, record.numpy(), max_seq_length, max_predictions_per_seq)
    return files


def damaged_file_error(file_pattern: str, error: tf.errors.DataLossError) -> DamagedDataError:
    """The error to raise for a DataLossError met while reading `file_pattern`: names the bad file.

    TensorFlow's error does not say which file of an interleaved dataset failed, so every matching
    file is read again (in the graph, without parsing) until one fails. This costs one pass over
    the data, and only runs after reading has already failed.

    Args:
      file_pattern: the path or glob that was being read.
      error: what reading raised.

    Returns:
      A DamagedDataError naming the damaged file, or the pattern when every file reads cleanly
      now (the damage was elsewhere, or a remote read failed once).
    """
    for path in input_files(file_pattern):
        try:
            tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
        except tf.errors.DataLossError as e:
            return DamagedDataError(f"{path} is truncated or corrupt ({_data_loss_reason(e)}); {_RECREATE}")
    return DamagedDataError(f"reading {file_pattern} failed ({_data_loss_reason(error)})")


def _check_record(path: str, record: bytes, max_seq_length: int, max_predictions_per_seq: Optional[int]) -> None:
    """Raises ValueError if `record` is not a classifier (or masked-LM) tf.Example with
    `max_seq_length` tokens (and `max_predictions_per_seq` predictions)."""
    try:
        example = tf.train.Example.FromString(record)
    except Exception as e:  # The protobuf error type depends on the protobuf backend.
        raise ValueError(f"{path}: the first record is not a tf.Example ({e}).") from e
    feature = example.features.feature
    kind = "classifier" if max_predictions_per_seq is None else "masked-LM"
    missing = [name for name in parsing_spec_for(max_seq_length, max_predictions_per_seq) if name not in feature]
    if missing:
        raise ValueError(f"{path}: examples lack the {kind} features {', '.join(missing)}.")
    length = len(feature["input_ids"].int64_list.value)
    if length != max_seq_length:
        raise ValueError(
            f"{path}: examples have {length} tokens, but max_seq_length is {max_seq_length}. "
            f"Pass --max_seq_length={length} or recreate the data with --max_seq_length={max_seq_length}.")
    if max_predictions_per_seq is not None:
        predictions = len(feature["masked_lm_positions"].int64_list.value)
        if predictions != max_predictions_per_seq:
            raise ValueError(
                f"{path}: examples have {predictions} masked-LM predictions, but max_predictions_per_seq is "
                f"{max_predictions_per_seq}. Pass --max_predictions_per_seq={predictions}.")


def parsing_spec_for(max_seq_length: int,
                     max_predictions_per_seq: Optional[int] = None) -> Dict[str, tf.io.FixedLenFeature]:
    """The parsing spec of the numeric classifier (or, given `max_predictions_per_seq`, masked-LM)
    features (no strings)."""
    if max_predictions_per_seq is not None:
        return example_features.pretrain_parsing_spec(max_seq_length, max_predictions_per_seq,
                                                      include_strings=False)
    return example_features.parsing_spec(max_seq_length, include_strings=False)


def parse_batch(serialized: tf.Tensor, max_seq_length: int,
                max_predictions_per_seq: Optional[int] = None) -> Dict[str, tf.Tensor]:
    """Parses a batch of serialized classifier (or masked-LM) examples into model features.

    Args:
      serialized: <string>[batch] serialized tf.Examples.
      max_seq_length: tokens per example.
      max_predictions_per_seq: read masked-LM examples with this many predictions; None:
        classifier examples.

    Returns:
      dict of <int32>[batch, max_seq_length] integer token features, <float32>[batch,
      max_seq_length] `numeric_values` and `numeric_values_scale`, <int32>[batch] /
      <float32>[batch] per-example features (`aggregation_function_id`, `answer`, ...), and
      <int32>[batch, QUESTION_ID_INTS_LENGTH] `question_id_ints`; for masked-LM examples the
      token features, <int32>[batch, max_predictions_per_seq] `masked_lm_positions`, `_ids`,
      `_location`, `_is_number`, <float32>[batch, max_predictions_per_seq] `masked_lm_weights`,
      and <int32>[batch] `next_sentence_labels` and `table_id_hash`.
    """
    parsed = tf.io.parse_example(serialized, parsing_spec_for(max_seq_length, max_predictions_per_seq))
    features = {}
    for name, value in parsed.items():
        if name in SCALAR_FEATURES:
            value = tf.squeeze(value, axis=1)
        if value.dtype == tf.int64:
            # int32 is what the model's embedding lookups and segment ops take, and TPUs want.
            value = tf.cast(value, tf.int32)
        features[name] = value
    return features


def make_dataset(
    file_pattern: str,
    max_seq_length: int,
    batch_size: int,
    training: bool,
    shuffle_buffer: int = 10_000,
    seed: Optional[int] = None,
    input_context: Optional[tf.distribute.InputContext] = None,
    max_predictions_per_seq: Optional[int] = None,
    bucket_lengths: Sequence[int] = (),
    skip_batches: int = 0,
) -> tf.data.Dataset:
    """Batches of parsed classifier (or masked-LM) examples.

    Args:
      file_pattern: path or glob of TFRecord files.
      max_seq_length: tokens per example (checked on the first record of every file).
      batch_size: examples per batch (per replica when called through
        `strategy.distribute_datasets_from_function`).
      training: shuffle, repeat forever and drop the last partial batch; otherwise one pass in
        file order, the last batch possibly smaller.
      shuffle_buffer: examples in the shuffle buffer; <= 1 disables shuffling.
      seed: shuffle seed. With a seed the dataset is the same sequence of batches every time it is
        made (each epoch reshuffled, the reshuffles seeded too), given the same TensorFlow global
        seed (`tf.random.set_seed`; `trainer.train` sets it to the same seed). None: a random
        order each time (unless shuffle_buffer <= 1: file order).
      input_context: from `distribute_datasets_from_function`; with several input pipelines (one
        per worker) each reads its own shard of the files, or of the records if there are fewer
        files than pipelines.
      max_predictions_per_seq: read masked-LM examples with this many predictions; None:
        classifier examples.
      bucket_lengths: training only: group examples by real length into these buckets (see
        `effective_buckets`) and cut each batch's per-token features to its bucket's length; the
        sequence dimension is then None in the element spec. Every batch is full: an example waits
        in its bucket until batch_size examples are there (the data repeat, so none is lost).
        Empty, or no bucket below max_seq_length: every batch has max_seq_length tokens.
      skip_batches: leave out the first this many batches (the batches as they come out, after
        bucketing), e.g. those a resumed run has already trained on. They are still read (and,
        with length buckets, parsed): skipping costs a pass over them.

    Returns:
      A dataset of feature dicts as `parse_batch` returns them.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    if skip_batches < 0:
        raise ValueError(f"skip_batches must be >= 0, got {skip_batches}.")
    files = check_examples(file_pattern, max_seq_length, max_predictions_per_seq)
    dataset = _records(files, input_context)
    if training:
        if shuffle_buffer > 1:
            # Each pass of `repeat` reshuffles. With a seed, the passes' shuffle seeds come from a
            # generator seeded by it, started afresh in each dataset made: every dataset of the
            # same seed reads the same passes.
            dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=training)
    buckets = effective_buckets(bucket_lengths, max_seq_length)
    bucketed = training and len(buckets) > 1
    if skip_batches and not bucketed:
        dataset = dataset.skip(skip_batches)  # Before parsing: the skipped batches are only read.
    # Order-preserving from here on (deterministic maps; group_by_window is sequential).
    dataset = dataset.map(
        lambda serialized: parse_batch(serialized, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if bucketed:
        dataset = _bucket_by_length(dataset.unbatch(), buckets, batch_size)
        if skip_batches:
            dataset = dataset.skip(skip_batches)  # Bucketed batches: what a training step reads.
    return dataset.prefetch(tf.data.AUTOTUNE)


def effective_buckets(bucket_lengths: Sequence[int], max_seq_length: int) -> Tuple[int, ...]:
    """The sorted bucket lengths below max_seq_length, then max_seq_length itself (for the longest
    examples); () when `bucket_lengths` is empty."""
    if not bucket_lengths:
        return ()
    return tuple(sorted({length for length in bucket_lengths if length < max_seq_length})) + (max_seq_length,)


def real_length(input_mask: tf.Tensor) -> tf.Tensor:
    """<int32>[...] the position of the last real token + 1 of <int32>[..., seq] `input_mask`
    (its sum when, as the converters write them, the real tokens come first)."""
    positions = tf.range(1, tf.shape(input_mask)[-1] + 1, dtype=tf.int32)
    return tf.reduce_max(tf.cast(input_mask > 0, tf.int32) * positions, axis=-1)


def _bucket_by_length(examples: tf.data.Dataset, buckets: Tuple[int, ...],
                      batch_size: int) -> tf.data.Dataset:
    """Full batches of `examples` of one bucket each, per-token features cut to the bucket length."""
    lengths = tf.constant(buckets, tf.int32)

    def bucket_of(length: tf.Tensor) -> tf.Tensor:  # The smallest bucket >= length.
        return tf.searchsorted(lengths, tf.reshape(length, [-1]), side="left")[0]

    def cut(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        bucket_length = tf.gather(lengths, bucket_of(tf.reduce_max(real_length(features["input_mask"]))))
        return {name: value[:, :bucket_length] if name in TOKEN_FEATURES else value
                for name, value in features.items()}

    dataset = examples.group_by_window(
        key_func=lambda features: tf.cast(bucket_of(real_length(features["input_mask"])), tf.int64),
        reduce_func=lambda _, window: window.batch(batch_size, drop_remainder=True),
        window_size=batch_size)
    return dataset.map(cut, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _records(files: List[str], input_context: Optional[tf.distribute.InputContext]) -> tf.data.Dataset:
    """Serialized records of `files` (this pipeline's shard of them), in a deterministic order."""
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    if num_pipelines > 1 and len(files) >= num_pipelines:
        files = files[pipeline_id::num_pipelines]
        num_pipelines = 1
    dataset = tf.data.Dataset.from_tensor_slices(files)
    dataset = dataset.interleave(
        tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if num_pipelines > 1:
        # Fewer files than workers: every worker reads everything and keeps its share of records.
        dataset = dataset.shard(num_pipelines, pipeline_id)
    return dataset
