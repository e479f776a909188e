"""Pruning a table that is too big for the model to the rows and columns most related to the question.

The idea is the "heuristic exact match" of the TAPAS follow-up work (Eisenschlos et al., 2020):
what the question mentions is likely where the answer is. Here a column's score is twice the
number of question words in its header plus the number of rows whose cell in that column shares
a word with the question; a row's score is the number of distinct question words in its cells.
Words are lower-cased, accent-folded alphanumeric runs, minus a short list of function words.

The kept rows and columns stay in their table order (questions such as "which is the first..."
depend on it), and every kept row and column remembers its index in the original table, so that
answers point at the user's cells.

The trade-off: a pruned table may lose the answer, and aggregations (COUNT, SUM) see only the kept
rows. Without pruning, such a table cannot be asked at all. `docs/RESULTS.md` measures how often
the gold answer survives on WikiTableQuestions tables that do not fit in 512 tokens.
"""

import dataclasses
import re
from typing import FrozenSet, List, Sequence, Tuple

import numpy as np

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.text_normalization import normalize_for_match

# Words that would make every row look related to every question.
_FUNCTION_WORDS = frozenset(
    "a an and are as at be by did do does for from has have how in is it its many much of on or "
    "than that the their there these this those to was were what when where which who whom whose "
    "why with".split())
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> FrozenSet[str]:
    """The content words of a text: "What is Paris's population?" -> {"paris", "s", "population"}."""
    return frozenset(w for w in _WORD.findall(normalize_for_match(text)) if w not in _FUNCTION_WORDS)


@dataclasses.dataclass(frozen=True)
class PrunedTable:
    """A table cut to some of its rows and columns, with where each came from.

    Attributes:
      table: the kept cells, in the original order.
      rows: for each kept body row, its index in the original table.
      columns: for each kept column, its index in the original table.
      original_rows, original_columns: the size of the original table.
    """

    table: interaction_pb2.Table
    rows: Tuple[int, ...]
    columns: Tuple[int, ...]
    original_rows: int
    original_columns: int

    @property
    def is_pruned(self) -> bool:
        return len(self.rows) < self.original_rows or len(self.columns) < self.original_columns

    def to_original(self, row: int, column: int) -> Tuple[int, int]:
        return self.rows[row], self.columns[column]

    def from_original(self, coordinates: Sequence[Tuple[int, int]]) -> List[Tuple[int, int]]:
        """The coordinates that survived pruning, in the pruned table's indices."""
        row_at = {r: i for i, r in enumerate(self.rows)}
        column_at = {c: i for i, c in enumerate(self.columns)}
        return [(row_at[r], column_at[c]) for r, c in coordinates if r in row_at and c in column_at]


def unpruned(table: interaction_pb2.Table) -> PrunedTable:
    return PrunedTable(table, tuple(range(len(table.rows))), tuple(range(len(table.columns))),
                       len(table.rows), len(table.columns))


def column_scores(table: interaction_pb2.Table, question_words: FrozenSet[str]) -> np.ndarray:
    """<int64>[num_columns]: 2 x header words in the question + rows whose cell shares a word."""
    scores = np.zeros(len(table.columns), np.int64)
    for index, column in enumerate(table.columns):
        scores[index] = 2 * len(words(column.text) & question_words)
    for row in table.rows:
        for index, cell in enumerate(row.cells):
            if words(cell.text) & question_words:
                scores[index] += 1
    return scores


def row_scores(table: interaction_pb2.Table, question_words: FrozenSet[str],
               columns: Sequence[int]) -> np.ndarray:
    """<int64>[num_rows]: distinct question words among the row's cells of `columns`."""
    scores = np.zeros(len(table.rows), np.int64)
    matched: dict = {}  # Text -> its question words: a big table repeats most of its texts.
    for index, row in enumerate(table.rows):
        found = set()
        for column in columns:
            text = row.cells[column].text
            hits = matched.get(text)
            if hits is None:
                hits = matched[text] = words(text) & question_words
            found |= hits
        scores[index] = len(found)
    return scores


def top_in_order(scores: np.ndarray, keep: int) -> Tuple[int, ...]:
    """The indices of the `keep` highest scores (earlier first on ties), in index order."""
    if keep >= len(scores):
        return tuple(range(len(scores)))
    ranked = np.argsort(-scores, kind="stable")[:keep]
    return tuple(sorted(int(i) for i in ranked))


def rank_rows(table: interaction_pb2.Table, question: str, columns: Sequence[int]) -> np.ndarray:
    """Row indices from most to least related to the question (stable on ties)."""
    return np.argsort(-row_scores(table, words(question), columns), kind="stable")


def choose_columns(table: interaction_pb2.Table, question: str, max_columns: int) -> Tuple[int, ...]:
    if len(table.columns) <= max_columns:
        return tuple(range(len(table.columns)))
    return top_in_order(column_scores(table, words(question)), max_columns)


def subset(table: interaction_pb2.Table, rows: Sequence[int], columns: Sequence[int]) -> PrunedTable:
    """The table cut to `rows` and `columns` (original indices, kept in the given order)."""
    cut = interaction_pb2.Table(table_id=table.table_id, document_title=table.document_title,
                                caption=table.caption, document_url=table.document_url)
    for column in columns:
        cut.columns.add().CopyFrom(table.columns[column])
    for row in rows:
        cells = cut.rows.add()
        for column in columns:
            cells.cells.add().CopyFrom(table.rows[row].cells[column])
    return PrunedTable(cut, tuple(rows), tuple(columns), len(table.rows), len(table.columns))
