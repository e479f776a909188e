"""The combination rules of answers over row windows, on hand-made tables.

The table of most tests (body rows 0..9, columns name and orders):

    row  name  orders
    0    a     5
    1    b     3
    2    c     8        window 0: rows 0-3
    3    d     1
    4    e     4
    5    f     2        window 1: rows 4-6
    6    g     7
    7    h     6
    8    i     9        window 2: rows 7-9  (i has the most orders)
    9    j     2
"""

import pytest

from tapas_tf.qa.row_windows import (
    WindowAnswer,
    choose_operator,
    combine,
    split_rows,
)

ORDERS = [5, 3, 8, 1, 4, 2, 7, 6, 9, 2]
ORDERS_COLUMN = 1


def number_of(cell):
    row, column = cell
    return float(ORDERS[row]) if column == ORDERS_COLUMN else None


def _probabilities(**named):
    values = {"NONE": 0.0, "SUM": 0.0, "AVERAGE": 0.0, "COUNT": 0.0}
    values.update(named)
    return values


def test_windows_cover_every_row_once_and_evenly():
    assert split_rows(10, 4) == [range(0, 4), range(4, 7), range(7, 10)]
    assert [len(w) for w in split_rows(130, 60)] == [44, 43, 43]
    assert split_rows(5, 60) == [range(0, 5)]
    assert split_rows(0, 60) == [range(0, 0)]
    windows = split_rows(20_001, 64)
    assert sum(len(w) for w in windows) == 20_001 and max(len(w) for w in windows) <= 64
    assert [r for w in windows for r in w] == list(range(20_001))
    with pytest.raises(ValueError, match="rows_per_window must be at least 1"):
        split_rows(10, 0)


def test_a_count_split_across_windows_adds_up():
    """"how many rows have more than 4 orders?": a (5), c (8), g (7), h (6), i (9) in three windows."""
    windows = [
        WindowAnswer((0, 1, 2, 3), ((0, 0), (2, 0)), operator_probabilities=_probabilities(COUNT=0.9, NONE=0.1)),
        WindowAnswer((4, 5, 6), ((6, 0),), operator_probabilities=_probabilities(COUNT=0.6, NONE=0.4)),
        # A window that selected nothing votes for nothing: its NONE does not outvote the others.
        WindowAnswer((7, 8, 9), ((7, 0), (8, 0)), operator_probabilities=_probabilities(COUNT=0.7, SUM=0.3)),
    ]
    combined = combine(windows, number_of)
    assert (combined.operator, combined.value) == ("COUNT", 5.0)  # Not 2 + 1 + 2 counted per window and
    assert combined.cells == ((0, 0), (2, 0), (6, 0), (7, 0), (8, 0))  # then guessed: the cells themselves.
    assert combined.operator_probabilities["COUNT"] == pytest.approx((0.9 + 0.6 + 0.7) / 3)
    assert (combined.rows_read, combined.windows, combined.windows_with_cells, len(combined.cells)) == (10, 3, 3, 5)


def test_an_average_over_uneven_windows_is_the_total_over_the_count():
    """The mean of every orders cell: 47 / 10 = 4.7, whereas the mean of the windows' means
    ((5+3+8+1)/4, (4+2+7)/3, (6+9+2)/3) would be 4.47."""
    windows = [
        WindowAnswer(tuple(w), tuple((r, ORDERS_COLUMN) for r in w), operator_probabilities=_probabilities(AVERAGE=0.8))
        for w in split_rows(10, 4)
    ]
    combined = combine(windows, number_of)
    assert combined.operator == "AVERAGE" and combined.value == pytest.approx(4.7)
    assert combined.numbers_used == 10
    total = combine([dataclass_replace(w, _probabilities(SUM=0.9)) for w in windows], number_of)
    assert (total.operator, total.value) == ("SUM", 47.0)


def dataclass_replace(window, operator_probabilities):
    import dataclasses

    return dataclasses.replace(window, operator_probabilities=operator_probabilities)


def test_cells_without_a_number_are_left_out_of_a_sum_and_said_so():
    windows = [WindowAnswer((0, 1), ((0, 0), (0, 1), (1, 1)), operator_probabilities=_probabilities(SUM=0.9))]
    combined = combine(windows, number_of)
    assert (combined.value, combined.numbers_used) == (8.0, 2)
    assert combined.numbers_used == 2
    no_numbers = combine([WindowAnswer((0,), ((0, 0),), operator_probabilities=_probabilities(SUM=0.9))], number_of)
    assert no_numbers.value is None


def test_a_superlative_keeps_every_windows_winner_for_the_second_pass():
    """"which name has the most orders?": each window names its own best row; `combine` keeps them all
    (the second pass over their rows, where i wins, is window_reading's: tests/qa/test_window_reading.py)."""
    windows = [
        WindowAnswer((0, 1, 2, 3), ((2, 0),), {(2, 0): 0.7, (0, 0): 0.2}, _probabilities(NONE=0.95)),
        WindowAnswer((4, 5, 6), ((6, 0),), {(6, 0): 0.6}, _probabilities(NONE=0.9)),
        WindowAnswer((7, 8, 9), ((8, 0), (7, 0)), {(8, 0): 0.8, (7, 0): 0.55}, _probabilities(NONE=0.9)),
    ]
    combined = combine(windows, number_of)
    assert combined.operator == "NONE" and combined.value is None
    assert combined.cells == ((2, 0), (6, 0), (7, 0), (8, 0)) and combined.windows_with_cells == 3


def test_a_model_without_an_aggregation_head_answers_with_the_cells():
    windows = [WindowAnswer((0, 1), ((1, 0),)), WindowAnswer((2, 3), ())]
    combined = combine(windows, number_of)
    assert (combined.operator, combined.value, combined.operator_probabilities) == ("NONE", None, {})
    assert choose_operator([WindowAnswer((0,), (), operator_probabilities=_probabilities(COUNT=0.8))])[0] == "COUNT"


def test_overlapping_windows_and_cells_outside_a_window_are_refused():
    with pytest.raises(ValueError, match="windows 0 and 1 both read row 3"):
        combine([WindowAnswer((0, 1, 2, 3), ()), WindowAnswer((3, 4), ())], number_of)
    with pytest.raises(ValueError, match=r"outside the window's rows 0\.\.1"):
        WindowAnswer((0, 1), ((5, 0),))
    with pytest.raises(ValueError, match="no windows"):
        combine([], number_of)
