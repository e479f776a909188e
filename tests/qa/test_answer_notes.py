"""Notes on answers whose computation does not fit the question, on hand-made results: the docs'
medal table answered with COUNT where a total is asked, an average answered with COUNT, a
difference TAPAS cannot compute, a count as a follow-up, and a model without an aggregation head."""

from tapas_tf.qa.answer_notes import answer_notes, total_rows
from tapas_tf.qa.ask_results import AskResult, SelectedCell


def _result(question, operator, cells, value=None):
    """An AskResult with `cells` [(text, number)] in column 1, one row each."""
    selected = tuple(SelectedCell(row, 1, "amount", text, 0.9, number)
                     for row, (text, number) in enumerate(cells))
    numbers = tuple(n for _, n in cells if n is not None) if operator in ("SUM", "AVERAGE") else ()
    probabilities = {"NONE": 0.1, "SUM": 0.1, "AVERAGE": 0.1, "COUNT": 0.1}
    probabilities[operator] = 0.7
    return AskResult(question, selected, operator, probabilities, value, numbers, {}, (), (), (), 64)


GOLD = [("2", 2.0), ("1", 1.0), ("1", 1.0), ("0", 0.0), ("3", 3.0), ("1", 1.0), ("1", 1.0), ("1", 1.0),
        ("1", 1.0), ("1", 1.0), ("1", 1.0)]  # 11 cells adding up to 13.


def test_a_total_answered_with_count_gives_the_sum_of_the_same_cells():
    result = _result("how many gold medals in total?", "COUNT", GOLD, 11.0)
    assert answer_notes(result, has_aggregation_head=True, follow_up=False) == (
        "This question asks for a total: the model counted the 11 selected cells (COUNT = 11); if the total "
        "of their values is meant, their values add up to 13.",)


def test_an_average_answered_with_count_gives_their_average():
    areas = [("10", 10.0), ("20", 20.0), ("30", 30.0), ("45", 45.0)]
    result = _result("what is the average area?", "COUNT", areas, 4.0)
    assert answer_notes(result, True, False) == (
        "This question asks for an average, but the model counted the 4 selected cells (COUNT) instead; "
        "their values average 26.25.",)


def test_an_operator_that_fits_has_no_note():
    assert answer_notes(_result("what is the total population?", "SUM", [("5", 5.0), ("7", 7.0)], 12.0),
                        True, False) == ()
    assert answer_notes(_result("what is the average area?", "AVERAGE", [("5", 5.0), ("7", 7.0)], 6.0),
                        True, False) == ()
    assert answer_notes(_result("how many pylons?", "COUNT", [("a", None), ("b", None)], 2.0),
                        True, False) == ()
    # One cell holding the number asked for is a lookup of the total, not a mistake.
    assert answer_notes(_result("what is the total population?", "NONE", [("12", 12.0)]), True, False) == ()
    assert answer_notes(_result("which pylon is the tallest?", "NONE", [("a", None)]), True, False) == ()
    # Counting names: no numbers to add, so nothing to say.
    assert answer_notes(_result("how many towns in total?", "COUNT", [("a", None), ("b", None)], 2.0),
                        True, False) == ()


def test_a_count_answered_with_cells_says_how_many_there_are():
    result = _result("how many pylons are in austria?", "NONE", [("a", None), ("b", None), ("c", None)])
    assert answer_notes(result, True, False) == (
        "This question asks how many, but the model selected 3 cells without counting them: there are 3.",)


def test_a_difference_is_not_computed_and_the_note_says_what_the_cells_hold():
    result = _result("what is the difference in height between a and b?", "NONE", [("113.6 m", 113.6),
                                                                                     ("107 m", 107.0)])
    assert answer_notes(result, True, False) == (
        "This question asks for a difference, a ratio or a comparison, which TAPAS cannot compute: it can "
        "only select cells and count, add or average them. The two selected cells hold 113.6 and 107: they "
        "differ by 6.6, and one is 1.061682 times the other.",)
    summed = _result("how many more points did a score than b?", "SUM", [("40", 40.0), ("30", 30.0)], 70.0)
    assert "the SUM shown is not the answer asked for" in answer_notes(summed, True, False)[0]
    names = _result("what is the difference between a and b?", "NONE", [("x", None)])
    assert answer_notes(names, True, False)[0].endswith("The answer shows the cells it found; compute the "
                                                        "rest from them.")


def test_a_count_as_a_follow_up_says_how_to_count():
    result = _result("how many of them are in europe?", "NONE", [("a", None), ("b", None)])
    (note,) = answer_notes(result, has_aggregation_head=False, follow_up=True)
    assert note.startswith("Counting, totals and averages are computed only for a first question, not a "
                           "follow-up: this answer shows cells. To compute it, start a new conversation")
    assert note.endswith("There are 2 selected cells.")


def test_a_model_without_an_aggregation_head_says_so_in_plain_words():
    (note,) = answer_notes(_result("what is the total population?", "NONE", [("5", 5.0), ("7", 7.0)]),
                           has_aggregation_head=False, follow_up=False)
    assert note.startswith("This model can only select cells, not count, add or average them")
    assert note.endswith("Of the 2 selected cells, their values add up to 12.")
    assert "aggregation head" not in note  # No jargon.


def test_a_table_total_row_among_the_selected_cells_is_pointed_out():
    assert total_rows([["1", "urs", "4"], ["Total", "Total", "13"], ["2", "  Grand   TOTAL ", "1"],
                       ["3", "totalizer", "2"]]) == (1, 2)
    cells = [("4", 4.0), ("2", 2.0), ("13", 13.0)]
    result = _result("how many gold medals in total?", "COUNT", cells, 3.0)
    notes = answer_notes(result, True, False, table_total_rows={2})
    assert notes == (
        "This question asks for a total: the model counted the 3 selected cells (COUNT = 3); if the total of "
        "their values is meant, their values add up to 19.",
        "The selected cells include the table's own total row (row 2), whose amount is 13: that may be the "
        "answer; the other 2 selected cells add up to 6.")
    counted = _result("how many nations won gold?", "COUNT", [("urs", None), ("total", None)], 2.0)
    assert answer_notes(counted, True, False, {1})[-1].endswith("without it, 1 selected cell remains.")
    assert answer_notes(result, True, False, table_total_rows=set())[1:] == ()
