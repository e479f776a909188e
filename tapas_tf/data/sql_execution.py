"""Executing WikiSQL's gold queries on their tables, to obtain the answers TAPAS trains on.

A WikiSQL query is `SELECT agg(col[sel]) FROM table WHERE col[c1] op1 v1 AND col[c2] op2 v2 ...`
(Zhong et al., 2017), given as `sel`, `agg` (an index into `AGG_OPS`) and `conds` (a list of
`[column, operator index into COND_OPS, value]`). TAPAS takes WikiSQL's answers from executing
this query (Herzig et al., 2020, appendix), so the rules below decide what every question's
answer is. They depend on the cells only, never on the table's declared `types`, so that numbers
stored as text ("1,234", "12.5") behave like numbers.

Cells and values
  * A cell (or condition value) is a JSON string, number or null. Its *text* is the string
    itself; null is ""; an integer number prints as itself; a float with an integral value prints
    without a fraction (9.0 -> "9", as the page showed it); other floats print as Python's
    shortest round-trip form (12.5 -> "12.5").
  * Its *number* is the JSON number itself (if finite), or its text read by
    `number_parsing.parse_plain_number` ("1,234" -> 1234, "-3.5", " 12 "; not "12%", "1,2",
    "n/a", "nan"). A cell with no number is *non-numeric*.

Conditions (all conditions are AND-ed; no condition selects every row)
  * `=`: if both the cell and the value have a number, the numbers are compared ("12.50" equals
    12.5, "1,234" equals "1234"); otherwise the texts are compared after lower-casing and
    collapsing white space ("South  Australia" equals "SOUTH AUSTRALIA").
  * `>` and `<`: numeric only. A non-numeric cell never satisfies them, and neither does any
    cell when the value is non-numeric.
  * `OP` (index 3) and any other index are refused (`SqlError`, reason "bad_operator").

Aggregations (the selected cells are the `sel` column's cells in the matching rows, in row order)
  * none: the answer is the selected cells' texts; coordinates are those cells; TAPAS NONE.
  * MAX / MIN: over the selected cells that have a number (the others are skipped and counted).
    The answer is the text of the first cell holding the extreme value, the float answer is that
    value, and the coordinates are every selected cell holding it. TAPAS has no MAX/MIN: it
    answers them by selecting the cell(s), so the aggregation is NONE. No numeric cell: empty
    answer, no float.
  * COUNT: the number of matching rows, whatever their cells hold (0 when none match). The
    coordinates are the selected cells of all matching rows; TAPAS COUNT.
  * SUM / AVG: over the selected cells that have a number; non-numeric cells are skipped and
    counted in `SqlResult.skipped_non_numeric`, and left out of the coordinates (they are not
    cells the answer comes from). No numeric cell: empty answer, no float (SQL's NULL). TAPAS
    SUM / AVERAGE.
  * The answer text of a computed number (COUNT, SUM, AVG) is `format_number` of it: integral
    values without a fraction ("3"), others to 12 significant digits ("2.33333333333").

Bad queries raise `SqlError` with a `reason`: "bad_column" (an index outside the header),
"bad_aggregation", "bad_operator", or "bad_condition" (a condition that is not
`[int, int, value]`, or whose value is not a string or number).
"""

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple, Union

from tapas_tf.data.number_parsing import parse_plain_number
from tapas_tf.data.text_normalization import collapse_whitespace

AGG_OPS = ("", "MAX", "MIN", "COUNT", "SUM", "AVG")
COND_OPS = ("=", ">", "<", "OP")
# The operators the executor knows (WikiSQL's data uses only these).
SUPPORTED_COND_OPS = ("=", ">", "<")

# TAPAS' aggregation functions (the values of interaction_pb2.Answer.AggregationFunction).
NONE, SUM, AVERAGE, COUNT = 0, 1, 2, 3
TAPAS_AGGREGATION = {"": NONE, "MAX": NONE, "MIN": NONE, "COUNT": COUNT, "SUM": SUM, "AVG": AVERAGE}

Cell = Union[str, int, float, None]
Coordinate = Tuple[int, int]


class SqlError(ValueError):
    """A query that cannot be executed on its table; `reason` is a short counter name."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class Condition:
    column: int
    operator: str  # One of SUPPORTED_COND_OPS.
    value: Cell


@dataclasses.dataclass(frozen=True)
class SqlResult:
    """The result of a query.

    Attributes:
      values: the answer as texts (cell texts, or the formatted number of COUNT/SUM/AVG).
      coordinates: (row, column) of the cells the answer comes from, rows counted from 0.
      aggregation_function: TAPAS' aggregation (NONE, SUM, AVERAGE, COUNT).
      float_value: the scalar answer of MAX, MIN, COUNT, SUM and AVG; None otherwise (and when
        MAX/MIN/SUM/AVG saw no numeric cell).
      sql_aggregation: WikiSQL's aggregation name ("" for none).
      matched_rows: the rows that satisfy every condition.
      skipped_non_numeric: selected cells that MAX/MIN/SUM/AVG skipped because they have no number.
    """

    values: Tuple[str, ...]
    coordinates: Tuple[Coordinate, ...]
    aggregation_function: int
    float_value: Optional[float]
    sql_aggregation: str
    matched_rows: Tuple[int, ...]
    skipped_non_numeric: int = 0


def cell_text(value: Cell) -> str:
    """The text of a cell or condition value: 9.0 -> "9", 12.5 -> "12.5", None -> ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    return str(value)


def format_number(value: float) -> str:
    """The answer text of a computed number: 3.0 -> "3", 7/3 -> "2.33333333333"."""
    value = float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return format(value, ".12g")


def cell_number(value: Cell) -> Optional[float]:
    """The number of a cell: a finite JSON number, or its text read as a plain number, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # An integer beyond float range.
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, str):
        return parse_plain_number(value)
    return None


def normalize_for_equality(value: Cell) -> str:
    """The text that `=` compares when a side has no number: lower-cased, white space collapsed."""
    return collapse_whitespace(cell_text(value)).lower()


def satisfies(cell: Cell, condition: Condition) -> bool:
    """Whether one cell satisfies one condition (see the module docstring)."""
    cell_value, wanted = cell_number(cell), cell_number(condition.value)
    if condition.operator == "=":
        if cell_value is not None and wanted is not None:
            return cell_value == wanted
        return normalize_for_equality(cell) == normalize_for_equality(condition.value)
    if cell_value is None or wanted is None:
        return False
    return cell_value > wanted if condition.operator == ">" else cell_value < wanted


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_column(column, num_columns: int, what: str) -> int:
    if not _is_index(column):
        raise SqlError("bad_column", f"{what} column {column!r} is not an integer")
    if not 0 <= column < num_columns:
        raise SqlError("bad_column", f"{what} column {column} is outside the table's "
                       f"{num_columns} columns (0..{num_columns - 1})")
    return column


def check_aggregation(agg) -> str:
    """WikiSQL's aggregation name of index `agg`; SqlError("bad_aggregation") if unknown."""
    if not _is_index(agg) or not 0 <= agg < len(AGG_OPS):
        raise SqlError("bad_aggregation", f"unknown aggregation {agg!r} (expected 0..{len(AGG_OPS) - 1}: "
                       f"{', '.join(a or 'none' for a in AGG_OPS)})")
    return AGG_OPS[agg]


def parse_condition(cond, num_columns: int) -> Condition:
    """One `[column, operator, value]` triple; SqlError for a bad column, operator or shape."""
    if not isinstance(cond, (list, tuple)) or len(cond) != 3:
        raise SqlError("bad_condition", f"condition {cond!r} is not [column, operator, value]")
    column, operator, value = cond
    column = _check_column(column, num_columns, "condition")
    if not _is_index(operator) or not 0 <= operator < len(COND_OPS):
        raise SqlError("bad_operator", f"unknown condition operator {operator!r} "
                       f"(expected 0..{len(SUPPORTED_COND_OPS) - 1}: {', '.join(SUPPORTED_COND_OPS)})")
    if COND_OPS[operator] not in SUPPORTED_COND_OPS:
        raise SqlError("bad_operator", f"condition operator {operator} ({COND_OPS[operator]}) "
                       "is not supported")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SqlError("bad_condition", f"condition value {value!r} is not a string or a number")
    return Condition(column, COND_OPS[operator], value)


def parse_conditions(conds, num_columns: int) -> Tuple[Condition, ...]:
    if not isinstance(conds, (list, tuple)):
        raise SqlError("bad_condition", f"conds {conds!r} is not a list")
    return tuple(parse_condition(cond, num_columns) for cond in conds)


def matching_rows(rows: Sequence[Sequence[Cell]], conditions: Sequence[Condition]) -> List[int]:
    """The indexes of the rows that satisfy every condition."""
    return [index for index, row in enumerate(rows)
            if all(satisfies(row[c.column], c) for c in conditions)]


def _numeric_cells(rows: Sequence[Sequence[Cell]], matched: Sequence[int],
                   sel: int) -> Tuple[List[Tuple[int, float]], int]:
    """(row, number) of the selected cells that have a number, and how many did not."""
    numbers = []
    for index in matched:
        value = cell_number(rows[index][sel])
        if value is not None:
            numbers.append((index, value))
    return numbers, len(matched) - len(numbers)


def _extreme(rows, matched, sel, name: str, base: dict) -> SqlResult:
    numbers, skipped = _numeric_cells(rows, matched, sel)
    if not numbers:
        return SqlResult((), (), NONE, None, skipped_non_numeric=skipped, **base)
    best = (max if name == "MAX" else min)(value for _, value in numbers)
    holders = [index for index, value in numbers if value == best]
    return SqlResult((cell_text(rows[holders[0]][sel]),), tuple((i, sel) for i in holders), NONE,
                     best, skipped_non_numeric=skipped, **base)


def _sum_or_average(rows, matched, sel, name: str, base: dict) -> SqlResult:
    numbers, skipped = _numeric_cells(rows, matched, sel)
    aggregation = TAPAS_AGGREGATION[name]
    if not numbers:
        return SqlResult((), (), aggregation, None, skipped_non_numeric=skipped, **base)
    total = math.fsum(value for _, value in numbers)
    result = total if name == "SUM" else total / len(numbers)
    return SqlResult((format_number(result),), tuple((i, sel) for i, _ in numbers), aggregation,
                     result, skipped_non_numeric=skipped, **base)


def execute_sql(header: Sequence[str], types: Optional[Sequence[str]], rows: Sequence[Sequence[Cell]],
                sel, agg, conds) -> SqlResult:
    """Executes `SELECT agg(sel) WHERE conds` on a table (the rules are in the module docstring).

    `types` is not used: the rules read numbers from the cells themselves. Every row must have
    one cell per header column. Raises SqlError for a bad column, aggregation or condition.
    """
    del types  # The cells decide (numbers stored as text count as numbers).
    num_columns = len(header)
    sel = _check_column(sel, num_columns, "selected")
    name = check_aggregation(agg)
    conditions = parse_conditions(conds, num_columns)
    matched = matching_rows(rows, conditions)
    base = {"sql_aggregation": name, "matched_rows": tuple(matched)}
    if name in ("MAX", "MIN"):
        return _extreme(rows, matched, sel, name, base)
    if name in ("SUM", "AVG"):
        return _sum_or_average(rows, matched, sel, name, base)
    coordinates = tuple((index, sel) for index in matched)
    if name == "COUNT":
        return SqlResult((format_number(len(matched)),), coordinates, COUNT, float(len(matched)), **base)
    return SqlResult(tuple(cell_text(rows[i][sel]) for i in matched), coordinates, NONE, None, **base)
