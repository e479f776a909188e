"""The WikiSQL executor and reader, on fixtures written in WikiSQL's release format.

Every expected value is computed by hand from `HEADER` / `ROWS` below.
"""

import json

import pytest

from tapas_tf.data import sql_execution as sx
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers import wikisql
from tapas_tf.data.readers.common import ReaderError

HEADER = ["State", "Colour", "Population", "Area", "Notes"]
TYPES = ["text", "text", "text", "real", "text"]
ROWS = [
    ["South Australia", "Red", "1,234", 9.0, "12.5"],
    ["Victoria", "Blue", "2,000", 12.5, "n/a"],
    ["south  australia", "Green", "500", 3.0, "7"],
    ["Queensland", "Blue", "1,234", 20.0, "abc"],
]
STATE, COLOUR, POPULATION, AREA, NOTES = range(5)
NO_AGG, MAX, MIN, COUNT, SUM, AVG = range(6)
EQ, GT, LT = range(3)


def run(sel, agg, conds=()):
    return sx.execute_sql(HEADER, TYPES, ROWS, sel, agg, [list(c) for c in conds])


# ---- the executor --------------------------------------------------------------------------


def test_aggregation_ids_are_tapas_enum():
    assert (sx.NONE, sx.SUM, sx.AVERAGE, sx.COUNT) == (
        interaction_pb2.Answer.NONE, interaction_pb2.Answer.SUM,
        interaction_pb2.Answer.AVERAGE, interaction_pb2.Answer.COUNT)


def test_select_with_case_insensitive_equality():
    result = run(COLOUR, NO_AGG, [(STATE, EQ, "SOUTH AUSTRALIA")])
    assert result.values == ("Red", "Green")  # "south  australia": case and white space fold.
    assert result.coordinates == ((0, COLOUR), (2, COLOUR))
    assert result.aggregation_function == sx.NONE
    assert result.float_value is None
    assert result.sql_aggregation == ""
    assert result.matched_rows == (0, 2)


def test_max_over_numbers_stored_as_text():
    result = run(POPULATION, MAX)
    assert result.values == ("2,000",)
    assert result.coordinates == ((1, POPULATION),)
    assert result.float_value == 2000.0
    assert result.aggregation_function == sx.NONE
    assert result.sql_aggregation == "MAX"


def test_min_selects_every_cell_holding_the_minimum():
    result = run(POPULATION, MIN, [(AREA, GT, 5)])  # Rows 0, 1, 3: 1,234 / 2,000 / 1,234.
    assert result.values == ("1,234",)
    assert result.coordinates == ((0, POPULATION), (3, POPULATION))
    assert result.float_value == 1234.0
    assert result.aggregation_function == sx.NONE
    assert run(POPULATION, MIN).coordinates == ((2, POPULATION),)
    assert run(POPULATION, MIN).values == ("500",)


def test_count_counts_rows():
    result = run(STATE, COUNT, [(COLOUR, EQ, "blue")])
    assert result.values == ("2",)
    assert result.float_value == 2.0
    assert result.coordinates == ((1, STATE), (3, STATE))
    assert result.aggregation_function == sx.COUNT
    # COUNT counts rows whatever the cells hold: Notes has two non-numeric cells.
    assert run(NOTES, COUNT).float_value == 4.0


def test_sum_of_numbers_stored_as_text():
    result = run(POPULATION, SUM)
    assert result.values == ("4968",)  # 1234 + 2000 + 500 + 1234
    assert result.float_value == 4968.0
    assert result.coordinates == tuple((r, POPULATION) for r in range(4))
    assert result.aggregation_function == sx.SUM
    assert result.skipped_non_numeric == 0


def test_sum_skips_and_counts_non_numeric_cells():
    result = run(NOTES, SUM)  # "12.5" + "7"; "n/a" and "abc" skipped.
    assert result.values == ("19.5",)
    assert result.float_value == 19.5
    assert result.coordinates == ((0, NOTES), (2, NOTES))
    assert result.skipped_non_numeric == 2


def test_average():
    result = run(AREA, AVG)
    assert result.values == ("11.125",)  # (9 + 12.5 + 3 + 20) / 4
    assert result.float_value == 11.125
    assert result.aggregation_function == sx.AVERAGE
    filtered = run(AREA, AVG, [(STATE, EQ, "south australia")])
    assert filtered.values == ("6",)  # (9 + 3) / 2
    assert filtered.coordinates == ((0, AREA), (2, AREA))
    assert run(NOTES, AVG).float_value == 9.75  # (12.5 + 7) / 2, the non-numeric cells skipped.


def test_greater_than_parses_text_numbers():
    expected = ("South Australia", "Victoria", "Queensland")  # 1,234 / 2,000 / 1,234 > 1000
    assert run(STATE, NO_AGG, [(POPULATION, GT, 1000)]).values == expected
    assert run(STATE, NO_AGG, [(POPULATION, GT, "1,000")]).values == expected
    assert run(STATE, NO_AGG, [(POPULATION, GT, 1234)]).values == ("Victoria",)


def test_less_than_and_non_numeric_cells():
    assert run(COLOUR, NO_AGG, [(AREA, LT, 10)]).values == ("Red", "Green")
    # "12.5" is not < 10; "n/a" and "abc" never satisfy < (nor >).
    assert run(STATE, NO_AGG, [(NOTES, LT, 10)]).matched_rows == (2,)
    assert run(STATE, NO_AGG, [(NOTES, GT, 0)]).matched_rows == (0, 2)
    # A non-numeric value matches no row.
    assert run(STATE, NO_AGG, [(POPULATION, GT, "many")]).matched_rows == ()


def test_equality_is_numeric_when_both_sides_are_numbers():
    assert run(STATE, NO_AGG, [(AREA, EQ, "9")]).values == ("South Australia",)  # 9.0
    assert run(STATE, NO_AGG, [(POPULATION, EQ, 1234)]).matched_rows == (0, 3)  # "1,234"
    assert run(STATE, NO_AGG, [(POPULATION, EQ, "1234.00")]).matched_rows == (0, 3)
    assert run(STATE, NO_AGG, [(NOTES, EQ, "ABC")]).matched_rows == (3,)  # texts, folded


def test_multiple_conditions_are_anded():
    assert run(STATE, NO_AGG, [(COLOUR, EQ, "Blue"), (AREA, GT, 15)]).values == ("Queensland",)
    result = run(COLOUR, NO_AGG, [(STATE, EQ, "south australia"), (AREA, LT, 5), (POPULATION, GT, 100)])
    assert result.values == ("Green",)
    assert result.coordinates == ((2, COLOUR),)


def test_no_matching_row():
    conds = [(STATE, EQ, "Tasmania")]
    none = run(COLOUR, NO_AGG, conds)
    assert (none.values, none.coordinates, none.float_value) == ((), (), None)
    count = run(COLOUR, COUNT, conds)
    assert (count.values, count.coordinates, count.float_value) == (("0",), (), 0.0)
    for agg in (SUM, AVG, MAX, MIN):
        empty = run(AREA, agg, conds)
        assert (empty.values, empty.coordinates, empty.float_value) == ((), (), None)


def test_cell_text_and_format_number():
    assert [sx.cell_text(v) for v in (9.0, 12.5, 7, None, "x")] == ["9", "12.5", "7", "", "x"]
    assert sx.format_number(7 / 3) == "2.33333333333"
    assert sx.format_number(0.1 + 0.2) == "0.3"


@pytest.mark.parametrize("sel, agg, conds, reason", [
    (5, NO_AGG, [], "bad_column"),
    (-1, NO_AGG, [], "bad_column"),
    ("1", NO_AGG, [], "bad_column"),
    (0, 6, [], "bad_aggregation"),
    (0, None, [], "bad_aggregation"),
    (0, NO_AGG, [[9, EQ, "x"]], "bad_column"),
    (0, NO_AGG, [[0, 3, "x"]], "bad_operator"),  # OP is not supported.
    (0, NO_AGG, [[0, 4, "x"]], "bad_operator"),
    (0, NO_AGG, [[0, EQ]], "bad_condition"),
    (0, NO_AGG, [[0, EQ, ["x"]]], "bad_condition"),
    (0, NO_AGG, None, "bad_condition"),
])
def test_bad_queries(sel, agg, conds, reason):
    with pytest.raises(sx.SqlError) as info:
        sx.execute_sql(HEADER, TYPES, ROWS, sel, agg, conds)
    assert info.value.reason == reason


# ---- the reader ----------------------------------------------------------------------------

TABLE = {"id": "1-1", "header": HEADER, "types": TYPES, "rows": ROWS, "page_title": "States",
         "section_title": "List", "caption": "Australian states", "name": "table_1_1"}


def q(table_id="1-1", sel=STATE, agg=NO_AGG, conds=(), **extra):
    line = {"phase": 1, "table_id": table_id, "question": f"question about {table_id}?",
            "sql": {"sel": sel, "agg": agg, "conds": [list(c) for c in conds]}}
    line.update(extra)
    return json.dumps(line)


def write(tmp_path, question_lines, table_lines=None):
    tables = tmp_path / "dev.tables.jsonl"
    tables.write_text("\n".join(table_lines or [json.dumps(TABLE)]) + "\n", encoding="utf-8")
    questions = tmp_path / "dev.jsonl"
    questions.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n"
                                   for line in question_lines))
    return str(questions), str(tables)


def read_all(reader):
    items = list(reader.interactions())
    return ([i for i in items if isinstance(i, interaction_pb2.Interaction)],
            [i for i in items if isinstance(i, ReaderError)])


def test_reader_builds_interactions(tmp_path):
    questions, tables = write(tmp_path, [
        q(sel=COLOUR, conds=[(STATE, EQ, "SOUTH AUSTRALIA")]),
        q(sel=POPULATION, agg=SUM),
    ])
    reader = wikisql.WikiSqlFile(questions, tables, supervised=True)
    interactions, errors = read_all(reader)
    assert errors == []
    first, second = interactions
    assert (first.id, first.questions[0].id) == ("dev-0", "dev-0_0")
    assert (second.id, second.questions[0].id) == ("dev-1", "dev-1_0")
    assert first.questions[0].original_text == "question about 1-1?"
    table = first.table
    assert table.table_id == "1-1"
    assert [c.text for c in table.columns] == HEADER
    assert [c.text for c in table.rows[0].cells] == ["South Australia", "Red", "1,234", "9", "12.5"]
    assert [c.text for c in table.rows[1].cells][3] == "12.5"
    assert (table.document_title, table.context_heading, table.caption) == (
        "States", "List", "Australian states")
    answer = first.questions[0].answer
    assert list(answer.answer_texts) == ["Red", "Green"]
    assert [(c.row_index, c.column_index) for c in answer.answer_coordinates] == [(0, 1), (2, 1)]
    assert not answer.HasField("float_value")
    summed = second.questions[0].answer
    assert list(summed.answer_texts) == ["4968"]
    assert summed.float_value == 4968.0
    assert summed.aggregation_function == interaction_pb2.Answer.SUM
    assert len(summed.answer_coordinates) == 4


def test_weak_mode_leaves_the_aggregation_to_learn(tmp_path):
    questions, tables = write(tmp_path, [q(sel=STATE, agg=COUNT, conds=[(COLOUR, EQ, "blue")]),
                                         q(sel=STATE, agg=COUNT, conds=[(STATE, EQ, "Tasmania")])])
    (counted, empty), errors = read_all(wikisql.WikiSqlFile(questions, tables, supervised=False))
    assert errors == []
    answer = counted.questions[0].answer
    assert not answer.HasField("aggregation_function")
    assert list(answer.answer_texts) == ["2"] and answer.float_value == 2.0
    assert [(c.row_index, c.column_index) for c in answer.answer_coordinates] == [(1, 0), (3, 0)]
    assert empty.questions[0].answer.HasField("float_value")
    assert empty.questions[0].answer.float_value == 0.0
    assert list(empty.questions[0].answer.answer_texts) == ["0"]
    assert "aggregation_function" not in wikisql.WEAK_ANSWER_FIELDS
    supervised, _ = read_all(wikisql.WikiSqlFile(questions, tables, supervised=True))
    assert supervised[0].questions[0].answer.aggregation_function == interaction_pb2.Answer.COUNT


BAD_LINES = [
    (b'{"table_id": "1-1", "question": "x", ', "malformed_line", False),  # invalid JSON
    (b"[1, 2, 3]", "malformed_line", False),  # not an object
    (q().replace('"question"', '"query"').encode(), "malformed_line", False),  # missing field
    (b"", "blank_line", False),
    (b'{"question": "caf\xe9"}', "invalid_utf8", False),
    (q(table_id="9-9").encode(), "missing_table", True),  # unknown table id
    (q(sel=5).encode(), "bad_column", True),  # selected column out of range
    (q(conds=[(7, EQ, "x")]).encode(), "bad_column", True),  # condition column out of range
    (q(agg=6).encode(), "bad_aggregation", True),
    (q(conds=[(0, 3, "x")]).encode(), "bad_operator", True),  # "OP"
    (q(conds=[(0, 9, "x")]).encode(), "bad_operator", True),
    (q(table_id="2-2").encode(), "bad_table", True),  # its table is ragged
]


def test_bad_lines_are_errors_naming_file_and_line(tmp_path):
    good = q(sel=COLOUR, agg=NO_AGG)
    lines = [good]
    for raw, _, _ in BAD_LINES:
        lines += [raw, good]
    ragged = json.dumps({"id": "2-2", "header": ["a", "b"], "rows": [["x", "y"], ["z"]]})
    questions, tables = write(tmp_path, lines, [json.dumps(TABLE), ragged])
    reader = wikisql.WikiSqlFile(questions, tables)
    interactions, errors = read_all(reader)
    table_errors = [e for e in errors if e.path == tables]
    assert [(e.reason, e.first_line) for e in table_errors] == [("bad_table", 2)]
    line_errors = [e for e in errors if e.path == questions]
    expected = [(reason, 2 + 2 * i) for i, (_, reason, _) in enumerate(BAD_LINES)]
    assert [(e.reason, e.first_line) for e in line_errors] == expected
    for error, (_, _, has_question) in zip(line_errors, BAD_LINES):
        assert str(error).startswith(f"{questions}:{error.first_line}: ")
        assert error.question_id == (f"dev-{error.first_line - 1}_0" if has_question else None)
    assert [i.id for i in interactions] == [f"dev-{n - 1}" for n in range(1, len(lines) + 1, 2)]
    # Every line is converted or an error; the accounting of docs/DATA_CONTRACT.md adds up.
    assert len(interactions) + len(line_errors) == len(lines) == reader.lines_read
    assert reader.lines_read == reader.question_lines + sum(
        e.num_lines for e in line_errors if e.question_id is None)
    assert reader.questions_read == len(interactions) + sum(1 for e in line_errors if e.question_id)


def test_bad_lines_of_the_tables_file(tmp_path):
    questions, tables = write(tmp_path, [q(), q(table_id="3-3")], [
        json.dumps(TABLE), "not json", json.dumps(dict(TABLE, rows=[])),  # duplicate id
        json.dumps({"id": "3-3", "header": ["a"], "rows": [[{"x": 1}]]}), "",
    ])
    reader = wikisql.WikiSqlFile(questions, tables)
    interactions, errors = read_all(reader)
    assert [(e.reason, e.first_line) for e in errors if e.path == tables] == [
        ("malformed_line", 2), ("duplicate_table", 3), ("bad_table", 4), ("blank_line", 5)]
    assert [(e.reason, e.first_line) for e in errors if e.path == questions] == [("bad_table", 2)]
    assert len(interactions[0].table.rows) == 4  # The first definition of 1-1 is kept.
    loaded = reader.tables
    assert loaded.lines_read == 5 == loaded.tables_read + len(loaded.errors)


def test_missing_files(tmp_path):
    questions, tables = write(tmp_path, [q()])
    missing = str(tmp_path / "nope.tables.jsonl")
    reader = wikisql.WikiSqlFile(questions, missing)
    with pytest.raises(ReaderError, match="nope.tables.jsonl"):
        reader.check_files()
    interactions, errors = read_all(reader)
    assert interactions == []
    assert [e.reason for e in errors] == ["missing_file", "missing_table"]
    _, errors = read_all(wikisql.WikiSqlFile(str(tmp_path / "none.jsonl"), tables))
    assert [e.reason for e in errors] == ["missing_file"]


def test_differs_from_release(tmp_path):
    questions, tables = write(tmp_path, [
        q(sel=COLOUR, conds=[(STATE, EQ, "south australia")], answer=["green", "Red"]),  # same
        q(sel=AREA, agg=AVG, answer=[11.125]),  # same
        q(sel=POPULATION, agg=SUM, answer="4968.0"),  # same, a single value
        q(sel=POPULATION, agg=MAX, answer=["1,234"]),  # differs: the executed MAX is 2,000
        q(sel=STATE, agg=COUNT),  # no released answer: not compared
    ])
    reader = wikisql.WikiSqlFile(questions, tables)
    interactions, errors = read_all(reader)
    assert (len(interactions), errors) == (5, [])
    assert reader.release_answers_compared == 4
    assert reader.differs_from_release == 1
    assert reader.differing_question_ids == ["dev-3_0"]


@pytest.mark.parametrize("content, line, why", [
    (json.dumps([json.loads(q()), json.loads(q())], indent=1).encode(), 1,
     "the line is not JSON (Expecting value at column 2)"),  # A JSON array file, pretty-printed.
    (json.dumps([json.loads(q())]).encode(), 1, "the line is a JSON list, not an object"),  # On one line.
    (b"\n  \n\x1f\x8b\x08\x00binary", 3, "byte 1 of the line is not valid UTF-8"),  # gzip, after blank lines.
    (b"table_id\tquestion\n", 1, "the line is not JSON"),
])
def test_a_file_that_is_not_jsonl_is_refused_up_front(tmp_path, content, line, why):
    questions, tables = write(tmp_path, [q()])
    for bad, good in ((questions, tables), (tables, questions)):
        original = open(bad, "rb").read()
        open(bad, "wb").write(content)
        with pytest.raises(ReaderError) as refused:
            wikisql.WikiSqlFile(questions, tables).check_header()
        assert (refused.value.reason, refused.value.path, refused.value.first_line) == ("bad_header", bad, line)
        assert str(refused.value).startswith(f"{bad}:{line}: not a JSONL file: {why}")
        open(bad, "wb").write(original)
    wikisql.WikiSqlFile(questions, tables).check_header()  # Both restored: accepted.


def test_bad_lines_after_a_good_first_line_are_still_counted_not_refused(tmp_path):
    questions, tables = write(tmp_path, ["", q(), b"\x1f\x8b", "[1, 2]"])
    reader = wikisql.WikiSqlFile(questions, tables)
    reader.check_header()  # The first non-blank line is a JSON object.
    interactions, errors = read_all(reader)
    assert len(interactions) == 1
    assert [(e.reason, e.first_line) for e in errors] == [
        ("blank_line", 1), ("invalid_utf8", 3), ("malformed_line", 4)]
    open(questions, "w").close()
    wikisql.WikiSqlFile(questions, tables).check_header()  # An empty file has no line to refuse.
