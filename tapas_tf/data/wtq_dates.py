"""Dates of WikiTableQuestions answers, read as the official WTQ evaluator reads them.

WikiTableQuestions writes a date answer as "yyyy-mm-dd", with "xx" for a part it does
not know: "1998-11-10", "xx-11-10", "1998-xx-xx". The official evaluator
(`evaluator.py` of ppasupat/WikiTableQuestions, `DateValue.parse`) takes a text as a
date when, lower-cased, it splits at "-" into exactly three parts where

  * each part is an integer (any number of digits, optional white space and sign
    around it, as Python's `int` reads it) or "xx"; the year may also be "xxxx",
  * not all three parts are unknown,
  * a known month is in 1..12 and a known day in 1..31 (not checked against the
    month: "2001-02-31" is a date).

So "2001-5-3" is May 3, 2001 and "12-01-05" the year 12; "may 3, 2001", "2001/05/03"
and "2001-05" are not dates. `parse_date(text)` is that rule; the denotation metric
(`inference.metrics`) uses it as it is.

`parse_date(text, written=True)` also reads a text that is, as a whole, one written
date in a shape `number_parsing.parse_text` knows ("november 10, 1998", "10 nov 1998",
"may 2001", "november 10"). Weak supervision (`answer_matching`) needs that: the answer
"1998-11-10" is found in the cell "November 10, 1998". The evaluator never reads
written dates, so the metric does not ask for them.
"""

import re
from typing import Optional, Tuple

from tapas_tf.data.number_parsing import DateTuple, parse_text

# What stands for an unknown year, and for an unknown month or day.
_UNKNOWN_YEAR = ("xx", "xxxx")
_UNKNOWN_PART = ("xx",)
# What Python's int() reads; `\d` is any Unicode decimal digit, as int() takes them.
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def _read_part(part: str, unknown: Tuple[str, ...]) -> Tuple[bool, Optional[int]]:
    """(readable, value) of one part of "yyyy-mm-dd": value None for an unknown part."""
    if part in unknown:
        return True, None
    if _INTEGER.fullmatch(part):
        return True, int(part)
    return False, None


def _official_date(text: str) -> Optional[DateTuple]:
    """The date of a "yyyy-mm-dd" text as the official evaluator reads it, else None."""
    parts = text.lower().split("-")
    if len(parts) != 3:
        return None
    unknowns = (_UNKNOWN_YEAR, _UNKNOWN_PART, _UNKNOWN_PART)
    read = [_read_part(part, unknown) for part, unknown in zip(parts, unknowns)]
    if not all(readable for readable, _ in read):
        return None
    year, month, day = (value for _, value in read)
    if year is None and month is None and day is None:
        return None
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        return None
    return year, month, day


def _written_date(text: str) -> Optional[DateTuple]:
    """The date of a text that is nothing but one written date (`parse_text`'s shapes), else None."""
    spans = parse_text(text)
    if len(spans) != 1 or spans[0].begin_index != 0 or spans[0].end_index != len(text):
        return None
    # A span holds at most one date: the longest one that starts where it starts.
    for value in spans[0].values:
        if value.HasField("date"):
            date = value.date
            year, month, day = (getattr(date, field) if date.HasField(field) else None
                                for field in ("year", "month", "day"))
            return year, month, day
    return None


def parse_date(text: str, written: bool = False) -> Optional[DateTuple]:
    """The `(year, month, day)` of a WTQ date text, None for each unknown part; None if not a date.

    Args:
      text: an answer or cell text after `text_normalization.normalize_answer_text`
        (lower case, ASCII dashes, single spaces).
      written: also read a text that is one written date as a whole ("november 10,
        1998", "nov 2013"); the official evaluator does not, weak supervision does.

    Examples: "2001-05-03" -> (2001, 5, 3); "xx-5-3" -> (None, 5, 3); "1998-xx-xx" ->
    (1998, None, None); "may 3, 2001" -> None, but (2001, 5, 3) with `written`.
    """
    date = _official_date(text)
    if date is None and written:
        date = _written_date(text)
    return date
