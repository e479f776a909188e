"""Synthetic and counterfactual statements on a hand-checked table.

    name  | team | points | games
    alice | red  | 30     | 10
    bob   | blue | 25     | 12
    carol | red  | 40     | 9
    total | -    | 95     | 31      (a total row: never counted, never a winner)

Each template's true statement must be true of the table and its false twin false, for every seed.
"""

import random

import pytest

from tapas_tf.data import synthetic_statements as synthetic
from tapas_tf.data.synthetic_statements import (ENTAILED, REFUTED, StatementTable, counterfactual,
                                                format_number, parse_number, synthetic_statements)

HEADER = ["Name", "Team", "Points", "Games"]
ROWS = [["alice", "red", "30", "10"], ["bob", "blue", "25", "12"], ["carol", "red", "40", "9"],
        ["total", "-", "95", "31"]]
SEEDS = range(40)


@pytest.fixture
def table():
    return StatementTable.from_rows(HEADER, ROWS)


def test_numbers_are_whole_cells():
    assert parse_number("1,234") == 1234.0 and parse_number("-3.5") == -3.5 and parse_number(" 7 ") == 7.0
    assert parse_number("12 km") is None and parse_number("1,23") is None and parse_number("2-1") is None
    assert (format_number(95.0), format_number(31.666666), format_number(2.5)) == ("95", "31.67", "2.5")


def test_columns_and_key(table):
    assert table.header == ["name", "team", "points", "games"]
    assert table.numeric_columns() == [2, 3]  # "-" is an empty cell, not text.
    assert table.key_column() == 0


def _pairs(template, table):
    for seed in SEEDS:
        pair = template(table, random.Random(seed))
        if pair is not None:
            true, false = pair
            assert (true.label, false.label) == (ENTAILED, REFUTED) and true.text != false.text
            yield true.text, false.text


def test_lookups_state_the_row_value_and_another_value_of_the_column(table):
    by_name = {row[0]: row for row in table.rows}
    for true, false in _pairs(synthetic._lookup, table):
        names = [name for name in by_name if f" {name} " in f" {true} "]
        assert len(names) == 1, true
        column = next(c for c in (1, 2, 3) if f" {table.header[c]} " in f" {true} ")
        assert true.endswith(" " + by_name[names[0]][column])
        assert not false.endswith(" " + by_name[names[0]][column])


def test_counts_count_the_rows(table):
    pairs = list(_pairs(synthetic._count, table))
    assert pairs  # "red" twice in team is the only repeated value.
    for true, false in pairs:
        assert "red" in true and ("two" in true.split() or "2" in true.split()), true
        assert "two" not in false.split() and "2" not in false.split(), false


def test_superlatives_name_the_winner_and_never_the_total_row(table):
    winners = {("highest", "points"): "carol", ("lowest", "points"): "bob",
               ("highest", "games"): "bob", ("lowest", "games"): "carol"}
    seen = set()
    for true, false in _pairs(synthetic._superlative, table):
        (word, column), = [(w, c) for w, c in winners if f"{w} {c}" in true]
        assert true.split()[0] == winners[(word, column)] or true.endswith(winners[(word, column)]), true
        assert "total" not in false
        seen.add((word, column))
    assert len(seen) >= 3


def test_comparisons_put_the_higher_first_in_the_true_statement(table):
    points = {"alice": 30, "bob": 25, "carol": 40}
    games = {"alice": 10, "bob": 12, "carol": 9}
    for true, false in _pairs(synthetic._comparison, table):
        values = points if " points " in true else games
        first, second = true.split()[0], true.split()[-1]
        assert values[first] > values[second], true
        assert false.split()[0] == second and false.split()[-1] == first


def test_totals_and_averages_leave_the_total_row_out(table):
    right = {"95", "31", "31.67", "10.33"}  # points and games: sums 95 and 31, means 31.67 and 10.33
    for true, false in _pairs(synthetic._aggregate, table):
        assert true.split()[-1] in right or any(f" {v} " in f" {true} " for v in right), true
        assert not any(f" {v} " in f" {false} " for v in right), false


def test_value_superlatives(table):
    for true, false in _pairs(synthetic._value_superlative, table):
        expected = {"highest points": "40", "lowest points": "25", "highest games": "12", "lowest games": "9"}
        (phrase, value), = [(p, v) for p, v in expected.items() if p in true]
        assert value in true.split() and value not in false.split(), (true, false)


def test_synthetic_statements_come_in_pairs_without_repeats(table):
    statements = synthetic_statements(table, random.Random(3), pairs=6)
    assert len(statements) == 12
    assert [s.label for s in statements] == [ENTAILED, REFUTED] * 6
    assert len({s.text for s in statements}) == 12
    assert synthetic_statements(table, random.Random(3), pairs=6) == statements  # Seeded.


def test_a_table_without_numbers_or_key_gives_what_fits():
    table = StatementTable.from_rows(["a", "b"], [["x", "y"], ["x", "z"]])
    kinds = {s.kind for s in synthetic_statements(table, random.Random(0), pairs=4)}
    assert kinds == {"count"}  # No key column (x twice), no numeric column: only counting fits.


def test_counterfactual_swaps_the_longest_mentioned_cell_within_its_column(table):
    twins = {counterfactual(table, "Alice scored 30 points for red", random.Random(seed)).text
             for seed in SEEDS}
    assert twins == {"bob scored 30 points for red", "carol scored 30 points for red"}
    # Every name is mentioned, and a total row's cells are never swapped in.
    assert counterfactual(table, "carol and bob both beat alice", random.Random(0)) is None
    assert counterfactual(table, "alice scored 30", random.Random(0)).label == REFUTED
    assert counterfactual(table, "nobody here is named", random.Random(0)) is None
