"""The token layout of a pre-training example: words, the rows shown, words turn by turn.

Pure helpers of `pretrain_examples`, with no randomness of their own (a `random.Random` is passed
in where a choice is made).
"""

import dataclasses
import random
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from tapas_tf.data.number_parsing import parse_plain_number
from tapas_tf.features import example_features
from tapas_tf.features.pretrain_config import MAX_ROW_ID
from tapas_tf.features.tokenization import is_continuation_piece

_TEXT, _HEADER, _CELL = (example_features.MASKED_LM_LOCATION_TEXT, example_features.MASKED_LM_LOCATION_HEADER,
                         example_features.MASKED_LM_LOCATION_CELL)


@dataclasses.dataclass(frozen=True)
class Words:
    """Word pieces of a text or cell, with the end of every word (ascending, last = len(ids))."""

    ids: list[int]
    word_ends: list[int]
    is_number: list[bool]  # Per word.

    def word_length(self, index: int) -> int:
        return self.word_ends[index] - (self.word_ends[index - 1] if index else 0)


@dataclasses.dataclass(frozen=True)
class Cell:
    words: Words
    is_number: bool  # The whole cell text parses as a number.
    rank: int = 0
    inv_rank: int = 0
    value: float = float("nan")


class Unit(NamedTuple):
    """A masking candidate: the positions [begin, end) masked together, where they are
    (MASKED_LM_LOCATION_*), and whether the word or cell is a number."""

    begin: int
    end: int
    location: int
    is_number: bool


class TokenSequence:
    """The token sequence of one example as it is built, with its masking units.

    Table features are kept per cell and repeated over the cell's tokens at the end.
    """

    def __init__(self, max_seq_length: int, cls_id: int, snippet: Words, sep_id: int):
        self.max_seq_length = max_seq_length
        self.ids = [cls_id] + snippet.ids + [sep_id]
        self.snippet_length = len(self.ids)
        self.units: list[Unit] = []
        begin = 1
        for end, is_number in zip(snippet.word_ends, snippet.is_number):
            self.units.append(Unit(begin, end + 1, _TEXT, is_number))
            begin = end + 1
        # Per table cell: tokens, column id, row id, rank, inverse rank, value.
        self._cells: list[tuple[int, int, int, int, int, float]] = []

    def add_cell(self, cell: Cell, num_words: int, column_id: int, row_id: int, rank: int, inv_rank: int,
                 continue_cells: bool) -> None:
        """Appends the first `num_words` words of `cell`."""
        length = cell.words.word_ends[num_words - 1] if num_words else 0
        if not length:
            return
        begin = len(self.ids)
        self.ids.extend(cell.words.ids[:length])
        self._cells.append((length, column_id, row_id, rank, inv_rank, cell.value))
        location = _CELL if row_id else _HEADER
        if continue_cells:
            self.units.append(Unit(begin, begin + length, location, cell.is_number))
            return
        word_begin = begin
        for end, is_number in zip(cell.words.word_ends[:num_words], cell.words.is_number):
            self.units.append(Unit(word_begin, begin + end, location, is_number))
            word_begin = begin + end

    def features(self, input_ids: list[int]) -> dict[str, np.ndarray]:
        """The token features, padded: <int64>[max_seq_length], numeric ones <float32>."""
        length = len(self.ids)
        pad = self.max_seq_length - length
        if pad < 0:
            raise AssertionError(f"{length} tokens exceed max_seq_length {self.max_seq_length}")
        snippet = self.snippet_length
        table = length - snippet
        cells = np.asarray(self._cells, np.float64).reshape(-1, 6)
        lengths = cells[:, 0].astype(np.int64)

        def per_token(column: int, snippet_value, pad_value, dtype=np.int64):
            return np.concatenate([np.full(snippet, snippet_value), np.repeat(cells[:, column], lengths),
                                   np.full(pad, pad_value)]).astype(dtype)

        def constant(snippet_value, table_value, pad_value):
            return np.asarray([snippet_value] * snippet + [table_value] * table + [pad_value] * pad, np.int64)

        return {
            "input_ids": np.asarray(input_ids + [0] * pad, np.int64),
            "input_mask": constant(1, 1, 0),
            "segment_ids": constant(0, 1, 0),
            "column_ids": per_token(1, 0, 0),
            "row_ids": per_token(2, 0, 0),
            "prev_label_ids": np.zeros(self.max_seq_length, np.int64),
            "column_ranks": per_token(3, 0, 0),
            "inv_column_ranks": per_token(4, 0, 0),
            "numeric_relations": np.zeros(self.max_seq_length, np.int64),
            "numeric_values": per_token(5, np.nan, np.nan, np.float32),
            "numeric_values_scale": np.concatenate([
                np.ones(snippet), np.repeat(np.maximum(lengths, 1), lengths), np.ones(pad)]).astype(np.float32),
        }


def split_words(ids: list[int], pieces: Sequence[str]) -> Words:
    """Groups pieces into words ("##" continues a word) and flags the words that are numbers."""
    ends, numbers, current = [], [], []
    for index, piece in enumerate(pieces):
        if index and not is_continuation_piece(piece):
            ends.append(index)
            numbers.append(is_number_text("".join(current)))
            current = []
        current.append(piece[2:] if is_continuation_piece(piece) else piece)
    if current:
        ends.append(len(pieces))
        numbers.append(is_number_text("".join(current)))
    return Words(ids=list(ids), word_ends=ends, is_number=numbers)


def is_number_text(text: str) -> bool:
    return parse_plain_number(text) is not None


def first_word_cost(cell: Cell) -> int:
    return cell.words.word_ends[0] if cell.words.word_ends else 0


def row_block(row_costs: Sequence[int], budget: int, rng: random.Random) -> tuple[int, int]:
    """(start, count) of the body rows to show: all if they fit, else a random block of the
    largest number of consecutive rows whose first words fit in `budget` (at most MAX_ROW_ID)."""
    num_rows = len(row_costs)
    if num_rows <= MAX_ROW_ID and sum(row_costs) <= budget:
        return 0, num_rows
    best, best_starts = 0, []
    end = total = 0
    for start in range(num_rows):
        if end < start:
            end, total = start, 0
        while end < num_rows and end - start < MAX_ROW_ID and total + row_costs[end] <= budget:
            total += row_costs[end]
            end += 1
        if end - start > best:
            best, best_starts = end - start, [start]
        elif end - start == best and best:
            best_starts.append(start)
        if end > start:
            total -= row_costs[start]
    if not best:
        return 0, 0
    return best_starts[rng.randrange(len(best_starts))], best


def words_turn_by_turn(cells: Sequence[Cell], budget: int) -> list[int]:
    """Words kept per cell: the first word of each (already paid for), then the second word of
    every cell that has one, then the third, ..., until the first word that exceeds `budget`."""
    num_words = [min(1, len(cell.words.word_ends)) for cell in cells]
    active = [i for i, cell in enumerate(cells) if len(cell.words.word_ends) > 1]
    turn = 1
    while active:
        for i in active:
            length = cells[i].words.word_length(turn)
            if length > budget:
                return num_words
            budget -= length
            num_words[i] += 1
        turn += 1
        active = [i for i in active if len(cells[i].words.word_ends) > turn]
    return num_words

