"""Numeric annotation of interactions: one value per cell, and how values compare.

TAPAS gives the model two numeric hints: the rank of each cell within its
column (`column_ranks`) and how each cell compares with the numbers of the
question (`numeric_relations`). This module annotates an Interaction with the
values those hints come from: each column is consolidated to its dominant type
(numbers or dates, `consolidate_column`), each question gets its numeric spans,
and `get_numeric_sort_key_fn` / `get_numeric_relation` say how values order and
compare. The values themselves are found by `number_parsing`, whose rules
reproduce the original `number_annotation_utils` (see its docstring).
"""

import enum
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from tapas_tf.data import number_parsing
from tapas_tf.data.number_parsing import get_cell_numeric_values, parse_text  # noqa: F401 (public API)
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.text_normalization import normalize_for_match

DEFAULT_MIN_CONSOLIDATION_FRACTION = 0.7


# ---- Column consolidation -------------------------------------------------------


def _proto_kind(value: interaction_pb2.NumericValue) -> str:
    which = value.WhichOneof("value")
    if which == "float_value":
        return number_parsing.NUMBER
    if which == "date":
        return number_parsing.DATE
    raise ValueError(f"NumericValue holds neither a float nor a date: {value!r}")


def _primitive_kind(value: number_parsing.Value) -> str:
    return number_parsing.NUMBER if isinstance(value, float) else number_parsing.DATE


def _check_fraction(min_consolidation_fraction: float) -> None:
    if not 0.0 <= min_consolidation_fraction <= 1.0:
        raise ValueError(
            f"min_consolidation_fraction must be in [0, 1], got {min_consolidation_fraction}")


def _consolidate(values_by_row: Dict[int, Sequence[object]], min_consolidation_fraction: float,
                 kind_fn: Callable[[object], str]) -> Dict[int, object]:
    """Shared by the proto and the primitive paths; see `consolidate_column`."""
    kinds_by_row = {row: [kind_fn(v) for v in values] for row, values in values_by_row.items()}
    number_rows = sum(1 for kinds in kinds_by_row.values() if number_parsing.NUMBER in kinds)
    date_rows = sum(1 for kinds in kinds_by_row.values() if number_parsing.DATE in kinds)
    max_rows = max(number_rows, date_rows)
    if max_rows == 0 or max_rows < len(values_by_row) * min_consolidation_fraction:
        return {}
    kind = number_parsing.DATE if date_rows == max_rows else number_parsing.NUMBER  # A tie goes to dates.
    chosen = {}
    for row, values in values_by_row.items():
        for value, value_kind in zip(values, kinds_by_row[row]):
            if value_kind == kind:
                chosen[row] = value
                break
    return chosen


def consolidate_column(
    values_by_row: Dict[int, List[interaction_pb2.NumericValue]],
    min_consolidation_fraction: float = DEFAULT_MIN_CONSOLIDATION_FRACTION,
) -> Dict[int, interaction_pb2.NumericValue]:
    """Gives one value of the column's dominant type to each row that has one.

    The dominant type is numbers or dates, whichever occurs in more rows (dates
    on a tie). Dates of different precision are one type: their sort key
    compares them on the fields they share (`get_numeric_sort_key_fn`).

    Args:
      values_by_row: for every body row of the column (rows without values
        included, with an empty list), the candidate values of its cell.
      min_consolidation_fraction: the dominant type must occur in at least this
        fraction of all rows, otherwise the column gets no values.

    Returns:
      For each row holding the dominant type, its first value of that type;
      {} if no type is dominant enough.

    Raises:
      ValueError: if the fraction is outside [0, 1] or a value is empty.
    """
    _check_fraction(min_consolidation_fraction)
    return _consolidate(values_by_row, min_consolidation_fraction, _proto_kind)


def _check_rectangular(table: interaction_pb2.Table) -> None:
    num_columns = len(table.columns)
    for row_index, row in enumerate(table.rows):
        if len(row.cells) != num_columns:
            raise ValueError(
                f"Table {table.table_id!r}: row {row_index} has {len(row.cells)} cells "
                f"but the table has {num_columns} columns")


def add_numeric_table_values(
    table: interaction_pb2.Table,
    min_consolidation_fraction: float = DEFAULT_MIN_CONSOLIDATION_FRACTION,
) -> None:
    """Sets `numeric_value` of the body cells, column by column, in place.

    Every body cell's previous `numeric_value` is cleared first; then each
    column is parsed and consolidated (`consolidate_column`).

    Raises:
      ValueError: if a row's cell count differs from the number of columns, or
        the fraction is outside [0, 1]. The table is unchanged then.
    """
    _check_fraction(min_consolidation_fraction)
    _check_rectangular(table)
    for row in table.rows:
        for cell in row.cells:
            cell.ClearField("numeric_value")
    # One column's texts at a time, not the cells: a message wrapper per cell held at once took
    # ~300 MB for 10^6 cells, and every text at once ~70 MB.
    for column_index in range(len(table.columns)):
        parsed: dict = {}  # A text repeated down a column (a city, a status) is parsed once.
        values_by_row = {}
        for row_index, row in enumerate(table.rows):
            text = row.cells[column_index].text
            if text not in parsed:
                parsed[text] = number_parsing.cell_values(text)
            values_by_row[row_index] = parsed[text]
        chosen = _consolidate(values_by_row, min_consolidation_fraction, _primitive_kind)
        for row_index, value in chosen.items():
            number_parsing.set_proto(table.rows[row_index].cells[column_index].numeric_value, value)


def add_numeric_values_to_question(question: interaction_pb2.Question) -> None:
    """Normalises `original_text` into `text` and annotates the numbers and dates in it."""
    question.text = normalize_for_match(question.original_text)
    # Set even when empty, as the original does: "annotated, no numbers".
    question.annotations.CopyFrom(
        interaction_pb2.NumericValueSpans(spans=parse_text(question.text)))


def add_numeric_values(interaction: interaction_pb2.Interaction) -> None:
    """Annotates the table (`add_numeric_table_values`) and every question."""
    add_numeric_table_values(interaction.table)
    for question in interaction.questions:
        add_numeric_values_to_question(question)


# ---- Comparison --------------------------------------------------------------------


class Relation(enum.IntEnum):
    """How a question value compares with a cell value: LT means question < cell."""

    EQ = 0
    LT = 1
    GT = 2


SortKey = Union[float, Tuple[float, ...]]
SortKeyFn = Callable[[interaction_pb2.NumericValue], SortKey]


def relation_bit(relation: Relation) -> int:
    """The bit of `relation` in the `numeric_relations` feature: EQ 1, LT 2, GT 4.

    Raises:
      ValueError: if `relation` is not a `Relation` value.
    """
    return 1 << Relation(relation)


def _float_sort_key(value: interaction_pb2.NumericValue) -> float:
    if value.WhichOneof("value") != "float_value":
        raise ValueError(f"Expected a number, got {value!r}")
    return value.float_value


def _date_sort_key_fn(fields: Tuple[str, ...]) -> SortKeyFn:
    def sort_key(value: interaction_pb2.NumericValue) -> Tuple[float, ...]:
        date = value.date
        if value.WhichOneof("value") != "date" or not all(date.HasField(f) for f in fields):
            raise ValueError(f"Expected a date with fields {fields}, got {value!r}")
        return tuple(float(getattr(date, field)) for field in fields)

    return sort_key


def get_numeric_sort_key_fn(values: Iterable[interaction_pb2.NumericValue]) -> SortKeyFn:
    """A key that orders `values`: the number itself, or a date's shared fields.

    Dates are compared on the fields (year, month, day) that all of them set,
    as a tuple of floats: with "2010-05-05" and "August 2007" the keys are
    (2010., 5.) and (2007., 8.); adding "2006" reduces them to (year,).

    Raises:
      ValueError: if `values` is empty, mixes numbers and dates, or holds dates
        that share no field; the key itself raises it for a value it cannot
        compare.
    """
    values = list(values)
    if not values:
        raise ValueError("Cannot build a sort key for an empty collection of values")
    kinds = {_proto_kind(value) for value in values}
    if len(kinds) > 1:
        raise ValueError("Values mix numbers and dates; they are not comparable")
    if kinds == {number_parsing.NUMBER}:
        return _float_sort_key
    fields = tuple(field for field in number_parsing.DATE_FIELDS
                   if all(value.date.HasField(field) for value in values))
    if not fields:
        raise ValueError("The dates share no field (year, month, day); they are not comparable")
    return _date_sort_key_fn(fields)


def get_numeric_relation(value: interaction_pb2.NumericValue,
                         other: interaction_pb2.NumericValue,
                         sort_key_fn: SortKeyFn) -> Optional[Relation]:
    """How `value` compares with `other` under `sort_key_fn`; None if unordered (NaN)."""
    key, other_key = sort_key_fn(value), sort_key_fn(other)
    if key == other_key:
        return Relation.EQ
    if key < other_key:
        return Relation.LT
    if key > other_key:
        return Relation.GT
    return None
