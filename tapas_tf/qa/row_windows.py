"""Answers over every row of a big table: the rows in windows that fit the model, then one answer.

    windows = split_rows(num_rows=20_000, rows_per_window=60)          # [range(0, 60), range(60, 120), ...]
    answers = [ask_window(w) for w in windows]                           # the model, once per window
    combined = combine(answers, number_of)                               # one operator, exact value

A table too big for the model's 512 tokens used to be pruned to the rows that share words with
the question, and an aggregation saw only the kept rows. Windows read every row instead, and their
answers combine exactly, because the three operators decompose over disjoint rows:

- the cells selected: the union of every window's selection (their coordinates are the table's);
- the operator: one for the whole question, from the windows' aggregation probabilities (their
  mean over the windows that selected a cell, since a window with nothing to select says little
  about what the question asks for);
- the value, over all selected cells: COUNT is the number of cells, SUM their total, AVERAGE the
  total over the count of cells with a number. A window's own COUNT or AVERAGE is never used.

A lookup or a superlative ("which X has the highest Y?") cannot be combined by union: each window
names its own winner. `combine` keeps them all, and `window_reading` asks the question once more
over their rows (a second pass, or a knockout when they do not fit one example) to decide.

This module is pure Python over coordinates and probabilities: the caller asks the model and maps
each window's cells back to the table's rows (a window's row r is the table's `window.rows[r]`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from tapas_tf.inference.execution import AGGREGATION_NAMES

Coordinate = Tuple[int, int]  # (body row of the whole table, column).
NONE, SUM, AVERAGE, COUNT = AGGREGATION_NAMES

__all__ = ["CombinedAnswer", "WindowAnswer", "choose_operator", "combine", "split_rows"]


def split_rows(num_rows: int, rows_per_window: int) -> List[range]:
    """Consecutive windows of at most `rows_per_window` body rows covering rows 0..num_rows-1.

    The windows are as even as that allows: 130 rows in windows of at most 60 are 44, 43 and 43
    rows, not 60, 60 and 10, so that no window is a sliver whose answer rests on a few rows.
    """
    if rows_per_window < 1:
        raise ValueError(f"rows_per_window must be at least 1, got {rows_per_window}")
    if num_rows < 0:
        raise ValueError(f"num_rows must be non-negative, got {num_rows}")
    count = max(1, math.ceil(num_rows / rows_per_window))
    base, extra = divmod(num_rows, count)
    windows, start = [], 0
    for index in range(count):
        size = base + (1 if index < extra else 0)
        windows.append(range(start, start + size))
        start += size
    return windows


@dataclasses.dataclass(frozen=True)
class WindowAnswer:
    """What the model answered for one window, in the whole table's coordinates.

    Attributes:
      rows: the table's body rows the window read.
      cells: the selected cells, (table row, column), each row one of `rows`.
      cell_probabilities: P(selected) of the window's cells that the model scored, by coordinate.
      operator_probabilities: P(operator) by name (NONE, SUM, AVERAGE, COUNT); empty for a model
        without an aggregation head (then the answer is the cells).
    """

    rows: Tuple[int, ...]
    cells: Tuple[Coordinate, ...]
    cell_probabilities: Mapping[Coordinate, float] = dataclasses.field(default_factory=dict)
    operator_probabilities: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        rows = set(self.rows)
        outside = [cell for cell in self.cells if cell[0] not in rows]
        if outside:
            span = f"{min(rows)}..{max(rows)}" if rows else "(none)"
            raise ValueError(f"cells {outside[:3]} are outside the window's rows {span}")


@dataclasses.dataclass(frozen=True)
class CombinedAnswer:
    """One answer from every window.

    Attributes:
      operator: NONE, SUM, AVERAGE or COUNT.
      cells: every window's selected cells, in table order.
      value: the operator over all cells (None for NONE, or when no selected cell has a number).
      numbers_used: how many of the cells had a number (what SUM and AVERAGE used).
      operator_probabilities: the mean distribution the operator was chosen from.
      windows, windows_with_cells, rows_read: how the answer was made.
    """

    operator: str
    cells: Tuple[Coordinate, ...]
    value: Optional[float]
    numbers_used: int
    operator_probabilities: Dict[str, float]
    windows: int
    windows_with_cells: int
    rows_read: int


def choose_operator(windows: Sequence[WindowAnswer]) -> Tuple[str, Dict[str, float]]:
    """The operator with the highest mean probability over the windows that selected a cell (over
    every window if none did); NONE, with {} as the mean, when no window has operator probabilities."""
    scored = [w for w in windows if w.operator_probabilities]
    if not scored:
        return NONE, {}
    voting = [w for w in scored if w.cells] or scored
    mean = {name: sum(w.operator_probabilities.get(name, 0.0) for w in voting) / len(voting)
            for name in AGGREGATION_NAMES}
    return max(AGGREGATION_NAMES, key=lambda name: (mean[name], name == NONE)), mean


def combine(windows: Sequence[WindowAnswer], number_of: Callable[[Coordinate], Optional[float]]) -> CombinedAnswer:
    """The windows' answers as one (see the module docstring).

    Args:
      windows: every window's answer; together they must not read a row twice.
      number_of: a cell's number (the whole column's annotation, so "1,200" and "1.2 k" agree), or None.

    Raises:
      ValueError: no windows, or two windows that read the same row (their cells would count twice).
    """
    if not windows:
        raise ValueError("no windows to combine")
    seen: Dict[int, int] = {}
    for index, window in enumerate(windows):
        for row in window.rows:
            if row in seen:
                raise ValueError(f"windows {seen[row]} and {index} both read row {row}")
            seen[row] = index
    cells = tuple(sorted({cell for window in windows for cell in window.cells}))
    operator, mean = choose_operator(windows)
    numbers = [n for n in (number_of(cell) for cell in cells) if n is not None and math.isfinite(n)]
    value: Optional[float] = None
    if operator == COUNT:
        value = float(len(cells))
    elif operator == SUM and numbers:
        value = math.fsum(numbers)
    elif operator == AVERAGE and numbers:
        value = math.fsum(numbers) / len(numbers)
    return CombinedAnswer(operator=operator, cells=cells, value=value, numbers_used=len(numbers),
                          operator_probabilities=mean, windows=len(windows),
                          windows_with_cells=sum(1 for w in windows if w.cells), rows_read=len(seen))
