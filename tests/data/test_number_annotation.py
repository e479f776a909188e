"""Tests of tapas_tf.data.number_annotation: parsing, consolidation, sort keys, relations."""

import math

import pytest

from tapas_tf.data import number_annotation as na
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import make_table


def _num(value):
    return interaction_pb2.NumericValue(float_value=value)


def _date(year=None, month=None, day=None):
    return interaction_pb2.NumericValue(
        date=interaction_pb2.Date(year=year, month=month, day=day))


def _plain(value):
    """A NumericValue as a float or a (year, month, day) tuple with None for unset fields."""
    if value.WhichOneof("value") == "float_value":
        return value.float_value
    date = value.date
    return tuple(getattr(date, f) if date.HasField(f) else None for f in ("year", "month", "day"))


def _spans(text):
    return [(s.begin_index, s.end_index, [_plain(v) for v in s.values])
            for s in na.parse_text(text)]


# ---- parse_text ----------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    # Numbers.
    ("1,836", [(0, 5, [1836.0])]),
    ("-3.5", [(0, 4, [-3.5])]),
    ("+7", [(0, 2, [7.0])]),
    ("12%", [(0, 2, [12.0])]),  # The percent sign is not interpreted.
    ("0.5 and .5", [(0, 3, [0.5]), (8, 10, [0.5])]),
    ("1,83", [(0, 1, [1.0]), (2, 4, [83.0])]),  # Not a thousands group.
    ("from 5 to -3", [(5, 6, [5.0]), (10, 12, [-3.0])]),
    ("l 3-7", [(2, 3, [3.0]), (4, 5, [7.0])]),  # No sign after a digit.
    ("abc123", [(3, 6, [123.0])]),  # Digits inside a word count.
    ("u+26e9", [(2, 4, [26.0]), (5, 6, [9.0])]),  # No exponent, no sign after "u".
    ("no number here", []),
    ("", []),
    # Number and ordinal words, ordinal suffixes.
    ("one", [(0, 3, [1.0])]),
    ("twelve", [(0, 6, [12.0])]),
    ("thirteen", []),
    ("3rd", [(0, 3, [3.0])]),
    ("21st", [(0, 4, [21.0])]),
    ("first", [(0, 5, [1.0])]),
    ("fifth", [(0, 5, [5.0])]),
    ("the second", [(4, 10, [2.0])]),
    # Dates: a date sets only the fields it names.
    ("november 10", [(0, 11, [(None, 11, 10)])]),
    ("nov 10, 2013", [(0, 12, [(2013, 11, 10)])]),
    ("nov. 10, 2013", [(0, 13, [(2013, 11, 10)])]),
    ("sept. 5", [(0, 7, [(None, 9, 5)])]),
    ("10 november 2013", [(0, 16, [(2013, 11, 10)])]),
    ("10 nov", [(0, 6, [(None, 11, 10)])]),
    ("may 2013", [(0, 8, [(2013, 5, None)])]),
    ("november", [(0, 8, [(None, 11, None)])]),
    ("2013-11-10", [(0, 10, [(2013, 11, 10)])]),
    ("11-10-2013", [(0, 10, [(2013, 11, 10)])]),
    ("10.11.2013", [(0, 10, [(2013, 11, 10)])]),
    ("2013-11", [(0, 7, [(2013, 11, None)])]),
    ("monday, november 10", [(0, 19, [(None, 11, 10)])]),
    ("1990s", [(0, 5, [(1990, None, None)])]),
    # A bare year is a number and a date, in that order.
    ("1998", [(0, 4, [1998.0, (1998, None, None)])]),
    # Years outside [1700, 2016] are numbers only (the original's range).
    ("2020", [(0, 4, [2020.0])]),
    ("1699", [(0, 4, [1699.0])]),
    # An invalid day falls back to the shorter dates inside it.
    ("february 30, 2013",
     [(0, 8, [(None, 2, None)]), (9, 11, [30.0]), (13, 17, [2013.0, (2013, None, None)])]),
    ("february 29", [(0, 11, [(None, 2, 29)])]),  # Possible when no year is given.
    ("february 29, 2015", [(0, 11, [(None, 2, 29)]), (13, 17, [2015.0, (2015, None, None)])]),
    ("february 29, 2012", [(0, 17, [(2012, 2, 29)])]),
    # A period after a month that ends a sentence does not join the next number.
    ("in november. 10 people", [(3, 11, [(None, 11, None)]), (13, 15, [10.0])]),
    ("the 21st of may", [(4, 8, [21.0]), (12, 15, [(None, 5, None)])]),
])
def test_parse_text(text, expected):
    assert _spans(text) == expected


def test_parse_text_offsets_index_the_text():
    text = "how many were built before 1998 and after nov 10, 1990?"
    spans = na.parse_text(text)
    assert [(s.begin_index, s.end_index) for s in spans] == [(27, 31), (42, 54)]
    assert [text[s.begin_index:s.end_index] for s in spans] == ["1998", "nov 10, 1990"]


# ---- cells -------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("Nov 10, 2013 (2 games)", [(2013, 11, 10), 2.0]),
    ("1998", [1998.0, (1998, None, None)]),
    ("\u20135", [-5.0]),  # An en dash is normalised to a minus sign.
    ("Three", [3.0]),  # Cell text is lower-cased before parsing.
    ("Lions", []),
])
def test_get_cell_numeric_values(text, expected):
    assert [_plain(v) for v in na.get_cell_numeric_values(text)] == expected


def _plain_by_row(chosen):
    return {row: _plain(value) for row, value in chosen.items()}


def test_consolidate_keeps_numbers_when_dominant():
    # Numbers in 3 of 4 rows (0.75 >= 0.7); row 2's date is skipped for its number.
    column = {0: [_num(1.0)], 1: [_num(2.0)], 2: [_date(2001), _num(3.0)], 3: []}
    assert _plain_by_row(na.consolidate_column(column)) == {0: 1.0, 1: 2.0, 2: 3.0}


def test_consolidate_needs_the_fraction_of_all_rows():
    column = {0: [_num(1.0)], 1: [_num(2.0)], 2: [], 3: []}
    assert na.consolidate_column(column) == {}  # 2 < 0.7 * 4.
    assert _plain_by_row(na.consolidate_column(column, 0.5)) == {0: 1.0, 1: 2.0}


def test_consolidate_prefers_dates_on_a_tie():
    # Numbers in rows 0 and 2, dates in rows 0 and 1: dates win the tie.
    column = {0: [_num(1998.0), _date(1998)], 1: [_date(2001, 5)], 2: [_num(7.0)]}
    assert _plain_by_row(na.consolidate_column(column, 0.6)) == {
        0: (1998, None, None), 1: (2001, 5, None)}
    assert na.consolidate_column(column, 0.7) == {}  # 2 < 0.7 * 3.


def test_consolidate_keeps_dates_of_different_precision():
    column = {0: [_date(1998)], 1: [_date(2001, 5)], 2: [_date(2003, 6, 1), _date(2004)]}
    chosen = na.consolidate_column(column)
    assert _plain_by_row(chosen) == {
        0: (1998, None, None), 1: (2001, 5, None), 2: (2003, 6, 1)}
    key = na.get_numeric_sort_key_fn(chosen.values())
    assert [key(chosen[row]) for row in range(3)] == [(1998.0,), (2001.0,), (2003.0,)]


def test_consolidate_empty_column():
    assert na.consolidate_column({}) == {}
    assert na.consolidate_column({0: [], 1: []}) == {}


def test_consolidate_rejects_bad_input():
    with pytest.raises(ValueError, match="min_consolidation_fraction"):
        na.consolidate_column({0: [_num(1.0)]}, 1.5)
    with pytest.raises(ValueError, match="neither a float nor a date"):
        na.consolidate_column({0: [interaction_pb2.NumericValue()]})


# ---- tables and questions --------------------------------------------------------------


def _column_values(table, column_index):
    return [_plain(row.cells[column_index].numeric_value)
            if row.cells[column_index].HasField("numeric_value") else None
            for row in table.rows]


def test_add_numeric_table_values():
    """
    | Year | Team   | Score  | Date             |
    | 1998 | Lions  | 3      | Nov 10, 2013     |
    | 2001 | Tigers | twelve | 10 November 2013 |
    | 2005 | Bears  | n/a    | May 2014         |
    | 2010 | Wolves | 7      | 2015-01-02       |
    """
    table = make_table("t", ["Year", "Team", "Score", "Date"], [
        ["1998", "Lions", "3", "Nov 10, 2013"],
        ["2001", "Tigers", "twelve", "10 November 2013"],
        ["2005", "Bears", "n/a", "May 2014"],
        ["2010", "Wolves", "7", "2015-01-02"],
    ])
    table.rows[0].cells[1].numeric_value.float_value = 99.0  # Stale, must be cleared.
    na.add_numeric_table_values(table)
    # Every year is a number and a date: the tie goes to dates.
    assert _column_values(table, 0) == [
        (1998, None, None), (2001, None, None), (2005, None, None), (2010, None, None)]
    assert _column_values(table, 1) == [None, None, None, None]
    assert _column_values(table, 2) == [3.0, 12.0, None, 7.0]  # 3 of 4 rows >= 0.7.
    assert _column_values(table, 3) == [
        (2013, 11, 10), (2013, 11, 10), (2014, 5, None), (2015, 1, 2)]
    assert not any(column.HasField("numeric_value") for column in table.columns)


def test_add_numeric_table_values_threshold():
    table = make_table("t", ["Score"], [["3"], ["twelve"], ["n/a"]])
    na.add_numeric_table_values(table)  # 2 of 3 rows < 0.7.
    assert _column_values(table, 0) == [None, None, None]
    na.add_numeric_table_values(table, min_consolidation_fraction=0.6)
    assert _column_values(table, 0) == [3.0, 12.0, None]


def test_add_numeric_table_values_rejects_ragged_rows_unchanged():
    table = make_table("t", ["A", "B"], [["1", "2"], ["3"]])
    table.rows[0].cells[0].numeric_value.float_value = 5.0
    with pytest.raises(ValueError, match="row 1 has 1 cells but the table has 2 columns"):
        na.add_numeric_table_values(table)
    assert table.rows[0].cells[0].numeric_value.float_value == 5.0


def test_add_numeric_values_to_question():
    question = interaction_pb2.Question(
        original_text="Who scored  more than 1,000 points in Nov. 2010?")
    question.annotations.spans.add(begin_index=0, end_index=1)  # Stale, must go.
    na.add_numeric_values_to_question(question)
    assert question.text == "who scored more than 1,000 points in nov. 2010?"
    spans = [(s.begin_index, s.end_index, [_plain(v) for v in s.values])
             for s in question.annotations.spans]
    assert spans == [(21, 26, [1000.0]), (37, 46, [(2010, 11, None)])]


def test_question_without_numbers_is_marked_annotated():
    question = interaction_pb2.Question(original_text="Who won?")
    na.add_numeric_values_to_question(question)
    assert question.text == "who won?"
    assert question.HasField("annotations")
    assert len(question.annotations.spans) == 0


def test_add_numeric_values_on_interaction():
    interaction = interaction_pb2.Interaction(
        table=make_table("t", ["N"], [["1"], ["2"]]),
        questions=[interaction_pb2.Question(original_text="More than One?")])
    na.add_numeric_values(interaction)
    assert _column_values(interaction.table, 0) == [1.0, 2.0]
    assert [_plain(v) for v in interaction.questions[0].annotations.spans[0].values] == [1.0]


# ---- sort keys and relations -------------------------------------------------------------


def test_sort_key_for_numbers():
    key = na.get_numeric_sort_key_fn([_num(3.5), _num(-1.0)])
    assert key(_num(3.5)) == 3.5
    assert sorted([_num(3.5), _num(-1.0)], key=key) == [_num(-1.0), _num(3.5)]


def test_sort_key_uses_the_date_fields_all_values_share():
    values = [_date(2010, 5, 5), _date(2007, 8)]
    key = na.get_numeric_sort_key_fn(values)
    assert [key(v) for v in values] == [(2010.0, 5.0), (2007.0, 8.0)]
    key = na.get_numeric_sort_key_fn(values + [_date(2006)])
    assert [key(v) for v in values] == [(2010.0,), (2007.0,)]
    key = na.get_numeric_sort_key_fn(iter([_date(None, 11, 10), _date(None, 3)]))
    assert key(_date(None, 11, 10)) == (11.0,)


@pytest.mark.parametrize("values, message", [
    ([], "empty"),
    ([_num(1.0), _date(2001)], "mix numbers and dates"),
    ([_date(2010), _date(None, 3)], "share no field"),
])
def test_sort_key_rejects_incomparable_values(values, message):
    with pytest.raises(ValueError, match=message):
        na.get_numeric_sort_key_fn(values)


def test_sort_key_rejects_a_value_it_cannot_order():
    with pytest.raises(ValueError, match="Expected a number"):
        na.get_numeric_sort_key_fn([_num(1.0)])(_date(2001))
    with pytest.raises(ValueError, match="Expected a date"):
        na.get_numeric_sort_key_fn([_date(2001, 2)])(_date(2001))


def test_get_numeric_relation():
    key = na.get_numeric_sort_key_fn([_num(2.0), _num(3.0)])
    # LT means the first value (the question's) is less than the second (the cell's).
    assert na.get_numeric_relation(_num(2.0), _num(3.0), key) is na.Relation.LT
    assert na.get_numeric_relation(_num(3.0), _num(2.0), key) is na.Relation.GT
    assert na.get_numeric_relation(_num(3.0), _num(3.0), key) is na.Relation.EQ
    assert na.get_numeric_relation(_num(math.nan), _num(3.0), key) is None
    key = na.get_numeric_sort_key_fn([_date(2001, 5, 1), _date(2001)])
    # Compared on the year only: May 2001 equals 2001.
    assert na.get_numeric_relation(_date(2001), _date(2001, 5, 1), key) is na.Relation.EQ
    assert na.get_numeric_relation(_date(1999), _date(2001, 5, 1), key) is na.Relation.LT


def test_relation_bits():
    assert [na.relation_bit(r) for r in na.Relation] == [1, 2, 4]
    assert na.relation_bit(na.Relation.LT) | na.relation_bit(na.Relation.GT) == 6
    with pytest.raises(ValueError):
        na.relation_bit(3)
