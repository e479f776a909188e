"""Arithmetic tapas-tf computes from the selected cells (tapas_tf/qa/arithmetic.py), by hand:

    row  name      height    opened        votes
    0    torre a   113.6 m   May 3, 2000   350
    1    torre b   107 m     May 13, 2000  1,400
    2    torre c   98 m      1990–1998     0
"""

import math

import numpy as np
import pandas as pd
import pytest

from tapas_tf.inference.decoding import DecodingRule
from tapas_tf.qa.arithmetic import MINUS, asked, compute
from tapas_tf.qa.ask_results import SelectedCell
from tapas_tf.qa.table_qa import TableQA
from tests.qa.test_window_reading import ScriptedRunner, make_encoder, vocab  # noqa: F401 (a fixture)

ROWS = [["torre a", "113.6 m", "May 3, 2000", "350"],
        ["torre b", "107 m", "May 13, 2000", "1,400"],
        ["torre c", "98 m", "1990–1998", "0"]]
COLUMNS = ["name", "height", "opened", "votes"]
NUMBERS = {"113.6 m": 113.6, "107 m": 107.0, "98 m": 98.0, "350": 350.0, "1,400": 1400.0, "0": 0.0}


def cell(row, column):
    text = ROWS[row][column]
    return SelectedCell(row, column, COLUMNS[column], text, 0.9, NUMBERS.get(text))


def row_texts(row):
    return ROWS[row]


@pytest.mark.parametrize("question, kind", [
    ("how much taller is torre a than torre b?", "difference"),
    ("what is the difference in height between torre a and torre b?", "difference"),
    ("by how many votes did torre b win?", "difference"),
    ("how many more votes did torre b get than torre a?", "difference"),
    ("how many times as many votes did torre b get as torre a?", "ratio"),
    ("what percentage of the votes did torre a get of torre b's?", "percentage"),
    ("is torre a taller than torre b?", "comparison"),
    ("was torre b opened earlier than torre a?", "comparison"),
    ("how many days passed between the openings of torre a and torre b?", "date_span"),
    ("which tower is the tallest?", None),
    ("how many towers are there?", None),
    ("how many towers are taller than 100 m?", None),
    ("how many boats costed less than £20m to build?", None),   # A count with a condition.
    ("how many times did torre a win?", None),                   # A count, not a ratio.
    ("how many times larger is torre b's vote than torre a's?", "ratio"),
])
def test_what_the_words_ask_for(question, kind):
    assert asked(question) == kind


def test_a_difference_keeps_the_shared_unit_and_shows_the_expression():
    computed = compute("how much taller is torre a than torre b?", [cell(0, 1), cell(1, 1)], row_texts)
    assert computed.answer == "6.6 m" and computed.value == pytest.approx(6.6)
    assert computed.expression == f"113.6 m {MINUS} 107 m = 6.6 m"
    assert computed.note().startswith("tapas-tf computed this difference from the 2 selected cells, not the model")


def test_a_difference_is_the_larger_minus_the_smaller_whichever_is_named_first():
    computed = compute("how many more votes did torre a get than torre b?", [cell(0, 3), cell(1, 3)], row_texts)
    assert computed.value == 1050 and computed.answer == "1,050"  # No unit around the numbers.


def test_a_ratio_follows_the_order_the_question_names_the_rows():
    computed = compute("how many times as many votes did torre b get as torre a?", [cell(0, 3), cell(1, 3)],
                       row_texts)
    assert computed.value == 4 and computed.expression == "1,400 / 350 = 4"
    assert compute("what is the ratio of votes of torre c to torre a?", [cell(0, 3), cell(2, 3)],
                   row_texts).value == 0
    assert compute("what is the ratio of votes of torre a to torre c?", [cell(0, 3), cell(2, 3)], row_texts) is None


def test_a_percentage_is_the_part_of_the_whole():
    computed = compute("what percentage of the votes did torre a get of torre b's?", [cell(0, 3), cell(1, 3)],
                       row_texts)
    assert computed.answer == "25%" and computed.expression == "350 / 1,400 × 100 = 25%"


@pytest.mark.parametrize("question, answer, expression", [
    ("is torre a taller than torre b?", "yes", "113.6 m > 107 m, so taller: yes"),
    ("is torre b taller than torre a?", "no", "107 m < 113.6 m, so taller: no"),
    ("was torre a shorter than torre b?", "no", "113.6 m > 107 m, so shorter: no"),
])
def test_a_yes_or_no_comparison_reads_a_and_b_from_the_question(question, answer, expression):
    computed = compute(question, [cell(0, 1), cell(1, 1)], row_texts)
    assert (computed.kind, computed.answer, computed.expression, computed.value) == (
        "comparison", answer, expression, None)


def test_date_spans_in_days_and_years():
    days = compute("how many days passed between the openings of torre a and torre b?", [cell(0, 2), cell(1, 2)],
                   row_texts)
    assert (days.value, days.answer) == (10, "10 days")
    assert days.expression == f"2000-05-13 {MINUS} 2000-05-03 = 10 days"
    years = compute("how many years were there between 1990 and the opening of torre a?", [cell(2, 2)], row_texts)
    assert (years.value, years.answer) == (8, "8 years")  # One cell holding both ends.


def test_the_margin_within_one_score_cell_and_no_guess_between_two_numbers():
    score = SelectedCell(0, 1, "score", "4–8", 0.9, 4.0)
    computed = compute("what was the difference in score in the final?", [score])
    assert (computed.value, computed.expression) == (4, f"8 {MINUS} 4 = 4 (the two numbers of '4–8')")
    feet = SelectedCell(0, 1, "gauge", "2 ft (610 mm)", 0.9, 2.0)
    assert compute("what is the difference in gauge between a and b?", [feet, cell(1, 1)], row_texts) is None


def test_one_cell_and_a_number_in_the_question():
    computed = compute("how many more votes than 100 did torre a get?", [cell(0, 3)], row_texts)
    assert computed.value == 250 and computed.cells == 1


def test_the_highest_and_lowest_of_more_cells():
    computed = compute("what is the difference between the highest and lowest height?",
                       [cell(0, 1), cell(1, 1), cell(2, 1)], row_texts)
    assert computed.value == pytest.approx(15.6) and computed.answer == "15.6 m"


@pytest.mark.parametrize("question, cells", [
    ("which tower is the tallest?", [(0, 1), (1, 1)]),                      # Not asked for.
    ("how much taller is torre a than torre b?", [(0, 1)]),                 # One number, none in the question.
    ("how much taller is torre a than the others?", [(0, 1), (1, 1), (2, 1)]),  # Three, not both ends.
    ("how much taller is torre a than torre b?", [(0, 0), (1, 0)]),         # Cells without numbers.
    ("how many days between the openings?", [(0, 0), (1, 0)]),              # Cells without dates.
])
def test_nothing_is_computed_without_what_it_needs(question, cells):
    assert compute(question, [cell(r, c) for r, c in cells], row_texts) is None


def test_the_answer_is_the_computed_value_with_its_expression_and_note(vocab):  # noqa: F811
    """Through TableQA: the model selects the two heights; the answer is tapas-tf's difference."""
    encoder = make_encoder(vocab, max_seq_length=128)
    table = pd.DataFrame(ROWS, columns=COLUMNS)
    runner = ScriptedRunner(lambda f: (f["column_ids"] == 2) & np.isin(f["row_ids"], [1, 2]))
    qa = TableQA(runner, encoder, DecodingRule(), name="scripted")
    result = qa.answer(table, "how much taller is torre a than torre b?")
    assert result.coordinates == ((0, 1), (1, 1))
    assert result.answers == ("6.6 m",) and result.summary == f"6.6 m (computed: 113.6 m {MINUS} 107 m = 6.6 m)"
    assert result.notes[0].startswith("tapas-tf computed this difference")
    assert not any("which TAPAS cannot compute" in note for note in result.notes)
    assert result.to_dict()["computed"]["expression"] == f"113.6 m {MINUS} 107 m = 6.6 m"
    assert result.to_dict()["answer"] == "6.6 m"
    plain = qa.answer(table, "which is taller, torre a or torre b?")
    assert plain.computed is None and plain.answers == ("113.6 m", "107 m")
    assert not math.isnan(plain.confidence)
