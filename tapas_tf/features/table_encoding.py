"""Per-table work of conversion: tokens, numbers, ranks and the cost of fitting.

Everything here depends on the table only, so it is computed once per table and
shared by every question about it (an SQA sequence has several; WTQ reuses
tables across questions).

Trimming rule (as in the original TAPAS): with a cap of `k` tokens per cell, a
cell keeps every word piece whose word starts before position `k`, so words are
never cut in half. `cost[n, k - 1]` is the number of table tokens of the header
plus the first `n` body rows under cap `k`.
"""

import dataclasses
import functools
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.cell_pieces import CellTokens, tokenize_table
from tapas_tf.features.conversion_config import (
    ConversionConfig,
    ConversionError,
    Reason,
)

EMPTY_TOKEN = "[EMPTY]"


@dataclasses.dataclass
class TableTokens:
    """The token part of an example for a given (rows, cap): arrays of [table_len]."""

    input_ids: np.ndarray
    column_ids: np.ndarray
    row_ids: np.ndarray
    numeric_values: np.ndarray
    numeric_values_scale: np.ndarray
    column_ranks: np.ndarray
    inv_column_ranks: np.ndarray
    # Flat body-cell index row * num_columns + column, -1 for header tokens.
    cell_index: np.ndarray
    num_trimmed_cells: int
    num_clamped_rank_cells: int


class EncodedTable:
    """A table tokenised and annotated once, ready to be fitted to any question."""

    def __init__(self, table: interaction_pb2.Table, tokenizer, config: ConversionConfig, copy: bool = True):
        # A copy: the cache outlives the caller's message, which the caller may change in place
        # (`copy=False` for a message its owner never changes: 75 MB at 10^6 cells).
        if copy:
            self.table = interaction_pb2.Table()
            self.table.CopyFrom(table)
        else:
            self.table = table
        table = self.table
        self.config = config
        self.num_columns = len(table.columns)
        self.num_rows = len(table.rows)
        _check_shape(table)
        self.header, self.pieces, self.cell_texts = tokenize_table(tokenizer, table, config.strip_column_names)
        # Every distinct text is some cell's: the longest of them is the longest cell.
        self.max_cell_length = max([len(c.ids) for c in self.header] + [int(self.pieces.lengths.max())])
        self._numbers, self._kinds = _cell_numbers(table)
        self.numeric_values = self._numbers.astype(np.float32)
        # Per column, once: whether ranks and relations are array work on its numbers.
        self._numbers_only = tuple(_numbers_only(self._numbers[:, c], self._kinds[:, c])
                                   for c in range(self.num_columns))
        self.ranks, self.inv_ranks = _column_ranks(table, self._numbers, self._kinds, self._numbers_only)
        self._fitted: Dict[Tuple[int, int], TableTokens] = {}

    @property
    def rows(self) -> List[List[CellTokens]]:
        """Each body row's cells as `CellTokens`, built on each call (for small tables; the arrays
        `pieces` and `cell_texts` are the table's tokens)."""
        cells = [self.pieces.cell(t) for t in range(len(self.pieces))]
        return [[cells[t] for t in row] for row in self.cell_texts.tolist()]

    # --- fitting --------------------------------------------------------------

    @property
    def _max_cap(self) -> int:
        """The largest cap worth trying: a cell's pieces beyond the sequence never fit anyway."""
        return max(1, min(self.max_cell_length, self.config.max_seq_length))

    @functools.cached_property
    def cost(self) -> np.ndarray:
        """<int64>[num_rows + 1, max_cap]: tokens of header + first n rows per cap.

        Built on first use: a table read in windows (`row_lengths`) never needs it, and for a big
        table with one long cell it would be num_rows x that cell's length."""
        caps = np.arange(1, self._max_cap + 1)
        per_row = np.zeros((self.num_rows + 1, len(caps)), np.int64)
        for cell in self.header:
            per_row[0] += _trimmed_lengths(cell, caps)
        by_cap = self.pieces.trimmed_by_cap(len(caps))
        for column in range(self.num_columns):  # A column at a time: [num_rows, max_cap] at most.
            per_row[1:] += by_cap[self.cell_texts[:, column]]
        return np.cumsum(per_row, axis=0)

    def fit(self, budget: int) -> Tuple[int, int]:
        """Chooses (number of body rows, cap per cell) for `budget` table tokens.

        Raises ConversionError (TOO_MANY_ROWS, SEQUENCE_TOO_LONG) when no fit is
        allowed by the config.
        """
        config = self.config
        num_rows = self.num_rows
        if num_rows >= config.max_row_id:
            if not config.drop_rows_to_fit:
                raise ConversionError(
                    Reason.TOO_MANY_ROWS,
                    f"{num_rows} rows; at most {config.max_row_id - 1} fit (drop_rows_to_fit is off)")
            num_rows = config.max_row_id - 1
        max_cap = self._max_cap
        if config.cell_trim_length > 0:
            max_cap = min(max_cap, config.cell_trim_length)
        while True:
            costs = self.cost[num_rows, :max_cap]
            cap = int(np.searchsorted(costs, budget, side="right"))
            fixed_cap_missed = config.cell_trim_length > 0 and cap < max_cap
            if cap >= 1 and not fixed_cap_missed:
                return num_rows, cap
            if not config.drop_rows_to_fit or num_rows == 0:
                raise ConversionError(
                    Reason.SEQUENCE_TOO_LONG,
                    f"table needs {int(costs[max_cap - 1 if fixed_cap_missed else 0])} tokens "
                    f"with {num_rows} rows; {budget} are left after the question")
            num_rows = self._rows_that_fit(budget, max_cap if fixed_cap_missed else 1)

    def _rows_that_fit(self, budget: int, cap: int) -> int:
        """Largest n whose header + n rows fit under `cap` (0 if none beyond the header)."""
        return max(int(np.searchsorted(self.cost[:, cap - 1], budget, side="right")) - 1, 0)

    # --- token features ---------------------------------------------------------

    def tokens(self, num_rows: int, cap: int) -> TableTokens:
        key = (num_rows, cap)
        if key not in self._fitted:
            self._fitted[key] = self.window_tokens(range(num_rows), cap)
        return self._fitted[key]

    # --- windows of rows ------------------------------------------------------------

    def header_length(self, cap: int, columns: Optional[Sequence[int]] = None) -> int:
        """Tokens of the header row under a cap of `cap` tokens per cell (of `columns` only, if given)."""
        cells = self.header if columns is None else [self.header[c] for c in columns]
        return sum(cell.trimmed_length(cap) for cell in cells)

    def row_lengths(self, cap: int, columns: Optional[Sequence[int]] = None) -> np.ndarray:
        """<int64>[num_rows]: tokens of each body row under a cap of `cap` tokens per cell (of
        `columns` only, if given)."""
        texts = self.cell_texts if columns is None else self.cell_texts[:, list(columns)]
        return self.pieces.trimmed(cap)[texts].sum(axis=1)

    def cells_longer_than(self, cap: int) -> int:
        """How many body cells have more than `cap` word pieces (cut under that cap)."""
        return int((self._cell_lengths > cap).sum())

    @functools.cached_property
    def _cell_lengths(self) -> np.ndarray:
        """<int64>[num_rows, num_columns]: word pieces of each body cell, untrimmed."""
        return self.pieces.lengths[self.cell_texts]

    def window_tokens(self, rows: Sequence[int], cap: int) -> TableTokens:
        """The token part of an example of the header and the body rows `rows` (0-based, any order
        and subset), under a cap of `cap` tokens per cell.

        The window's rows get row ids 1..len(rows); numbers and ranks are the whole table's, so a
        column's largest value has rank 1 in whichever window holds it; `cell_index` is the whole
        table's flat index (row * num_columns + column). Array work only, on the table's distinct
        texts' pieces (`pieces`): nothing per cell is built or copied for the whole table."""
        max_rank = self.config.max_rank
        header_n = np.asarray([cell.trimmed_length(cap) for cell in self.header], np.int64)
        header_ids = [i for cell, n in zip(self.header, header_n) for i in cell.ids[:n]]
        rows = np.asarray(rows, np.int64).reshape(-1)
        cells = (rows[:, None] * self.num_columns + np.arange(self.num_columns)).reshape(-1)
        texts = self.cell_texts.reshape(-1)[cells]
        n = self.pieces.trimmed(cap)[texts]
        # Positions in `pieces.ids` of every token: each text's offset, counted up through its length.
        starts = np.repeat(self.pieces.offsets[texts] - (np.cumsum(n) - n), n)
        body_ids = self.pieces.ids[starts + np.arange(int(n.sum()))]
        ranks, inv = self.ranks.reshape(-1)[cells], self.inv_ranks.reshape(-1)[cells]
        columns = np.tile(np.arange(1, self.num_columns + 1), len(rows))
        window_rows = np.repeat(np.arange(1, len(rows) + 1), self.num_columns)
        header_columns = np.arange(1, self.num_columns + 1)
        full = self.pieces.lengths[texts]
        header_full = np.asarray([len(cell.ids) for cell in self.header], np.int64)

        def both(header_part, body_part, dtype):
            return np.concatenate([np.repeat(header_part, header_n), np.repeat(body_part, n)]).astype(dtype)

        return TableTokens(
            input_ids=np.concatenate([np.asarray(header_ids, np.int64), body_ids]).astype(np.int64),
            column_ids=both(header_columns, columns, np.int64),
            row_ids=both(np.zeros(self.num_columns), window_rows, np.int64),
            numeric_values=both(np.full(self.num_columns, np.nan), self.numeric_values.reshape(-1)[cells],
                                np.float32),
            numeric_values_scale=both(np.where(header_n > 1, header_n, 1), np.where(n > 1, n, 1), np.float32),
            column_ranks=both(np.zeros(self.num_columns), np.minimum(ranks, max_rank), np.int64),
            inv_column_ranks=both(np.zeros(self.num_columns), np.minimum(inv, max_rank), np.int64),
            cell_index=both(np.full(self.num_columns, -1), cells, np.int64),
            num_trimmed_cells=int((header_n < header_full).sum() + (n < full).sum()),
            num_clamped_rank_cells=int(((ranks > max_rank) | (inv > max_rank)).sum()),
        )

    # --- numeric relations --------------------------------------------------------

    def cell_relations(self, question: interaction_pb2.Question) -> np.ndarray:
        """<int64>[num_rows * num_columns] bit sets (EQ 1, LT 2, GT 4) of each body cell
        against the numbers and dates of the question."""
        relations = np.zeros(self.num_rows * self.num_columns, np.int64)
        values = [v for span in question.annotations.spans for v in span.values]
        if not values:
            return relations
        for c in range(self.num_columns):
            if self._numbers_only[c]:
                bits = relations.reshape(self.num_rows, self.num_columns)[:, c]  # A view: set in place.
                _set_number_relations(bits, self._numbers[:, c], self._kinds[:, c] == _NUMBER, values)
                continue
            column = _column_values(self.table, c)
            if not column:
                continue
            for value in values:
                try:
                    key_fn = number_annotation.get_numeric_sort_key_fn(list(column.values()) + [value])
                except ValueError:
                    continue  # The question value is not comparable with this column.
                for r, cell_value in column.items():
                    relation = number_annotation.get_numeric_relation(value, cell_value, key_fn)
                    if relation is not None:
                        relations[r * self.num_columns + c] |= number_annotation.relation_bit(relation)
        return relations


def _check_shape(table: interaction_pb2.Table) -> None:
    if not table.columns or not table.rows:
        raise ConversionError(
            Reason.EMPTY_TABLE,
            f"table {table.table_id!r} has {len(table.columns)} columns and {len(table.rows)} rows")
    for r, row in enumerate(table.rows):
        if len(row.cells) != len(table.columns):
            raise ConversionError(
                Reason.RAGGED_TABLE,
                f"table {table.table_id!r} row {r} has {len(row.cells)} cells, "
                f"the header has {len(table.columns)}")


def _trimmed_lengths(cell: CellTokens, caps: np.ndarray) -> np.ndarray:
    """<int64>[len(caps)] tokens kept by the cell under each cap."""
    length = len(cell.ids)
    if length <= 1:
        return np.full(len(caps), length, np.int64)
    # Caps beyond the last word start land on the sentinel, the full length.
    index = np.minimum(np.searchsorted(cell.word_starts, caps), len(cell.word_starts) - 1)
    return cell.word_starts[index]


def _column_values(table: interaction_pb2.Table, column: int) -> Dict[int, interaction_pb2.NumericValue]:
    return {r: row.cells[column].numeric_value for r, row in enumerate(table.rows)
            if row.cells[column].HasField("numeric_value")}


_NONE, _NUMBER, _DATE = 0, 1, 2  # A body cell's kind of annotated value (`_cell_numbers`).


def _cell_numbers(table: interaction_pb2.Table) -> Tuple[np.ndarray, np.ndarray]:
    """(<float64>[num_rows, num_columns] each body cell's number, NaN if none (dates too);
    <int8>[num_rows, num_columns] what it holds: _NONE, _NUMBER or _DATE)."""
    numbers = np.full((len(table.rows), len(table.columns)), np.nan, np.float64)
    kinds = np.zeros(numbers.shape, np.int8)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if cell.HasField("numeric_value"):
                if cell.numeric_value.HasField("float_value"):
                    numbers[r, c], kinds[r, c] = cell.numeric_value.float_value, _NUMBER
                else:
                    kinds[r, c] = _DATE
    return numbers, kinds


def _numbers_only(numbers: np.ndarray, kinds: np.ndarray) -> bool:
    """Whether a column's values (<float64>[num_rows], <int8>[num_rows]) are all numbers, none of them
    NaN, and there is one: then its ranks and relations are array work on the numbers themselves
    (the same order as `number_annotation`'s sort key, which is the number)."""
    has = kinds == _NUMBER
    return bool(has.any()) and not (kinds == _DATE).any() and not np.isnan(numbers[has]).any()


def _set_number_relations(bits: np.ndarray, numbers: np.ndarray, has: np.ndarray,
                          values: Sequence[interaction_pb2.NumericValue]) -> None:
    """ORs into `bits` (<int64>[num_rows]) the relation of each question number to each number of a
    numbers-only column; a date in the question is not comparable with it (as `cell_relations`)."""
    eq, lt, gt = (number_annotation.relation_bit(r) for r in (number_annotation.Relation.EQ,
                                                              number_annotation.Relation.LT,
                                                              number_annotation.Relation.GT))
    for value in values:
        if value.WhichOneof("value") != "float_value":
            continue
        v = value.float_value
        bits |= np.where(has & (v == numbers), eq, 0) | np.where(has & (v < numbers), lt, 0) | \
            np.where(has & (v > numbers), gt, 0)


def _column_ranks(table: interaction_pb2.Table, numbers: np.ndarray, kinds: np.ndarray,
                  numbers_only: Sequence[bool]) -> Tuple[np.ndarray, np.ndarray]:
    """Dense ranks (1 = smallest) and inverse ranks (1 = largest) of each body cell.

    Columns whose values cannot be ordered (mixed types) get 0, as do cells
    without a value. `numbers` and `kinds` are `_cell_numbers`'s, `numbers_only` each column's
    `_numbers_only`. Returns two
    <int64>[num_rows, num_columns] arrays.
    """
    shape = (len(table.rows), len(table.columns))
    ranks, inv_ranks = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    for c in range(len(table.columns)):
        if numbers_only[c]:
            has = kinds[:, c] == _NUMBER
            distinct, position = np.unique(numbers[has, c], return_inverse=True)
            ranks[has, c] = position + 1
            inv_ranks[has, c] = len(distinct) - position
            continue
        values = _column_values(table, c)
        if not values:
            continue
        try:
            key_fn = number_annotation.get_numeric_sort_key_fn(values.values())
        except ValueError:
            continue
        keys = {r: key_fn(v) for r, v in values.items()}
        ordered = sorted(set(keys.values()))
        rank_of = {key: i + 1 for i, key in enumerate(ordered)}
        for r, key in keys.items():
            ranks[r, c] = rank_of[key]
            inv_ranks[r, c] = len(ordered) - rank_of[key] + 1
    return ranks, inv_ranks


def table_fingerprint(table: interaction_pb2.Table) -> Optional[bytes]:
    """A key identifying the table's content, for caching per-table work."""
    import hashlib

    return hashlib.blake2b(table.SerializeToString(deterministic=True), digest_size=16).digest()
