"""Synthetic questions: every answer checked against the table it was made from.

    | Pylon   | Height (m) | Year |
    |---------|------------|------|
    | Pylon A | 310        | 1931 |
    | Pylon B | 295        | 1931 |
    | Pylon C | 270        | 1967 |
"""

import math
import random

import pytest

from tapas_tf.data import interaction_io
from tapas_tf.data import synthetic_questions as sq
from tapas_tf.data.readers.common import ReaderError, make_table
from tapas_tf.data.readers.synthetic import TablesFile, interaction_id
from tapas_tf.features.example_features import QUESTION_ID_INTS_LENGTH
from tapas_tf.data.sql_execution import AVERAGE, COUNT, NONE, SUM, cell_number

PYLONS = make_table("pylons", ["Pylon", "Height (m)", "Year"],
                    [["Pylon A", "310", "1931"], ["Pylon B", "295", "1931"], ["Pylon C", "270", "1967"]])


def _cell(table, row, column) -> str:
    return table.rows[row].cells[column].text


def _questions(table, kinds, n=30, seed=0):
    return [q for conversation in sq.synthesize(table, random.Random(seed), n, kinds) for q in conversation]


def _random_table(rng: random.Random):
    """A table of 2-8 rows: a name column, a category column, numbers (some missing) and a blank header."""
    rows = rng.randint(2, 8)
    body = [[f"name {i}", rng.choice(["red", "blue", "green"]), str(rng.randint(0, 50)),
             rng.choice(["", "n/a", str(rng.randint(1, 9))]), "x"] for i in range(rows)]
    return make_table(f"t{rng.random()}", ["Name", "Colour", "Points", "Goals", ""], body)


def test_the_whole_column_questions_select_every_cell_of_one_column():
    questions = _questions(PYLONS, ("column",))
    assert {q.coordinates for q in questions} == {((0, c), (1, c), (2, c)) for c in range(3)}
    for q in questions:
        column = q.coordinates[0][1]
        assert q.aggregation == NONE and q.float_value is None
        assert q.answer_texts == tuple(_cell(PYLONS, r, column) for r in range(3))
        assert PYLONS.columns[column].text.lower() in q.text


def test_the_highest_and_lowest_name_the_one_row_that_holds_them():
    questions = _questions(PYLONS, ("argmax",))
    # Height: highest A (310), lowest C (270); Year: highest C (1967), lowest a tie (1931 twice): never asked.
    expected = {("height", True): (0, 0), ("height", False): (2, 0), ("year", True): (2, 0)}
    assert questions
    for q in questions:
        highest = any(word in q.text for word in ("highest", "most", "largest", "top"))
        number = "height" if "height" in q.text else "year"
        assert (number, highest) in expected, q.text
        assert q.coordinates == (expected[(number, highest)],) and q.aggregation == NONE
    assert {("year" in q.text) for q in questions} == {True, False}


def test_sums_averages_and_counts_equal_their_cells():
    questions = _questions(PYLONS, ("sum", "average", "count"), n=40)
    assert {q.aggregation for q in questions} == {SUM, AVERAGE, COUNT}
    assert any(q.aggregation == SUM and q.float_value == 875 for q in questions)  # 310 + 295 + 270
    for q in questions:
        numbers = [cell_number(_cell(PYLONS, r, c)) for r, c in q.coordinates]
        if q.aggregation == COUNT:
            assert q.float_value == len(q.coordinates)
        elif q.aggregation == SUM:
            assert len(numbers) >= 2 and q.float_value == sum(numbers)
        else:
            assert len(numbers) >= 2 and math.isclose(q.float_value, sum(numbers) / len(numbers))
        assert len({c for _, c in q.coordinates}) == 1  # One column, as the models select.


def test_a_condition_keeps_the_rows_it_names():
    questions = _questions(PYLONS, ("lookup",), n=40)
    equal = [q for q in questions if any(f"{w} 1931" in q.text for w in ("is", "year"))]
    assert equal
    for q in equal:
        assert {r for r, _ in q.coordinates} == {0, 1}, q.text  # Year 1931: A and B.
    greater = [q for q in questions if "than 1931" in q.text or "above 1931" in q.text]
    assert greater
    for q in greater:
        assert {r for r, _ in q.coordinates} == {2}, q.text  # After 1931: C only.


def test_every_answer_agrees_with_its_table_on_random_tables():
    rng = random.Random(7)
    for _ in range(40):
        table = _random_table(rng)
        for conversation in sq.synthesize(table, random.Random(rng.random()), 25):
            assert len(conversation) in (1, 2)
            for q in conversation:
                assert q.kind in sq.KINDS and q.text.endswith(("?", "."))
                assert 0 < len(q.coordinates) <= sq.MAX_ANSWER_CELLS
                assert all(0 <= r < len(table.rows) and 0 <= c < 4 for r, c in q.coordinates)  # Never "".
                if q.aggregation == NONE:
                    assert q.answer_texts == tuple(_cell(table, r, c) for r, c in q.coordinates)
                    assert all(q.answer_texts)
                if q.aggregation in (SUM, AVERAGE):
                    assert all(cell_number(_cell(table, r, c)) is not None for r, c in q.coordinates)
            if len(conversation) == 2:
                first, second = conversation
                assert {r for r, _ in second.coordinates} <= {r for r, _ in first.coordinates}


def test_the_same_seed_gives_the_same_questions():
    a = sq.synthesize(PYLONS, random.Random(sq.seed_of("pylons", 1)), 20)
    b = sq.synthesize(PYLONS, random.Random(sq.seed_of("pylons", 1)), 20)
    c = sq.synthesize(PYLONS, random.Random(sq.seed_of("pylons", 2)), 20)
    assert a == b and a != c
    assert len({tuple(q.text for q in conv) for conv in a}) == len(a)  # No question twice.


def test_tables_with_nothing_to_ask_give_no_questions():
    assert sq.synthesize(make_table("empty", ["A"], []), random.Random(0), 5) == []
    assert sq.synthesize(make_table("unnamed", ["", ""], [["1", "2"], ["3", "4"]]), random.Random(0), 5) == []
    with pytest.raises(ValueError, match="unknown kinds of synthetic question"):
        sq.synthesize(PYLONS, random.Random(0), 5, kinds=("lookup", "median"))


def test_an_interaction_carries_the_gold_cells_operator_and_number():
    question = sq.SyntheticQuestion("count", "how many pylon?", ((0, 0), (1, 0)), COUNT, ("2",), 2.0)
    interaction = sq.to_interaction(PYLONS, [question], "pylons-synthetic-0")
    (q,) = interaction.questions
    assert (interaction.id, q.id, q.original_text, q.text) == (
        "pylons-synthetic-0", "pylons-synthetic-0_0", "how many pylon?", "how many pylon?")
    assert q.answer.is_valid and q.answer.aggregation_function == COUNT and q.answer.float_value == 2.0
    assert [(c.row_index, c.column_index) for c in q.answer.answer_coordinates] == [(0, 0), (1, 0)]
    assert list(q.answer.answer_texts) == ["2"] and interaction.table == PYLONS
    assert sq.describe(question) == "COUNT of (0, 0), (1, 0) = 2"


def test_the_reader_accounts_for_every_record(tmp_path):
    path = str(tmp_path / "tables.tfrecord")
    records = []
    for index, table in enumerate([PYLONS, PYLONS, make_table("unnamed", ["", ""], [["1", "2"]])]):
        interaction = sq.to_interaction(table, [], f"source-{index}")
        records.append(interaction)
    interaction_io.write_interactions(path, records)

    reader = TablesFile(path, questions_per_table=6)
    reader.check_header()
    items = list(reader.interactions())
    errors = [item for item in items if isinstance(item, ReaderError)]
    interactions = [item for item in items if not isinstance(item, ReaderError)]
    assert [(e.reason, e.lines, e.question_id) for e in errors] == [
        ("duplicate_table", "2", None), ("no_synthetic_question", "3", None)]
    assert "was used at record 1" in str(errors[0])
    assert (reader.lines_read, reader.header_lines, reader.question_lines) == (3, 0, 1)
    assert reader.lines_read == reader.header_lines + reader.question_lines + sum(e.num_lines for e in errors)
    assert reader.questions_read == sum(len(i.questions) for i in interactions) >= 6
    assert len(interactions) == 6 and all(i.table == PYLONS for i in interactions)
    assert sum(reader.reader_counts().values()) == reader.questions_read
    assert [i.id for i in interactions] == [f"pylons-synthetic-{k}" for k in range(6)]


def test_the_reader_refuses_what_is_not_an_interactions_file(tmp_path):
    with pytest.raises(ReaderError, match="unknown interaction file type"):
        TablesFile(str(tmp_path / "tables.csv")).check_header()
    with pytest.raises(ReaderError, match="No such file"):
        TablesFile(str(tmp_path / "missing.tfrecord")).check_header()
    with pytest.raises(ValueError, match="questions_per_table"):
        TablesFile(str(tmp_path / "t.tfrecord"), questions_per_table=0)


def test_a_long_table_id_gets_a_short_hashed_interaction_id():
    page = "http://en.wikipedia.org/wiki/Diving_at_the_1984_Summer_Olympics_-_Women's_3_metre_springboard_infobox0"
    assert interaction_id("csv/203-csv/1.csv", 3) == "csv/203-csv/1.csv-synthetic-3"
    long_id = interaction_id(page, 12)
    assert long_id.startswith("synthetic-") and long_id.endswith("-12") and long_id == interaction_id(page, 12)
    assert long_id != interaction_id(page + "x", 12)
    assert len(long_id + "_1") <= QUESTION_ID_INTS_LENGTH  # The question ids the examples carry fit.
