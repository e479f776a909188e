"""Tests for tapas_tf.data.wtq_dates: WTQ dates as the official evaluator reads them.

The cases of `OFFICIAL` were worked out by hand from the rule of the evaluator's
`DateValue.parse` (ppasupat/WikiTableQuestions `evaluator.py`): lower-case, split at
"-" into exactly three parts, each "xx" (the year also "xxxx") or what `int` reads,
not all unknown, month in 1..12 and day in 1..31 when known.
"""

import pytest

from tapas_tf.data.wtq_dates import parse_date

OFFICIAL = [
    ("2001-05-03", (2001, 5, 3)),
    ("2001-5-3", (2001, 5, 3)),  # One-digit parts.
    ("2001-005-03", (2001, 5, 3)),  # Any number of digits.
    ("12345-01-01", (12345, 1, 1)),
    ("12-01-05", (12, 1, 5)),  # The first part is always the year.
    ("0-1-1", (0, 1, 1)),
    ("2001-xx-xx", (2001, None, None)),
    ("xx-05-03", (None, 5, 3)),
    ("XX-05-XX", (None, 5, None)),  # Read lower-cased.
    ("xxxx-12-25", (None, 12, 25)),  # "xxxx" for an unknown year...
    ("2001-xxxx-01", None),  # ... but not for a month or a day.
    ("xx-xx-xx", None),  # Nothing known.
    ("xxxx-xx-xx", None),
    ("2001-02-31", (2001, 2, 31)),  # The day is not checked against its month.
    ("2001-12-31", (2001, 12, 31)),
    ("2001-13-01", None),
    ("2001-00-01", None),
    ("2001-01-32", None),
    ("2001-01-00", None),
    ("2001-+5-03", (2001, 5, 3)),  # What int() reads: a sign and white space around the digits.
    ("2001 - 05 - 03", (2001, 5, 3)),
    ("2001-0 5-03", None),
    ("2001-05", None),  # Not three parts.
    ("2001-05-03-04", None),
    ("-05-03", None),
    ("2001--03", None),
    ("2001-05-03t10", None),
    ("2001-5.0-3", None),
    ("2001/05/03", None),
    ("may 3, 2001", None),  # Written dates are not dates to the evaluator.
    ("3 may 2001", None),
    ("2001", None),
    ("", None),
    ("2001-٠٥-03", (2001, 5, 3)),  # int() reads any Unicode decimal digits.
]


@pytest.mark.parametrize("text, expected", OFFICIAL)
def test_official_dates(text, expected):
    assert parse_date(text) == expected


@pytest.mark.parametrize("text, expected", [(text, date) for text, date in OFFICIAL if date is not None])
def test_written_option_keeps_every_official_date(text, expected):
    assert parse_date(text, written=True) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("may 3, 2001", (2001, 5, 3)),
        ("3 may 2001", (2001, 5, 3)),
        ("november 10, 1998", (1998, 11, 10)),
        ("10 nov 1998", (1998, 11, 10)),
        ("may 2001", (2001, 5, None)),
        ("november 10", (None, 11, 10)),
        ("11-10-2013", (2013, 11, 10)),  # Not the evaluator's form (day 2013): read month first.
        ("1998", (1998, None, None)),  # A year is a date to `number_parsing` too.
    ],
)
def test_written_dates(text, expected):
    assert parse_date(text) is None
    assert parse_date(text, written=True) == expected


@pytest.mark.parametrize("text", ["may 3, 2001 and 2002", "born may 3, 2001", "hello", "2001/05/03", "13"])
def test_written_dates_are_whole_texts(text):
    assert parse_date(text, written=True) is None
