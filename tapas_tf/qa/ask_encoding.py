"""A question about a table -> model features sized to the table (the ask path's encoder).

    encoder = TableEncoder.for_model(model_config, vocab_file)
    prepared = encoder.prepare(frame)                    # once per table: text, numbers, dates
    encoded = encoder.encode(prepared, "which city is the largest?")
    encoded.features["input_ids"]                        # <int32>[bucket], e.g. [128]

The table is converted once (`prepare`; the converter also caches its tokens), and each question
costs only its own tokens. The sequence is cut to the smallest bucket (`BUCKETS`: 32, 64, 96, ...
every 32 tokens to 256, then 320, 384, 448, 512) that holds it, not padded to 512, so that a small
table runs at a short, compiled length.

Limits are never silent. A table bigger than the model holds (more than 255 body rows or 255
columns, or more cells than fit in the sequence) is pruned to the rows and columns most related
to the question (`pruning`) when `prune` is on, and refused with an `AskError` saying what to do
when it is off; either way the encoded question's `diagnostics` say what was cut, trimmed or
clamped. Serving clients use this encoder too, with `decoding` and `ask_results`.
"""

import collections
import dataclasses
import logging
import os
import threading
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.classifier_examples import (
    STAT_CELLS_TRIMMED,
    STAT_RANKS_CLAMPED,
    ExampleConverter,
)
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError, Reason
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES
from tapas_tf.features.table_encoding import table_fingerprint
from tapas_tf.features.tokenization import TapasTokenizer
from tapas_tf.qa import pruning
from tapas_tf.qa.table_sources import ROWS_TOTAL
from tapas_tf.qa.tables import AskError, TableLike, frame_fingerprint, read_table, table_from_frame

logger = logging.getLogger(__name__)  # Quiet in the Python API (tapas_tf's NullHandler).

# Every 32 tokens up to 256, then every 64: a question pads by at most 31 tokens (63 beyond 256),
# which the model pays in full (the bundled model: 3.0 ms at 256 tokens, 2.4 ms at 224).
BUCKETS = (32, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)
Coordinates = Sequence[Tuple[int, int]]
# Conversion failures that fewer rows can cure.
_TOO_BIG = (Reason.SEQUENCE_TOO_LONG, Reason.TOO_MANY_ROWS)


@dataclasses.dataclass(frozen=True)
class PreparedTable:
    """A user's table, converted to text and annotated with numbers and dates, once."""

    table: interaction_pb2.Table
    column_names: Tuple[str, ...]
    diagnostics: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class EncodedQuestion:
    """One question, ready for the model.

    Attributes:
      question: the question as asked.
      features: MODEL_INPUT_FEATURES, each <int32>[length], length a bucket.
      real_length: tokens before padding to the bucket.
      pruned: the table the model saw (possibly cut), with the way back to the user's cells.
      stats: limits applied by conversion (`classifier_examples.STAT_*`).
      diagnostics: what a user should know about this answer's input, one sentence each.
      for_aggregation_model: encoded for the aggregation model of a pair (`TableQA.encode`), which
        answers it.
      follow_up: the question sees an earlier answer's cells (`prev_label_ids`).
      alternative: the same question encoded for the other model of a pair, which answers it too;
        the answer with the higher calibrated confidence is kept (`TableQA.encode`).
    """

    question: str
    features: Dict[str, np.ndarray]
    real_length: int
    pruned: pruning.PrunedTable
    stats: Dict[str, int]
    diagnostics: Tuple[str, ...]
    for_aggregation_model: bool = False
    follow_up: bool = False
    alternative: Optional["EncodedQuestion"] = None


def bucket_batches(encoded: Sequence[EncodedQuestion], batch_size: int) -> Iterator[Tuple[int, List[int]]]:
    """(length, indices): the positions of `encoded` in batches of at most `batch_size` that share a
    bucket length, in order of first appearance; one model call each."""
    by_length: Dict[int, List[int]] = {}
    for index, item in enumerate(encoded):
        by_length.setdefault(len(item.features["input_ids"]), []).append(index)
    for length, indices in by_length.items():
        for start in range(0, len(indices), batch_size):
            yield length, indices[start:start + batch_size]


def _remember(cache: Dict[bytes, PreparedTable], key: bytes, prepared: PreparedTable, size: int = 16) -> None:
    """Puts `prepared` in `cache`, dropping the oldest entry past `size`."""
    if key not in cache and len(cache) >= size:
        cache.pop(next(iter(cache)))
    cache[key] = prepared


def bucket_length(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds `length` tokens."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    raise ValueError(f"{length} tokens do not fit the largest bucket {buckets[-1]}")


class TableEncoder:
    """Converts (table, question, previous answer) to model features; see the module docstring.

    Args:
      config: conversion options; `max_row_id` and `max_column_id` are the model's limits.
      trained_rows: the most body rows the model's heads were configured for (for a diagnostic).
      tokenizer: default, the tokenizer of `config.vocab_file`.
      prune: cut tables that do not fit (True) or refuse them (False).
      buckets: sequence lengths to pad to; those above `config.max_seq_length` are ignored.
    """

    def __init__(self, config: ConversionConfig, trained_rows: int = 63, tokenizer=None, prune: bool = True,
                 buckets: Sequence[int] = BUCKETS):
        self.config = config
        self.trained_rows = trained_rows
        self.prune = prune
        self.converter = ExampleConverter(config, tokenizer or TapasTokenizer(config.vocab_file))
        self.buckets = tuple(b for b in buckets if b < config.max_seq_length) + (config.max_seq_length,)
        self._prepared: "Dict[bytes, PreparedTable]" = {}
        self._prepared_frames: "Dict[bytes, PreparedTable]" = {}  # By `frame_fingerprint`.
        # A server encodes on several threads: the caches (ours, the converter's) change under it.
        self._lock = threading.Lock()

    @classmethod
    def for_model(cls, model_config, vocab_file: Optional[str], prune: bool = True, max_seq_length: Optional[int] = None,
                  segments: Optional[Tuple[int, int]] = None, **options) -> "TableEncoder":
        """The encoder that matches a model (its `TapasConfig`, or the config as a dict, as an
        export's assets hold it): the one place a model's table limits are read.

        Row and column ids must fit the token-type embeddings (`type_vocab_sizes`) and the heads'
        (rows, columns) `segments` of the model as it runs (larger ids would share the last
        segment, merging cells); a bigger table is pruned (or refused). The ask API's runners size
        their heads to the embeddings (`tf_runner.inference_segments`, the LiteRT copy's full
        signature): `segments` None. A SavedModel keeps the trained heads: pass
        (`max_num_rows`, `max_num_columns`). `trained_rows` (for the note on rows beyond training)
        is `max_num_rows - 1`. The sequence is at most 512 tokens and the position embeddings.
        `vocab_file` None: BERT's uncased vocabulary (`ConversionConfig.from_options` resolves it)."""
        def field(name: str):
            return model_config[name] if isinstance(model_config, Mapping) else getattr(model_config, name)

        type_vocab_sizes = field("type_vocab_sizes")
        max_rows, max_columns = int(type_vocab_sizes[2]), int(type_vocab_sizes[1])
        if segments is not None:
            max_rows, max_columns = min(max_rows, segments[0]), min(max_columns, segments[1])
        length = min(max_seq_length or 512, int(field("max_position_embeddings")))
        config = ConversionConfig.from_options(vocab_file, max_seq_length=length, max_column_id=max_columns,
                                               max_row_id=max_rows, fail_on_dropped_answers=False)
        return cls(config, trained_rows=int(field("max_num_rows")) - 1, prune=prune, **options)

    @classmethod
    def for_model_dir(cls, model_dir: str, model_config, vocab_file: Optional[str] = None, prune: bool = True,
                      max_seq_length: Optional[int] = None) -> "TableEncoder":
        """`for_model` with the model directory's vocabulary: `vocab_file`, else the directory's
        vocab.txt, else BERT's uncased vocabulary (with `[EMPTY]`), which every released TAPAS model uses."""
        local_vocab = os.path.join(model_dir, "vocab.txt")
        vocab = vocab_file or (local_vocab if os.path.exists(local_vocab) else None)
        return cls.for_model(model_config, vocab, prune=prune, max_seq_length=max_seq_length)

    @property
    def max_table_shape(self) -> Tuple[int, int]:
        """(body rows, columns) the model holds at once; a bigger table is pruned or refused."""
        return self.config.max_row_id - 1, self.config.max_column_id - 1

    def share_tables(self, other: "TableEncoder") -> bool:
        """Converts with `other`'s converter, and so shares its per-table work (a big table's tokens,
        numbers and ranks: seconds and hundreds of MB at 100,000 rows), when both would convert alike:
        the same conversion options and the same vocabulary, from whichever file. The two models of a
        pair do (`TableQA.aggregation_model`). Returns whether they now share."""
        mine, theirs = self.converter, other.converter
        alike = (dataclasses.replace(mine.config, vocab_file=theirs.config.vocab_file) == theirs.config
                 and mine.tokenizer.same_vocabulary(theirs.tokenizer))
        if alike:
            self.converter, self._lock = theirs, other._lock  # pylint: disable=protected-access
        return alike

    @property
    def tokenizer(self):
        return self.converter.tokenizer

    # --- tables ---------------------------------------------------------------------------------

    def prepare(self, table: TableLike, table_id: str = "table") -> PreparedTable:
        """Reads and annotates a table (cached by content, so asking again costs nothing)."""
        frame = read_table(table)
        total = frame.attrs.get(ROWS_TOTAL)
        # Asked again about the same frame, its texts need not be made to find it (a big table's
        # second question: a second protobuf of every cell, ~1 s and ~100 MB at 100,000 rows).
        quick = frame_fingerprint(frame)
        if quick is not None:
            quick += b"\0" + table_id.encode() + b"\0" + str(total).encode()
            with self._lock:
                if quick in self._prepared_frames:
                    return self._prepared_frames[quick]
        proto = table_from_frame(frame, table_id)
        key = table_fingerprint(proto) + str(total).encode()
        with self._lock:
            prepared = self._prepared.get(key)
        if prepared is None:
            number_annotation.add_numeric_table_values(proto)
            names = tuple(column.text for column in proto.columns)
            prepared = PreparedTable(proto, names, _table_diagnostics(names) + _cut_diagnostics(len(proto.rows), total))
        with self._lock:
            _remember(self._prepared, key, prepared)
            if quick is not None:
                _remember(self._prepared_frames, quick, prepared)
        return prepared

    # --- questions ------------------------------------------------------------------------------

    def encode(self, prepared: PreparedTable, question: str,
               previous_answer: Optional[Coordinates] = None, prune: Optional[bool] = None) -> EncodedQuestion:
        """Features of one question; `previous_answer` cells (user's coordinates) feed prev_label_ids.
        `prune` None: the encoder's own setting.

        Raises:
          TableTooBig (an AskError): a table that does not fit with pruning off.
          AskError: an empty or too long question.
        """
        if not isinstance(question, str) or not question.strip():
            raise AskError("the question is empty")
        interaction = interaction_pb2.Interaction(id="ask")
        proto_question = interaction.questions.add(id="ask_0", original_text=question.strip())
        number_annotation.add_numeric_values_to_question(proto_question)
        previous = [tuple(int(x) for x in c) for c in (previous_answer or ())]
        pruned, example = self._fit(prepared.table, interaction, previous, self.prune if prune is None else prune)
        features = example.features
        real_length = int(np.sum(features["input_mask"]))
        length = bucket_length(real_length, self.buckets)
        trimmed = {name: np.asarray(features[name][:length], np.int32) for name in MODEL_INPUT_FEATURES}
        diagnostics = prepared.diagnostics + self._diagnostics(pruned, example.stats, proto_question)
        return EncodedQuestion(question.strip(), trimmed, real_length, pruned, example.stats, diagnostics,
                               follow_up=bool(previous))

    def _fit(self, table: interaction_pb2.Table, interaction: interaction_pb2.Interaction,
             previous: Coordinates, prune: bool):
        """(the table the model sees, its converted example), pruning as needed and allowed."""
        question = interaction.questions[0].original_text
        rows, columns = len(table.rows), len(table.columns)
        max_rows, max_columns = self.max_table_shape
        if (rows > max_rows or columns > max_columns) and not prune:
            raise TableTooBig(f"the table has {rows} rows and {columns} columns; the model holds at most "
                           f"{max_rows} rows and {max_columns} columns; read it in windows (windows=True, --windows), "
                           "ask with pruning on (prune=True, --prune) or pass a smaller table")
        kept_columns = pruning.choose_columns(table, question, max_columns)
        keep = min(rows, max_rows)
        # Rows are ranked only when some must go: a table that fits keeps them all, in order, and
        # ranking reads every cell (most of a question's encoding time on a small table).
        ranked = pruning.rank_rows(table, question, kept_columns) if rows > max_rows else np.arange(rows)
        attempt = self._try(table, interaction, ranked[:keep], kept_columns, previous)
        if not isinstance(attempt, ConversionError):
            return attempt
        if attempt.reason not in _TOO_BIG or not prune:
            raise _ask_error(attempt, prune)
        if rows <= max_rows:
            ranked = pruning.rank_rows(table, question, kept_columns)
        return self._largest_fit(table, interaction, ranked[:keep], kept_columns, previous, attempt)

    def _largest_fit(self, table, interaction, ranked: np.ndarray, columns, previous: Coordinates,
                     error: ConversionError):
        """Binary search for the most related rows that fit (keep=0 never fits: a table needs a row)."""
        fits, best = 0, None
        low, high = 1, len(ranked) - 1
        while low <= high:
            middle = (low + high) // 2
            attempt = self._try(table, interaction, ranked[:middle], columns, previous)
            if isinstance(attempt, ConversionError):
                if attempt.reason not in _TOO_BIG:
                    raise _ask_error(attempt, self.prune)
                high = middle - 1
            else:
                fits, best = middle, attempt
                low = middle + 1
        if best is None:
            raise AskError(f"not even one row of this {len(table.columns)}-column table fits in "
                           f"{self.config.max_seq_length} tokens with the question ({error.detail}); "
                           "pass fewer columns")
        logger.info("Pruned the table to %d of %d rows to fit %d tokens", fits, len(table.rows),
                     self.config.max_seq_length)
        return best

    def _try(self, table, interaction, rows: Sequence[int], columns: Sequence[int], previous: Coordinates):
        rows = sorted(int(r) for r in rows)
        if len(rows) == len(table.rows) and len(columns) == len(table.columns):
            pruned = pruning.unpruned(table)  # The whole table: no copy of its cells per question.
        else:
            pruned = pruning.subset(table, rows, columns)
        interaction = interaction_pb2.Interaction(id=interaction.id, table=pruned.table,
                                                  questions=interaction.questions)
        try:
            previous_cells = pruned.from_original(previous)
            with self._lock:  # Only the conversion of the kept rows: ranking the rows stays outside.
                return pruned, self.converter.convert(interaction, 0, prev_answer_coordinates=previous_cells)
        except ConversionError as e:
            if e.reason == Reason.QUESTION_TOO_LONG:
                raise _ask_error(e, self.prune) from None
            return e

    def _diagnostics(self, pruned: pruning.PrunedTable, stats: Dict[str, int],
                     question: interaction_pb2.Question) -> Tuple[str, ...]:
        notes = []
        if pruned.is_pruned:
            notes.append(f"The table was pruned to the {len(pruned.rows)} of {pruned.original_rows} rows and "
                         f"{len(pruned.columns)} of {pruned.original_columns} columns most related to the "
                         "question; an aggregation sees only the kept rows.")
        if stats.get(STAT_CELLS_TRIMMED):
            notes.append(f"{stats[STAT_CELLS_TRIMMED]} cells were cut to fewer word pieces to fit "
                         f"{self.config.max_seq_length} tokens.")
        if stats.get(STAT_RANKS_CLAMPED):
            notes.append(f"{stats[STAT_RANKS_CLAMPED]} cells rank above {self.config.max_rank} in their "
                         f"column and share rank {self.config.max_rank}.")
        if len(pruned.rows) > self.trained_rows:
            notes.append(f"The model saw {len(pruned.rows)} rows; its heads were trained for at most "
                         f"{self.trained_rows}, so the rows beyond use row embeddings it may not have "
                         "learned.")
        pieces = self.tokenizer.tokenize(question.text)
        unknown = sum(1 for p in pieces if p == "[UNK]")
        if pieces and unknown * 2 > len(pieces):
            notes.append(f"{unknown} of the question's {len(pieces)} word pieces are unknown to the "
                         "vocabulary.")
        return tuple(notes)


def _table_diagnostics(names: Tuple[str, ...]) -> Tuple[str, ...]:
    counts = collections.Counter(names)  # Linear: a per-name count took minutes for 100,000 columns.
    duplicates = sorted(n for n, count in counts.items() if count > 1 and n)
    notes = []
    if duplicates:
        notes.append(f"Columns share the names {duplicates}; the model tells them apart by position only.")
    if any(not n.strip() for n in names):
        notes.append("Some columns have no name; the model sees them as [EMPTY].")
    return tuple(notes)


class TableTooBig(AskError):
    """The table does not fit one example and pruning is off: read it in windows, or prune it."""


def _cut_diagnostics(rows: int, total) -> Tuple[str, ...]:
    """The note of a table that holds only the first rows of its source (`table_sources.ROWS_TOTAL`)."""
    if total is None:
        return ()
    of = f"its {total:,} rows" if isinstance(total, int) else "its rows"
    return (f"Only the first {rows:,} of {of} were read (the row limit, --max_rows); a count, total or average "
            "covers only those rows.",)


def _ask_error(error: ConversionError, prune: bool) -> AskError:
    if error.reason == Reason.QUESTION_TOO_LONG:
        return AskError(f"the question is too long: {error.detail}; shorten it")
    hint = "" if prune else ("; read it in windows (windows=True, --windows) or ask with pruning on (prune=True, "
                             "--prune) to keep the most related rows")
    kind = TableTooBig if error.reason in _TOO_BIG else AskError
    return kind(f"the table does not fit the model: {error.detail}{hint}")
