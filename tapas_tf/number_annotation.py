"""Numbers and dates in questions and table cells, and how they compare.

TAPAS gives the model two numeric hints: the rank of each cell within its
column (`column_ranks`) and how each cell compares with the numbers of the
question (`numeric_relations`). Both come from the values found here. Released
TAPAS checkpoints were trained on features built by the original
`number_utils` / `number_annotation_utils`, so the rules below reproduce that
behaviour. The places that differ on purpose are marked "Deviation": "fifth",
"sept", "nov." and February 29 without a year are read; exponents ("26e9")
and numbers beyond float32 are not; a signed number's span begins at its sign,
not at the space before it. On the 88,377 cells of the SQA tables, 48 of
82,445 consolidated cell values differ from the original's, all because of
these.

What `parse_text` finds in a normalised text (see
`text_normalization.normalize_for_match`):

* Numbers: an optional sign at the start of the text or after white space,
  digits with optional `,ddd` thousands groups and an optional fraction
  (`"1,836"`, `"-3.5"`, `"+7"`, `".5"`); a percent sign is not interpreted,
  so `"12%"` gives 12. Digits inside words are found too (`"l3"` gives 3).
* A whole word (a maximal run of alphanumeric characters) made of digits and
  an optional ordinal suffix: `"3rd"` gives 3 (and so does `"3th"`).
* The words zero..twelve and zeroth..twelfth (`"first"` gives 1).
* Dates, in these shapes (month names full or abbreviated):
  `november`, `1998`, `1990s`, `nov 2013`, `november 10`, `10 november`,
  `november 10, 2013`, `10 november 2013`, `11-10-2013` (month first),
  `2013-11-10`, `2013-11`, `10.11.2013`, `monday, november 10`. A date sets
  only the fields it names. Years outside [`MIN_YEAR`, `MAX_YEAR`] are not
  dates (they still are numbers).

Where spans overlap, only those not contained in a longer span are kept, and a
span keeps all the values found for exactly that span: `"1998"` gives a span
with the number 1998 and the date (year 1998).
"""

import enum
import re
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from tapas_tf.protos import interaction_pb2
from tapas_tf.text_normalization import normalize_for_match

# Years outside this range are not dates. These are the original's bounds
# (taken from DynSP); features of released checkpoints depend on them, so they
# are kept even though they exclude recent years.
MIN_YEAR = 1700
MAX_YEAR = 2016

DEFAULT_MIN_CONSOLIDATION_FRACTION = 0.7

# Float32 is what the proto stores; larger magnitudes would become infinity.
_FLOAT32_MAX = 3.4028234663852886e38

_NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
    "nine", "ten", "eleven", "twelve",
)
# Deviation: the original lists "fith" (a typo) instead of "fifth"; both are
# accepted here.
_ORDINAL_WORDS = (
    "zeroth", "first", "second", "third", "fourth", "fifth", "sixth",
    "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth",
)
_WORD_VALUES: Dict[str, float] = {
    **{word: float(value) for value, word in enumerate(_NUMBER_WORDS)},
    **{word: float(value) for value, word in enumerate(_ORDINAL_WORDS)},
    "fith": 5.0,
}
_ORDINAL_SUFFIXES = ("st", "nd", "rd", "th")

_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august",
    "september", "october", "november", "december",
)
# Month number by the first three letters; "sept" is handled by its prefix.
_MONTH_BY_PREFIX = {name[:3]: number for number, name in enumerate(_MONTH_NAMES, 1)}
_WEEKDAY_NAMES = frozenset(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
# Days per month in a leap year. Deviation: a date without a year may be
# February 29 (the original checked it against the year 1900).
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)

# A sign counts only at the start of the text or after white space, so that
# "3-7" is two numbers, 3 and 7. Deviation: the original's match, and so its
# span, included that white space; the lookbehind leaves it out.
_NUMBER_RE = re.compile(r"(?:(?:^|(?<=\s))[+-])?(?:\.\d+|\d+(?:,\d\d\d)*(?:\.\d*)?)")
# Words are maximal runs of alphanumeric characters ([^\W_] is str.isalnum()).
_WORD_RE = re.compile(r"[^\W_]+")

# ---- Date shapes -------------------------------------------------------------
# Each shape is anchored at the start of a word and must end at the end of a
# word. Within a start class they are listed longest first: at one start
# position more words means a longer span, so the first shape that matches and
# gives a valid date is the longest date starting there (shorter ones would be
# contained in it and dropped anyway).
_END = r"(?![^\W_])"
_FULL_MONTH = "(?P<month_name>" + "|".join(_MONTH_NAMES) + ")"
# Deviation: the original reads "nov" but not "nov." or "sept"; a month followed
# by more words may be abbreviated with a period here ("may." is left out: it
# more often ends a sentence).
_ANY_MONTH = (
    "(?P<month_name>" + "|".join(_MONTH_NAMES)
    + r"|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?|may)")
_LAST_MONTH = (  # A month that ends the span: no trailing period.
    "(?P<month_name>" + "|".join(_MONTH_NAMES)
    + "|jan|feb|mar|apr|may|jun|jul|aug|sept|sep|oct|nov|dec)")
_DAY = r"(?P<day>\d{1,2})"
_MONTH_NUMBER = r"(?P<month>\d{1,2})"
_YEAR = r"(?P<year>\d{4})"
_WEEKDAY = "(?:" + "|".join(sorted(_WEEKDAY_NAMES)) + ")"


def _compile_shapes(*shapes: str) -> Tuple["re.Pattern[str]", ...]:
    # strptime, which the original uses, ignores case.
    return tuple(re.compile(shape + _END, re.IGNORECASE) for shape in shapes)


_MONTH_FIRST_SHAPES = _compile_shapes(
    rf"{_ANY_MONTH}\s+{_DAY},\s+{_YEAR}",  # november 10, 2013
    rf"{_ANY_MONTH}\s+{_YEAR}",  # nov 2013
    rf"{_ANY_MONTH}\s+{_DAY}",  # november 10
    _FULL_MONTH,  # november
)
_DIGIT_FIRST_SHAPES = _compile_shapes(
    rf"{_DAY}\s+{_ANY_MONTH}\s+{_YEAR}",  # 10 november 2013
    rf"{_DAY}\.{_MONTH_NUMBER}\.{_YEAR}",  # 10.11.2013
    rf"{_MONTH_NUMBER}-{_DAY}-{_YEAR}",  # 11-10-2013
    rf"{_YEAR}-{_MONTH_NUMBER}-{_DAY}",  # 2013-11-10
    rf"{_YEAR}-{_MONTH_NUMBER}",  # 2013-11
    rf"{_DAY}\s+{_LAST_MONTH}",  # 10 nov
    rf"{_YEAR}s",  # 1990s
    _YEAR,  # 1998
)
_WEEKDAY_FIRST_SHAPES = _compile_shapes(
    rf"{_WEEKDAY},\s+{_ANY_MONTH}\s+{_DAY}",  # monday, november 10
)

# A date as (year, month, day); a field the text does not name is None.
DateTuple = Tuple[Optional[int], Optional[int], Optional[int]]
# A parsed value before it becomes a proto: a float or a DateTuple.
_Value = Union[float, DateTuple]
_Span = Tuple[int, int, List[_Value]]

_NUMBER = "number"
_DATE = "date"
_DATE_FIELDS = ("year", "month", "day")


# ---- Parsing -----------------------------------------------------------------


def _to_float(text: str) -> Optional[float]:
    """`float(text)` without thousands separators, or None if unreadable or not finite."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    # Deviation: the original rejected NaN and +infinity only.
    if value != value or abs(value) > _FLOAT32_MAX:
        return None
    return value


def _parse_word(word: str) -> Optional[float]:
    """The value of a whole word: "3rd" -> 3.0, "twelve" -> 12.0, "26e9" -> None."""
    value = _WORD_VALUES.get(word)
    if value is not None or not word[0].isdecimal():
        return value
    for suffix in _ORDINAL_SUFFIXES:
        if word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    # Deviation: the original passes the word to float(), which also reads
    # exponents, so the code point "U+26E9" became 2.6e10. Only digits count here.
    return _to_float(word) if word.isdecimal() else None


def _make_date(year: Optional[int], month: Optional[int],
               day: Optional[int]) -> Optional[DateTuple]:
    """The date tuple if the fields form a valid date in the year range, else None."""
    if year is not None and not MIN_YEAR <= year <= MAX_YEAR:
        return None
    if month is not None and not 1 <= month <= 12:
        return None
    if day is not None:
        if month is None or not 1 <= day <= _DAYS_IN_MONTH[month - 1]:
            return None
        if month == 2 and day == 29 and year is not None and not _is_leap_year(year):
            return None
    return year, month, day


def _is_leap_year(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _date_from_match(match: "re.Match[str]") -> Optional[DateTuple]:
    fields = match.groupdict()
    year = int(fields["year"]) if fields.get("year") else None
    day = int(fields["day"]) if fields.get("day") else None
    if fields.get("month_name"):
        month = _MONTH_BY_PREFIX[fields["month_name"][:3].lower()]
    elif fields.get("month"):
        month = int(fields["month"])
    else:
        month = None
    return _make_date(year, month, day)


def _shapes_starting_with(word: str) -> Tuple["re.Pattern[str]", ...]:
    """The date shapes that can start with `word` (usually none)."""
    if word[0].isdecimal():
        return _DIGIT_FIRST_SHAPES
    lower = word.lower()
    if lower[:3] in _MONTH_BY_PREFIX:
        return _MONTH_FIRST_SHAPES
    if lower in _WEEKDAY_NAMES:
        return _WEEKDAY_FIRST_SHAPES
    return ()


def _longest_date_at(text: str, begin: int, word: str) -> Optional[Tuple[int, DateTuple]]:
    """(end, date) of the longest valid date starting at `begin`, or None."""
    for shape in _shapes_starting_with(word):
        match = shape.match(text, begin)
        if match is None:
            continue
        date = _date_from_match(match)
        if date is not None:
            return match.end(), date
    return None


def _find_values(text: str) -> Dict[Tuple[int, int], List[_Value]]:
    """All candidate spans of `text` with their values, overlapping ones included."""
    values: Dict[Tuple[int, int], List[_Value]] = {}
    for match in _NUMBER_RE.finditer(text):
        number = _to_float(match.group())
        if number is not None:
            values.setdefault(match.span(), []).append(number)
    for match in _WORD_RE.finditer(text):
        word = match.group()
        begin, end = match.span()
        if (begin, end) not in values:
            number = _parse_word(word)
            if number is not None:
                values[begin, end] = [number]
        date = _longest_date_at(text, begin, word)
        if date is not None:
            values.setdefault((begin, date[0]), []).append(date[1])
    return values


def _maximal_spans(values: Dict[Tuple[int, int], List[_Value]]) -> List[_Span]:
    """The spans not contained in another span, ordered by begin index.

    The original keeps spans longest first unless a kept span contains them;
    that selects exactly these maximal spans. Ordered by begin and then by
    decreasing end, a span is contained in another one iff an earlier span
    reaches at least as far, so one sweep finds them (long cells stay linear).
    """
    kept: List[_Span] = []
    reach = -1
    for begin, end in sorted(values, key=lambda span: (span[0], -span[1])):
        if end > reach:
            kept.append((begin, end, values[begin, end]))
            reach = end
    return kept


def _parse_spans(text: str) -> List[_Span]:
    return _maximal_spans(_find_values(text))


def _to_proto(value: _Value) -> interaction_pb2.NumericValue:
    if isinstance(value, float):
        return interaction_pb2.NumericValue(float_value=value)
    year, month, day = value
    return interaction_pb2.NumericValue(
        date=interaction_pb2.Date(year=year, month=month, day=day))


def _set_proto(target: interaction_pb2.NumericValue, value: _Value) -> None:
    if isinstance(value, float):
        target.float_value = value
        return
    year, month, day = value
    date = target.date
    date.SetInParent()
    if year is not None:
        date.year = year
    if month is not None:
        date.month = month
    if day is not None:
        date.day = day


def parse_text(text: str) -> List[interaction_pb2.NumericValueSpan]:
    """Finds the numbers and dates in a normalised text.

    Args:
      text: text already passed through `normalize_for_match` (lower case,
        ASCII dashes and single spaces).

    Returns:
      The longest spans, ordered by position; `begin_index`/`end_index` are
      character offsets into `text` and `values` holds every value read for
      exactly that span (a number before a date). Example: "nov 10, 1998 to
      +7" gives [0, 12) with the date 1998-11-10 and [16, 18) with 7.0.
    """
    return [
        interaction_pb2.NumericValueSpan(
            begin_index=begin, end_index=end, values=[_to_proto(v) for v in values])
        for begin, end, values in _parse_spans(text)
    ]


def _cell_values(text: str) -> List[_Value]:
    """Candidate values of a raw cell text, in text order."""
    return [value for _, _, values in _parse_spans(normalize_for_match(text))
            for value in values]


def get_cell_numeric_values(text: str) -> List[interaction_pb2.NumericValue]:
    """The candidate values of a cell, in text order (the text is normalised first).

    Example: "Nov 10, 2013 (2 games)" gives the date 2013-11-10 and the number 2.
    """
    return [_to_proto(value) for value in _cell_values(text)]


# ---- Column consolidation -------------------------------------------------------


def _proto_kind(value: interaction_pb2.NumericValue) -> str:
    which = value.WhichOneof("value")
    if which == "float_value":
        return _NUMBER
    if which == "date":
        return _DATE
    raise ValueError(f"NumericValue holds neither a float nor a date: {value!r}")


def _primitive_kind(value: _Value) -> str:
    return _NUMBER if isinstance(value, float) else _DATE


def _check_fraction(min_consolidation_fraction: float) -> None:
    if not 0.0 <= min_consolidation_fraction <= 1.0:
        raise ValueError(
            f"min_consolidation_fraction must be in [0, 1], got {min_consolidation_fraction}")


def _consolidate(values_by_row: Dict[int, Sequence[object]], min_consolidation_fraction: float,
                 kind_fn: Callable[[object], str]) -> Dict[int, object]:
    """Shared by the proto and the primitive paths; see `consolidate_column`."""
    kinds_by_row = {row: [kind_fn(v) for v in values] for row, values in values_by_row.items()}
    number_rows = sum(1 for kinds in kinds_by_row.values() if _NUMBER in kinds)
    date_rows = sum(1 for kinds in kinds_by_row.values() if _DATE in kinds)
    max_rows = max(number_rows, date_rows)
    if max_rows == 0 or max_rows < len(values_by_row) * min_consolidation_fraction:
        return {}
    kind = _DATE if date_rows == max_rows else _NUMBER  # A tie goes to dates.
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
    rows = [list(row.cells) for row in table.rows]
    for cells in rows:
        for cell in cells:
            cell.ClearField("numeric_value")
    for column_index in range(len(table.columns)):
        values_by_row = {row_index: _cell_values(cells[column_index].text)
                         for row_index, cells in enumerate(rows)}
        chosen = _consolidate(values_by_row, min_consolidation_fraction, _primitive_kind)
        for row_index, value in chosen.items():
            _set_proto(rows[row_index][column_index].numeric_value, value)


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
    if kinds == {_NUMBER}:
        return _float_sort_key
    fields = tuple(field for field in _DATE_FIELDS
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
