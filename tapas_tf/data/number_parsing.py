"""Finding numbers and dates in text: the values behind TAPAS's numeric features.

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

import math
import re
from typing import Dict, List, Optional, Tuple, Union

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.text_normalization import normalize_for_match

# Years outside this range are not dates. These are the original's bounds
# (taken from DynSP); features of released checkpoints depend on them, so they
# are kept even though they exclude recent years.
MIN_YEAR = 1700
MAX_YEAR = 2016


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
Value = Union[float, DateTuple]
_Span = Tuple[int, int, List[Value]]

NUMBER = "number"
DATE = "date"
DATE_FIELDS = ("year", "month", "day")


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


def _find_values(text: str) -> Dict[Tuple[int, int], List[Value]]:
    """All candidate spans of `text` with their values, overlapping ones included."""
    values: Dict[Tuple[int, int], List[Value]] = {}
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


def _maximal_spans(values: Dict[Tuple[int, int], List[Value]]) -> List[_Span]:
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


def to_proto(value: Value) -> interaction_pb2.NumericValue:
    if isinstance(value, float):
        return interaction_pb2.NumericValue(float_value=value)
    year, month, day = value
    return interaction_pb2.NumericValue(
        date=interaction_pb2.Date(year=year, month=month, day=day))


def set_proto(target: interaction_pb2.NumericValue, value: Value) -> None:
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
            begin_index=begin, end_index=end, values=[to_proto(v) for v in values])
        for begin, end, values in _parse_spans(text)
    ]


def cell_values(text: str) -> List[Value]:
    """Candidate values of a raw cell text, in text order."""
    return [value for _, _, values in _parse_spans(normalize_for_match(text))
            for value in values]


def get_cell_numeric_values(text: str) -> List[interaction_pb2.NumericValue]:
    """The candidate values of a cell, in text order (the text is normalised first).

    Example: "Nov 10, 2013 (2 games)" gives the date 2013-11-10 and the number 2.
    """
    return [to_proto(value) for value in cell_values(text)]


# A plain decimal number with optional thousands separators, e.g. "-1,234.5".
_THOUSANDS_NUMBER = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$")


def parse_plain_number(text: str) -> Optional[float]:
    """Parses "12", "-3.5", "1e3" or "1,234.5" as a finite float, else None.

    Unlike `parse_text`, which finds numbers inside any text, this reads a whole
    text that must be one number, as answers and cells written by people are.
    Commas are only accepted as thousands separators in groups of three
    ("1,234"), so "1,2" is not a number. Units, currency signs and percent
    signs are not stripped: such texts are not plain numbers.
    """
    text = text.strip()
    if "," in text:
        if not _THOUSANDS_NUMBER.match(text):
            return None
        text = text.replace(",", "")
    if "_" in text:  # float() would accept "1_000".
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
