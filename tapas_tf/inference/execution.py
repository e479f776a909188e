"""The one executor of answers: an operator applied to the selected cells of a table.

The WTQ, WikiSQL and SQA metrics, sequential prediction and the ask API all
call `execute`, so a predicted SUM or AVERAGE has one meaning everywhere.
"""

import math
from typing import Optional, Sequence, Union

from tapas_tf.data.number_parsing import parse_plain_number
from tapas_tf.data.protos import interaction_pb2

NONE, SUM, AVERAGE, COUNT = 0, 1, 2, 3
AGGREGATION_NAMES = ("NONE", "SUM", "AVERAGE", "COUNT")

Coordinate = tuple[int, int]
# Cell texts for NONE, a number for SUM / AVERAGE / COUNT.
Answer = Union[tuple[str, ...], float]


def check_coordinate(coordinate) -> Coordinate:
    # The common case first, without the generic checks: predictions check every cell's key.
    if type(coordinate) is tuple and len(coordinate) == 2:  # pylint: disable=unidiomatic-typecheck
        row, column = coordinate
        if type(row) is int and type(column) is int and row >= 0 and column >= 0:  # noqa: E721
            return coordinate
    try:
        row, column = coordinate
        valid = all(int(x) == x and x >= 0 for x in (row, column))
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"a coordinate is a pair of non-negative ints, got {coordinate!r}")
    return int(row), int(column)


def cell_number(cell: interaction_pb2.Cell) -> Optional[float]:
    """The cell's number: its annotated float value, else its text parsed plainly.

    A cell annotated with a date (not a float) falls back to its text, so a
    year written "1998" still counts as 1998.
    """
    if cell.numeric_value.HasField("float_value"):
        return float(cell.numeric_value.float_value)
    return parse_plain_number(cell.text)


def _table_cell(table: interaction_pb2.Table, coordinate: Coordinate) -> interaction_pb2.Cell:
    row, column = coordinate
    if not 0 <= row < len(table.rows) or not 0 <= column < len(table.rows[row].cells):
        raise ValueError(
            f"coordinate {coordinate} is outside table {table.table_id!r} with "
            f"{len(table.rows)} body rows and {len(table.columns)} columns"
        )
    return table.rows[row].cells[column]


def execute(
    coordinates: Sequence[Coordinate], aggregation: int, table: interaction_pb2.Table
) -> Answer:
    """Applies an aggregation operator to the selected cells of `table`.

    * NONE: the cells' texts, in the order of `coordinates`.
    * COUNT: the number of selected cells (numeric or not), as a float.
    * SUM: the sum of the cells' numbers (see `cell_number`); cells without a
      number are skipped. No number at all (including an empty selection)
      sums to 0.0.
    * AVERAGE: the mean of the cells' numbers over the cells that have one
      (cells without a number are neither summed nor counted). No number at
      all gives NaN, which matches no gold answer.

    Raises:
      ValueError: unknown operator or a coordinate outside the table.
    """
    cells = [_table_cell(table, check_coordinate(c)) for c in coordinates]
    if aggregation == NONE:
        return tuple(cell.text for cell in cells)
    if aggregation == COUNT:
        return float(len(cells))
    numbers = [n for n in (cell_number(cell) for cell in cells) if n is not None]
    if aggregation == SUM:
        return math.fsum(numbers)
    if aggregation == AVERAGE:
        return math.fsum(numbers) / len(numbers) if numbers else math.nan
    raise ValueError(f"aggregation must be in 0..3 (NONE/SUM/AVERAGE/COUNT), got {aggregation!r}")
