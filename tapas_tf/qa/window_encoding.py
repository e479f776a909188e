"""A question about a table too big for one example -> windows of its rows (the map step's input).

    windowed = encode_windows(encoder, prepared, "how many orders were shipped in may?")
    windowed.windows                 # ((0, ..., 17), (18, ..., 35), ...): body rows of each window
    windowed.features(windowed.windows[3])    # MODEL_INPUT_FEATURES, each <int32>[bucket]

The table is tokenised, numbered and ranked once (`EncodedTable`), whole: a column's ranks are
over every row read, so the largest value has rank 1 in whichever window holds it, and a number
in the question is compared with every cell. Each window is the header and consecutive body rows
that fit `max_seq_length` with the question; windows hold as even a share of the rows as the
tokens allow (`row_windows.split_rows`), and at most the rows the model's heads were trained for.

Columns: all of them when a window can hold `MIN_ROWS_PER_WINDOW` rows with them; else the
columns the question names first (their header shares a word with it), then those whose cells
share words with it (`pruning.column_scores`, DoT's heuristic exact match), until it can. Cells
longer than the room a row has are cut to fewer word pieces (whole words), and said so.

Nothing here runs the model: `window_reading` asks the windows and combines their answers.
"""

import dataclasses
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.conversion_config import ConversionError, Reason
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES
from tapas_tf.features.table_encoding import EncodedTable
from tapas_tf.qa import pruning
from tapas_tf.qa.ask_encoding import PreparedTable, bucket_length
from tapas_tf.qa.row_windows import split_rows
from tapas_tf.qa.tables import AskError

Coordinate = Tuple[int, int]
# Fewer rows than this per window and the columns that relate least to the question go.
MIN_ROWS_PER_WINDOW = 4


@dataclasses.dataclass(frozen=True)
class WindowedQuestion:
    """One question over a big table, ready to be asked window by window.

    Attributes:
      question: the question as asked.
      table: the kept columns of the rows read, tokenised and ranked once.
      question_proto: the question with its numbers and dates annotated.
      columns: the user's column of each kept column.
      windows: the body rows (the user's row indices) of each window, in table order.
      cap: word pieces kept per cell.
      total_rows, total_columns: the user's table.
      max_rows: the row limit that cut the table (the rows read are its first `max_rows`), or None.
      previous: the previous answer's cells, in `table`'s coordinates (a follow-up).
      relations: <int64>[rows * columns] numeric relations of each cell to the question.
      row_lengths: <int64>[rows] tokens of each body row under `cap`.
      row_budget: tokens one example has for body rows, after the question and the header.
      max_window_rows: the most body rows a window holds (the model's trained rows).
      diagnostics: what a user should know about this answer's input, one sentence each.
      for_aggregation_model, follow_up, alternative: as `EncodedQuestion`'s.
    """

    question: str
    table: EncodedTable
    question_proto: interaction_pb2.Question
    columns: Tuple[int, ...]
    windows: Tuple[Tuple[int, ...], ...]
    cap: int
    total_rows: int
    total_columns: int
    max_rows: Optional[int]
    previous: Tuple[Coordinate, ...]
    relations: np.ndarray
    row_lengths: np.ndarray
    row_budget: int
    max_window_rows: int
    diagnostics: Tuple[str, ...]
    encoder: Any = dataclasses.field(repr=False, compare=False, default=None)  # The TableEncoder.
    for_aggregation_model: bool = False
    follow_up: bool = False
    alternative: Optional["WindowedQuestion"] = None

    @property
    def rows_read(self) -> int:
        return self.table.num_rows

    def features(self, rows: Sequence[int]) -> Dict[str, np.ndarray]:
        """MODEL_INPUT_FEATURES of the header and `rows` (any rows read, e.g. a second pass's),
        each <int32>[bucket], the smallest bucket that holds them.

        Raises:
          ConversionError: SEQUENCE_TOO_LONG or TOO_MANY_ROWS when the rows do not fit.
        """
        with self.encoder._lock:  # pylint: disable=protected-access  # The converter's caches.
            example = self.encoder.converter.convert_rows(self.table, self.question_proto, rows, self.cap,
                                                          self.previous, self.relations)
        features = example.features
        length = bucket_length(int(np.sum(features["input_mask"])), self.encoder.buckets)
        return {name: np.asarray(features[name][:length], np.int32) for name in MODEL_INPUT_FEATURES}

    def fits(self, rows: Sequence[int]) -> bool:
        """Whether the header and `rows` fit one example with the question."""
        return (len(rows) <= self.encoder.max_table_shape[0]
                and int(self.row_lengths[list(rows)].sum()) <= self.row_budget)

    def cell(self, row: int, column: int) -> interaction_pb2.Cell:
        """The cell at the user's (row, column); the column must be a kept one."""
        return self.table.table.rows[row].cells[self.columns.index(column)]

    def column_name(self, column: int) -> str:
        return self.table.table.columns[self.columns.index(column)].text


def encode_windows(encoder, prepared: PreparedTable, question: str,
                   previous_answer: Sequence[Coordinate] = (), max_rows: Optional[int] = None) -> WindowedQuestion:
    """Plans the windows of `question` over `prepared` (see the module docstring).

    Args:
      encoder: the model's `TableEncoder` (its converter, limits and buckets).
      prepared: the table, from `encoder.prepare`.
      previous_answer: the previous answer's cells, the user's (row, column).
      max_rows: read only the first `max_rows` body rows (None: every row).

    Raises:
      AskError: an empty or too long question, a `max_rows` below 1, or a table of which not even one
        row fits with the question.
    """
    if not isinstance(question, str) or not question.strip():
        raise AskError("the question is empty")
    if max_rows is not None and max_rows < 1:
        raise AskError(f"max_rows must be at least 1, got {max_rows}")
    table = prepared.table
    total_rows, total_columns = len(table.rows), len(table.columns)
    proto_question = interaction_pb2.Question(id="ask_0", original_text=question.strip())
    number_annotation.add_numeric_values_to_question(proto_question)
    question_length = len(encoder.tokenizer.tokenize(proto_question.original_text)) + 2
    budget = encoder.config.max_seq_length - question_length
    if budget < 2:
        raise AskError(f"the question is too long: {question_length} word pieces leave no room for the table "
                       f"in {encoder.config.max_seq_length} tokens; shorten it")
    rows_read = min(total_rows, max_rows or total_rows)
    max_window_rows = max(1, min(encoder.max_table_shape[0], encoder.trained_rows))
    columns = pruning.choose_columns(table, question, encoder.max_table_shape[1])
    columns, encoded, cap = _fit_columns(encoder, table, question, rows_read, columns, budget, max_window_rows)
    row_lengths, row_budget = encoded.row_lengths(cap), budget - encoded.header_length(cap)
    windows = pack_rows(row_lengths, row_budget, max_window_rows)
    kept = set(columns)
    at = {column: index for index, column in enumerate(columns)}
    previous = tuple((int(r), at[int(c)]) for r, c in previous_answer if int(r) < rows_read and int(c) in kept)
    notes = prepared.diagnostics + _notes(encoded, cap, columns, total_columns, rows_read, total_rows, max_rows)
    return WindowedQuestion(
        question=question.strip(), table=encoded, question_proto=proto_question, columns=tuple(columns),
        windows=tuple(tuple(w) for w in windows), cap=cap, total_rows=total_rows, total_columns=total_columns,
        max_rows=max_rows if rows_read < total_rows else None, previous=previous,
        relations=encoded.cell_relations(proto_question), row_lengths=row_lengths, row_budget=row_budget,
        max_window_rows=max_window_rows, diagnostics=notes, encoder=encoder,
        follow_up=bool(previous_answer))


def pack_rows(row_lengths: np.ndarray, budget: int, max_rows: int) -> Tuple[range, ...]:
    """Consecutive windows of body rows whose tokens (`row_lengths`, <int64>[num_rows]) fit `budget`
    and that hold at most `max_rows` rows each: as few windows as the tokens allow, then, when an
    even split (`split_rows`) into that many fits too, the even one.

    Raises:
      ValueError: a row longer than `budget` (choose a smaller cap first).
    """
    lengths = np.asarray(row_lengths, np.int64)
    if len(lengths) and int(lengths.max()) > budget:
        raise ValueError(f"row {int(lengths.argmax())} needs {int(lengths.max())} tokens; {budget} are left")
    greedy, start, used = [], 0, 0
    for index, length in enumerate(lengths.tolist()):
        if index > start and (used + length > budget or index - start >= max_rows):
            greedy.append(range(start, index))
            start, used = index, 0
        used += length
    greedy.append(range(start, len(lengths)))
    even = split_rows(len(lengths), -(-len(lengths) // len(greedy)))
    if len(even) == len(greedy) and all(int(lengths[w.start:w.stop].sum()) <= budget for w in even):
        return tuple(even)
    return tuple(greedy)


def _fit_columns(encoder, table: interaction_pb2.Table, question: str, rows_read: int, columns: Sequence[int],
                 budget: int, max_window_rows: int) -> Tuple[Tuple[int, ...], EncodedTable, int]:
    """(the kept columns, the rows read with them encoded, the cap per cell): every one of `columns`
    when a window holds MIN_ROWS_PER_WINDOW rows with them, else the most of them, the most related
    to the question first, with which it does (with one row at least)."""
    encoded = _encoded(encoder, table, rows_read, columns)
    want = min(MIN_ROWS_PER_WINDOW, rows_read, max_window_rows)
    cap = choose_cap(encoded, budget, want)
    if cap is not None:
        return tuple(columns), encoded, cap
    order = _by_relevance(table, question, columns)  # Positions in `columns`, most related first.
    for rows_wanted in (want, 1):
        low, high = 0, len(order)  # Invariant: `low` columns fit (0 trivially), `high + 1` do not.
        while low < high:
            middle = (low + high + 1) // 2
            if choose_cap(encoded, budget, rows_wanted, sorted(order[:middle])) is not None:
                low = middle
            else:
                high = middle - 1
        if low:
            kept = sorted(order[:low])
            chosen = tuple(columns[i] for i in kept)
            encoded = _encoded(encoder, table, rows_read, chosen)
            return chosen, encoded, choose_cap(encoded, budget, rows_wanted)
    raise AskError(f"not even one row of one column of this table fits in {encoder.config.max_seq_length} "
                   "tokens with the question; ask a shorter question")


def choose_cap(encoded: EncodedTable, budget: int, want: int,
               columns: Optional[Sequence[int]] = None) -> Optional[int]:
    """The largest number of word pieces per cell with which the header and the `want` longest rows
    (of `columns` of `encoded`, default all) fit `budget` tokens; None when one piece per cell does
    not."""
    def fits(cap: int) -> bool:
        lengths = np.sort(encoded.row_lengths(cap, columns))[::-1]
        return encoded.header_length(cap, columns) + int(lengths[:want].sum()) <= budget

    high = max(1, encoded.max_cell_length)
    if fits(high):
        return high
    if not fits(1):
        return None
    low = 1  # fits(low) and not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def _by_relevance(table: interaction_pb2.Table, question: str, columns: Sequence[int]) -> list:
    """Positions in `columns`, most related to the question first: those it names (a header word in
    the question), then by `pruning.column_scores`, then in table order."""
    question_words = pruning.words(question)
    scores = pruning.column_scores(table, question_words)
    named = [bool(pruning.words(table.columns[c].text) & question_words) for c in columns]
    return sorted(range(len(columns)), key=lambda i: (not named[i], -int(scores[columns[i]]), i))


def _encoded(encoder, table: interaction_pb2.Table, rows_read: int, columns: Sequence[int]) -> EncodedTable:
    if rows_read == len(table.rows) and len(columns) == len(table.columns):
        cut = table
    else:
        cut = pruning.subset(table, range(rows_read), columns).table
    try:
        with encoder._lock:  # pylint: disable=protected-access  # The converter's cache.
            # The prepared table (or this cut of it) is never changed: kept, not copied.
            return encoder.converter.encoded_table(cut, copy=False)
    except ConversionError as error:
        if error.reason == Reason.TOO_MANY_COLUMNS:
            raise AskError(f"the table has too many columns for the model: {error.detail}") from None
        raise AskError(f"the table cannot be read: {error.detail}") from None


def _notes(encoded: EncodedTable, cap: int, columns: Sequence[int], total_columns: int, rows_read: int,
           total_rows: int, max_rows: Optional[int]) -> Tuple[str, ...]:
    notes = []
    if rows_read < total_rows:
        notes.append(f"Only the first {rows_read:,} of the table's {total_rows:,} rows were read (max_rows="
                     f"{max_rows:,}); a count, total or average covers only those rows.")
    if len(columns) < total_columns:
        notes.append(f"{len(columns)} of the table's {total_columns:,} columns were kept, those most related to "
                     "the question; the others were not read.")
    trimmed = encoded.cells_longer_than(cap)
    if trimmed:
        notes.append(f"{trimmed:,} cells longer than {cap} word pieces were cut to fit a window.")
    max_rank = encoded.config.max_rank
    clamped = int(((encoded.ranks > max_rank) | (encoded.inv_ranks > max_rank)).sum())
    if clamped:  # The same sentence as one example's (`ask_encoding`), for the same limit.
        notes.append(f"{clamped:,} cells rank above {max_rank} in their column and share rank {max_rank}.")
    return tuple(notes)
