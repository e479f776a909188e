"""Interaction -> classifier example conversion (one example per question).

Token layout: `[CLS] question [SEP] header-row body-rows`, padded to
`max_seq_length`. Question tokens have segment 0, column 0 and row 0; table
tokens segment 1, header tokens row 0, body rows from 1, columns from 1.

Per-table work (tokens, numbers, ranks, fitting costs) is cached, so the
questions of a sequence, and questions repeating a table, pay only for their own
tokens, labels and numeric relations.
"""

import collections
import dataclasses
import hashlib
import logging
import math
from typing import Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.conversion_config import (
    ConversionConfig,
    ConversionError,
    Reason,
)
from tapas_tf.features.example_features import QUESTION_ID_INTS_LENGTH
from tapas_tf.features.table_encoding import (
    EncodedTable,
    TableTokens,
    table_fingerprint,
)

logger = logging.getLogger(__name__)  # Quiet in the Python API (tapas_tf's NullHandler).

Coordinates = Sequence[Tuple[int, int]]

# Statistics of limits that were applied to an example without failing it.
STAT_ROWS_DROPPED = "rows_dropped"
STAT_CELLS_TRIMMED = "cells_trimmed"
STAT_RANKS_CLAMPED = "rank_cells_clamped"
STAT_ANSWER_CELLS_DROPPED = "answer_cells_dropped"

_TABLE_CACHE_SIZE = 64


@dataclasses.dataclass
class ConvertedExample:
    """Features (NumPy arrays, [max_seq_length] per token feature) and the
    limits that were applied to produce them (counts, 0 when none)."""

    features: Dict[str, object]
    stats: Dict[str, int]


def table_id_hash(table_id: str) -> int:
    """A stable 31-bit hash of a table id (the same in every process)."""
    return int.from_bytes(hashlib.sha256(table_id.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


class ExampleConverter:
    """Converts the questions of interactions into classifier examples."""

    def __init__(self, config: ConversionConfig, tokenizer=None):
        if config.drop_rows_to_fit is None:
            raise ValueError("drop_rows_to_fit=None means 'by split': convert with "
                             "config.for_split(is_training) instead")
        if tokenizer is None:
            from tapas_tf.features.tokenization import TapasTokenizer

            tokenizer = TapasTokenizer(config.vocab_file)
        self.config = config
        self.tokenizer = tokenizer
        self._tables: "collections.OrderedDict[bytes, Union[EncodedTable, ConversionError]]" = (
            collections.OrderedDict())
        self._warned = set()
        self._question_ids: Dict[str, list] = {}

    # --- public API ---------------------------------------------------------------

    def convert(self, interaction: interaction_pb2.Interaction, question_index: int,
                prev_answer_coordinates: Optional[Coordinates] = None) -> ConvertedExample:
        """Converts question `question_index` of `interaction`.

        Args:
          prev_answer_coordinates: the cells of the previous answer, 0-based
            (row, column) of the body; by default the gold answer of the previous
            question of the interaction (none for the first question).

        Raises:
          ConversionError: the question cannot become a correct example.
        """
        question = interaction.questions[question_index]
        if prev_answer_coordinates is None and question_index > 0:
            prev_answer_coordinates = _coordinates(interaction.questions[question_index - 1].answer)
        table = self._encoded_table(interaction.table)
        self._check_answer(question, table)
        question_ids = self._question_token_ids(question)
        num_rows, cap = table.fit(self.config.max_seq_length - len(question_ids))
        tokens = table.tokens(num_rows, cap)
        features = self._assemble(question_ids, tokens)
        cell_index = features.pop("_cell_index")
        answer_cells = _coordinates(question.answer)
        features["label_ids"] = _cell_labels(answer_cells, table, cell_index)
        features["prev_label_ids"] = _cell_labels(prev_answer_coordinates or (), table, cell_index)
        features["numeric_relations"] = _relations(question, table, cell_index)
        features.update(self._answer_features(interaction.table.table_id, question))
        stats = self._stats(table, num_rows, tokens, answer_cells, question.id)
        return ConvertedExample(features=features, stats=stats)

    def encoded_table(self, table: interaction_pb2.Table, copy: bool = True) -> EncodedTable:
        """The table tokenised, numbered and ranked once (cached by content), for `convert_rows`;
        `copy=False` keeps `table` itself, for a caller that never changes it afterwards.

        Raises:
          ConversionError: an empty or ragged table, or more columns than `max_column_id` allows.
        """
        return self._encoded_table(table, copy)

    def convert_rows(self, table: EncodedTable, question: interaction_pb2.Question, rows: Sequence[int],
                     cap: int, prev_answer_coordinates: Coordinates = (),
                     relations: Optional[np.ndarray] = None) -> ConvertedExample:
        """One example of `question` over the header and the body rows `rows` of `table`: a window
        of a table too big for one example (`EncodedTable.window_tokens`: the window's rows are
        numbered 1.. in the example, but ranks and numbers are the whole table's).

        Args:
          table: from `encoded_table`.
          rows: 0-based body rows of `table`, at most `max_row_id - 1`.
          cap: tokens kept per cell.
          prev_answer_coordinates: the previous answer's cells, (row, column) of `table`.
          relations: `table.cell_relations(question)`, computed once for all the windows of a
            question (computed here when None).

        Raises:
          ConversionError: QUESTION_TOO_LONG, TOO_MANY_ROWS, or SEQUENCE_TOO_LONG when the rows do
            not fit in `max_seq_length` with the question.
        """
        if len(rows) >= self.config.max_row_id:
            raise ConversionError(Reason.TOO_MANY_ROWS,
                                  f"{len(rows)} rows; at most {self.config.max_row_id - 1} fit in one example")
        question_ids = self._question_token_ids(question)
        tokens = table.window_tokens(rows, cap)
        length = len(question_ids) + len(tokens.input_ids)
        if length > self.config.max_seq_length:
            raise ConversionError(Reason.SEQUENCE_TOO_LONG,
                                  f"{len(rows)} rows need {length} tokens with the question; "
                                  f"max_seq_length is {self.config.max_seq_length}")
        features = self._assemble(question_ids, tokens)
        cell_index = features.pop("_cell_index")
        features["label_ids"] = _cell_labels(_coordinates(question.answer), table, cell_index)
        features["prev_label_ids"] = _cell_labels(prev_answer_coordinates, table, cell_index)
        by_cell = table.cell_relations(question) if relations is None else relations
        features["numeric_relations"] = _relations_of(by_cell, cell_index)
        features.update(self._answer_features(table.table.table_id, question))
        stats = {STAT_ROWS_DROPPED: 0, STAT_CELLS_TRIMMED: tokens.num_trimmed_cells,
                 STAT_RANKS_CLAMPED: tokens.num_clamped_rank_cells, STAT_ANSWER_CELLS_DROPPED: 0}
        return ConvertedExample(features=features, stats=stats)

    def convert_interaction(self, interaction: interaction_pb2.Interaction
                            ) -> Iterator[Tuple[int, Union[ConvertedExample, ConversionError]]]:
        """Yields (question index, example or the error that prevented it)."""
        for index in range(len(interaction.questions)):
            try:
                yield index, self.convert(interaction, index)
            except ConversionError as error:
                yield index, error

    # --- per table ----------------------------------------------------------------

    def _encoded_table(self, table: interaction_pb2.Table, copy: bool = True) -> EncodedTable:
        key = table_fingerprint(table)
        if key in self._tables:
            self._tables.move_to_end(key)
        else:
            try:
                self._check_columns(table)
                self._tables[key] = EncodedTable(table, self.tokenizer, self.config, copy=copy)
            except ConversionError as error:
                self._tables[key] = error
            if len(self._tables) > _TABLE_CACHE_SIZE:
                self._tables.popitem(last=False)
        entry = self._tables[key]
        if isinstance(entry, ConversionError):
            raise ConversionError(entry.reason, entry.detail)
        return entry

    def _check_columns(self, table: interaction_pb2.Table) -> None:
        if len(table.columns) >= self.config.max_column_id:
            raise ConversionError(
                Reason.TOO_MANY_COLUMNS,
                f"table {table.table_id!r} has {len(table.columns)} columns; "
                f"at most {self.config.max_column_id - 1} fit")

    # --- per question ---------------------------------------------------------------

    def _question_token_ids(self, question: interaction_pb2.Question) -> list:
        if len(question.id) > QUESTION_ID_INTS_LENGTH:
            raise ConversionError(
                Reason.QUESTION_ID_TOO_LONG,
                f"question id {question.id!r} is longer than {QUESTION_ID_INTS_LENGTH} characters")
        text = question.text or question.original_text
        ids = self._question_ids.get(text)
        if ids is None:  # The windows of a big table ask one question many times.
            pieces = self.tokenizer.tokenize(text)
            ids = ([self.tokenizer.cls_id] + list(self.tokenizer.convert_tokens_to_ids(pieces))
                   + [self.tokenizer.sep_id])
            if len(self._question_ids) >= _TABLE_CACHE_SIZE:
                self._question_ids.pop(next(iter(self._question_ids)))
            self._question_ids[text] = ids
        pieces = ids[1:-1]
        # At least one table token per column must follow the question.
        if len(ids) >= self.config.max_seq_length:
            raise ConversionError(
                Reason.QUESTION_TOO_LONG,
                f"question {question.id!r} has {len(pieces)} word pieces; "
                f"max_seq_length is {self.config.max_seq_length}")
        return ids

    def _check_answer(self, question: interaction_pb2.Question, table: EncodedTable) -> None:
        answer = question.answer
        if not answer.is_valid:
            raise ConversionError(Reason.INVALID_ANSWER, f"question {question.id!r}: answer marked invalid")
        for row, column in _coordinates(answer):
            if not (0 <= row < table.num_rows and 0 <= column < table.num_columns):
                raise ConversionError(
                    Reason.ANSWER_OUTSIDE_TABLE,
                    f"question {question.id!r}: answer cell ({row}, {column}) is outside the "
                    f"{table.num_rows}x{table.num_columns} table")

    def _assemble(self, question_ids: list, tokens: TableTokens) -> Dict[str, object]:
        """Concatenates question and table tokens and pads to max_seq_length."""
        q = len(question_ids)
        total = q + len(tokens.input_ids)
        pad = self.config.max_seq_length - total
        zeros_q = np.zeros(q, np.int64)

        def join(question_part, table_part, pad_value, dtype=np.int64):
            return np.concatenate([question_part, table_part, np.full(pad, pad_value)]).astype(dtype)

        return {
            "input_ids": join(np.asarray(question_ids), tokens.input_ids, 0),
            "input_mask": join(np.ones(q), np.ones(len(tokens.input_ids)), 0),
            "segment_ids": join(zeros_q, np.ones(len(tokens.input_ids)), 0),
            "column_ids": join(zeros_q, tokens.column_ids, 0),
            "row_ids": join(zeros_q, tokens.row_ids, 0),
            "column_ranks": join(zeros_q, tokens.column_ranks, 0),
            "inv_column_ranks": join(zeros_q, tokens.inv_column_ranks, 0),
            "numeric_values": join(np.full(q, np.nan), tokens.numeric_values, np.nan, np.float32),
            "numeric_values_scale": join(np.ones(q), tokens.numeric_values_scale, 1.0, np.float32),
            "_cell_index": join(np.full(q, -1), tokens.cell_index, -1),
        }

    def _answer_features(self, table_id: str, question) -> Dict[str, object]:
        answer = question.answer
        return {
            "answer": np.asarray([answer.float_value if answer.HasField("float_value") else math.nan],
                                 np.float32),
            "aggregation_function_id": np.asarray([answer.aggregation_function], np.int64),
            "classification_class_index": np.asarray([answer.class_index], np.int64),
            "question_id": question.id,
            "table_id": table_id,
            "table_id_hash": np.asarray([table_id_hash(table_id)], np.int64),
        }

    def _stats(self, table: EncodedTable, num_rows: int, tokens: TableTokens,
               answer_cells: Coordinates, question_id: str) -> Dict[str, int]:
        dropped_answers = sum(1 for r, _ in answer_cells if r >= num_rows)
        if dropped_answers and self.config.fail_on_dropped_answers:
            raise ConversionError(
                Reason.ANSWER_DROPPED_TO_FIT,
                f"question {question_id!r}: {dropped_answers} answer cells are in rows dropped to fit "
                f"({num_rows} of {table.num_rows} rows kept)")
        stats = {
            STAT_ROWS_DROPPED: table.num_rows - num_rows,
            STAT_CELLS_TRIMMED: tokens.num_trimmed_cells,
            STAT_RANKS_CLAMPED: tokens.num_clamped_rank_cells,
            STAT_ANSWER_CELLS_DROPPED: dropped_answers,
        }
        self._warn_limits(stats, question_id)
        return stats

    def _warn_limits(self, stats: Dict[str, int], question_id: str) -> None:
        """Logs the first time each limit bites (the counters hold the totals)."""
        for name in (STAT_ROWS_DROPPED, STAT_CELLS_TRIMMED, STAT_RANKS_CLAMPED, STAT_ANSWER_CELLS_DROPPED):
            if stats[name] and name not in self._warned:
                self._warned.add(name)
                logger.warning("Limit applied (%s=%d) to question %s; further cases are only counted.",
                                name, stats[name], question_id)


def _cell_labels(coordinates: Coordinates, table: EncodedTable, cell_index: np.ndarray) -> np.ndarray:
    """<int64>[max_seq_length]: 1 on the tokens of the given body cells."""
    cells = [r * table.num_columns + c for r, c in coordinates
             if 0 <= r < table.num_rows and 0 <= c < table.num_columns]
    return np.isin(cell_index, cells).astype(np.int64)


def _relations(question: interaction_pb2.Question, table: EncodedTable,
               cell_index: np.ndarray) -> np.ndarray:
    """<int64>[max_seq_length]: numeric relation bits of each body token's cell."""
    return _relations_of(table.cell_relations(question), cell_index)


def _relations_of(by_cell: np.ndarray, cell_index: np.ndarray) -> np.ndarray:
    """<int64>[max_seq_length]: `by_cell` (<int64>[num_rows * num_columns]) on each body token."""
    body = cell_index >= 0
    relations = np.zeros(len(cell_index), np.int64)
    relations[body] = by_cell[cell_index[body]]
    return relations


def _coordinates(answer: interaction_pb2.Answer) -> Tuple[Tuple[int, int], ...]:
    return tuple((c.row_index, c.column_index) for c in answer.answer_coordinates)
