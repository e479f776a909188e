"""Weak supervision for WTQ: answer texts become distinct body cells, strict matches first."""

import pytest

from tapas_tf.data import answer_matching as am
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers import wtq
from tapas_tf.data.readers.common import ReaderError, make_table

# The table drawn in the module docstring.
DOC_TABLE = make_table("doc", ["Team", "Points"], [["Lions", "1,000"], ["Tigers", "12"], ["12", "7 [1]"]])


def _table(*rows, header=("A", "B")):
    return make_table("t", list(header), [list(row) for row in rows])


def _interaction(table, answers, float_value=None):
    interaction = interaction_pb2.Interaction(id="q")
    interaction.table.CopyFrom(table)
    question = interaction.questions.add(id="q_0", text="?")
    question.answer.answer_texts.extend(answers)
    if float_value is not None:
        question.answer.float_value = float_value
    return interaction


def _coordinates(interaction):
    return [(c.row_index, c.column_index) for c in interaction.questions[0].answer.answer_coordinates]


# --- match_answers: levels ----------------------------------------------------------------------

@pytest.mark.parametrize("answers,coordinates,level", [
    (["Lions"], ((0, 0),), "exact"),
    ([" Lions "], ((0, 0),), "exact"),  # "exact" strips outer white space only.
    (["lions"], ((0, 0),), "case"),
    (["1000"], ((0, 1),), "number"),
    (["7"], ((2, 1),), "official"),  # The footnote "[1]" is removed.
    (["Tigers", "Lions"], ((1, 0), (0, 0)), "exact"),  # One coordinate per answer, in answer order.
])
def test_the_docstring_table(answers, coordinates, level):
    assert am.match_answers(DOC_TABLE, answers) == am.MatchResult(
        coordinates, level, am.MATCHED, f"matched_{level}")


def test_case_and_white_space():
    table = _table(["New  York\tCity", "x"])
    assert am.match_answers(table, ["new york city"]).coordinates == ((0, 0),)
    assert am.match_answers(table, ["new york city"]).level == "case"


@pytest.mark.parametrize("cell,answer", [
    ("1,000", "1000"), ("2.50", "2.5"), ("1000", "1,000.0"), ("3", "3.0"), ("-4", "-4.00"),
    ("1,250 [2]", "1250"),  # Numbers are read after the official normalisation.
])
def test_numbers_match_at_the_number_level(cell, answer):
    result = am.match_answers(_table([cell, "x"]), [answer])
    assert (result.coordinates, result.level, result.status) == (((0, 0),), "number", am.MATCHED)


@pytest.mark.parametrize("cell,answer", [
    ("November 10, 1998", "1998-11-10"),
    ("10 Nov 1998", "1998-11-10"),
    ("November 10", "xx-11-10"),  # WTQ's unknown parts.
    ("May 2001", "2001-05-xx"),
    ("January 5", "xx-1-5"),  # One-digit parts, as the official evaluator reads them.
    ("2020-05-03", "2020-5-3"),  # The WTQ form has no year limit (number_parsing.MAX_YEAR).
])
def test_dates_match_at_the_number_level(cell, answer):
    result = am.match_answers(_table(["x", cell]), [answer])
    assert (result.coordinates, result.level) == (((0, 1),), "number")


@pytest.mark.parametrize("cell,answer", [
    ("1998", "1998-11-10"),  # A year is not a full date.
    ("November 10, 1999", "1998-11-10"),
    ("3 km", "3"),  # A number inside a text is not the text's number.
    ("1,2", "12"),  # Not a thousands separator.
    ("first", "1"),  # Number words are not plain numbers.
])
def test_values_that_do_not_match(cell, answer):
    assert am.match_answers(_table([cell, "x"]), [answer]).status == am.NO_MATCH


@pytest.mark.parametrize("cell,answer", [
    ("Gold[1]", "Gold"),
    ('"Thriller"', "Thriller"),
    ("Paris (France)", "Paris"),
    ("Café", "cafe"),
    ("St. Louis.", "St. Louis"),
    ("Rock †", "rock"),
])
def test_the_official_normalisation(cell, answer):
    result = am.match_answers(_table([cell, "x"]), [answer])
    assert (result.coordinates, result.level) == (((0, 0),), "official")


def test_the_strict_level_is_preferred_over_a_loose_one():
    table = _table(["Paris", "1,000"], ["paris", "1000"])
    assert am.match_answers(table, ["paris"]) == am.MatchResult(((1, 0),), "exact", am.MATCHED, "matched_exact")
    assert am.match_answers(table, ["Paris"]).coordinates == ((0, 0),)
    assert am.match_answers(table, ["1000"]).coordinates == ((1, 1),)
    assert am.match_answers(table, ["1,000"]).coordinates == ((0, 1),)
    # Only loose matches, in several cells: ambiguous.
    assert am.match_answers(table, ["PARIS"]).status == am.AMBIGUOUS


def test_rows_count_from_the_first_body_row_and_headers_never_match():
    table = _table(["a", "b"], ["c", "d"], header=("Gold", "Silver"))
    assert am.match_answers(table, ["d"]).coordinates == ((1, 1),)
    assert am.match_answers(table, ["Gold"]) == am.MatchResult((), None, am.NO_MATCH, "no_match_answer_not_found")


# --- match_answers: assignment, no match and ambiguity -----------------------------------------

def test_two_answers_get_two_distinct_cells():
    # "PARIS" matches both cells at the case level; "Paris" takes (0, 0) exactly, so the
    # assignment gives "PARIS" the other cell where a greedy choice would reuse (0, 0).
    table = _table(["Paris", "x"], ["paris", "y"])
    assert am.match_answers(table, ["Paris", "PARIS"]) == am.MatchResult(
        ((0, 0), (1, 0)), "case", am.MATCHED, "matched_case")


def test_repeated_answers_fill_repeated_cells_and_the_order_is_no_ambiguity():
    table = _table(["Tigers", "x"], ["Tigers", "y"])
    result = am.match_answers(table, ["Tigers", "Tigers"])
    assert (result.status, sorted(result.coordinates)) == (am.MATCHED, [(0, 0), (1, 0)])


def test_no_match():
    assert am.match_answers(DOC_TABLE, ["Bears"]).reason == "no_match_answer_not_found"
    assert am.match_answers(DOC_TABLE, ["Lions", "Bears"]).status == am.NO_MATCH
    # Both answers are found, but in the same single cell.
    assert am.match_answers(DOC_TABLE, ["Tigers", "Tigers"]) == am.MatchResult(
        (), None, am.NO_MATCH, "no_match_answers_share_cells")
    assert am.match_answers(DOC_TABLE, []).reason == "no_match_no_answers"
    # Empty texts match nothing, not even empty cells.
    assert am.match_answers(_table(["", " "]), [" "]).status == am.NO_MATCH


def test_ambiguity():
    assert am.match_answers(DOC_TABLE, ["12"]) == am.MatchResult((), "exact", am.AMBIGUOUS, "ambiguous_exact")
    # "7" is unique, but "12" still has two cells: two optimal cell sets.
    assert am.match_answers(DOC_TABLE, ["7", "12"]) == am.MatchResult(
        (), "official", am.AMBIGUOUS, "ambiguous_official")
    # The same answer twice in the same column is ambiguous too: the row is a guess.
    assert am.match_answers(_table(["Gold", "1"], ["Gold", "2"]), ["Gold"]).status == am.AMBIGUOUS
    # Two answers, three candidate cells for them: ambiguous.
    table = _table(["a", "b"], ["a", "c"])
    assert am.match_answers(table, ["a", "b"]).status == am.AMBIGUOUS
    # A cell that only one answer can take decides: "b" and "c" are unique.
    assert am.match_answers(table, ["b", "c"]).coordinates == ((0, 1), (1, 1))


# --- float answers --------------------------------------------------------------------------------

@pytest.mark.parametrize("answers,expected", [
    (["1,000"], 1000.0), (["2.5"], 2.5), (["-3"], -3.0),
    (["1,2"], None), (["abc"], None), (["3 km"], None), (["1", "2"], None), ([], None),
])
def test_float_answer(answers, expected):
    assert am.float_answer(answers) == expected


def test_the_wtq_reader_uses_float_answer(tmp_path):
    path = _wtq_dataset(tmp_path, ["nt-0\tq\tcsv/200-csv/0.csv\t1,000"])
    [interaction] = list(wtq.WtqFile(path, str(tmp_path)).interactions())
    assert interaction.questions[0].answer.float_value == 1000.0


# --- apply_weak_supervision -------------------------------------------------------------------------

def test_a_match_fills_the_coordinates():
    interaction = _interaction(DOC_TABLE, ["Tigers", "Lions"])
    interaction.questions[0].answer.answer_coordinates.add(row_index=9, column_index=9)  # Replaced.
    assert am.apply_weak_supervision(interaction, "train") is None
    answer = interaction.questions[0].answer
    assert _coordinates(interaction) == [(1, 0), (0, 0)]
    assert answer.is_valid and list(answer.answer_texts) == ["Tigers", "Lions"]
    assert not answer.HasField("float_value")


def test_no_match_is_dropped_in_train_and_kept_in_eval():
    interaction = _interaction(DOC_TABLE, ["Bears"])
    assert am.apply_weak_supervision(interaction, "train") == "no_match"
    assert not interaction.questions[0].answer.is_valid
    assert am.apply_weak_supervision(interaction, "eval") is None
    # Evaluation questions are always predicted (and scored on their answer texts).
    assert _coordinates(interaction) == [] and interaction.questions[0].answer.is_valid


def test_a_float_answer_without_a_match_is_kept():
    interaction = _interaction(DOC_TABLE, ["42"], float_value=42.0)
    assert am.apply_weak_supervision(interaction, "train") is None
    answer = interaction.questions[0].answer
    assert _coordinates(interaction) == [] and answer.is_valid and answer.float_value == 42.0


def test_an_ambiguous_match_is_dropped_in_train_and_kept_without_cells_in_eval():
    interaction = _interaction(_table(["Gold", "1"], ["Gold", "2"]), ["Gold"])
    assert am.apply_weak_supervision(interaction, "train") == "ambiguous_match"
    assert not interaction.questions[0].answer.is_valid
    assert am.apply_weak_supervision(interaction, "eval") is None
    assert _coordinates(interaction) == [] and interaction.questions[0].answer.is_valid


def test_an_ambiguous_float_answer_is_kept_without_cells():
    interaction = _interaction(DOC_TABLE, ["12"], float_value=12.0)
    counts = am.MatchCounts()
    assert am.apply_weak_supervision(interaction, "train", counts) is None
    assert _coordinates(interaction) == [] and interaction.questions[0].answer.is_valid
    assert counts == {"questions": 1, "kept": 1, "ambiguous_exact": 1}


def test_counts_and_modes():
    counts = am.MatchCounts()
    for answers in (["Lions"], ["Bears"], ["lions"], ["12"]):
        am.apply_weak_supervision(_interaction(DOC_TABLE, answers), "train", counts)
    assert counts == {"questions": 4, "kept": 2, "dropped_no_match": 1, "dropped_ambiguous_match": 1,
                      "matched_exact": 1, "matched_case": 1, "no_match_answer_not_found": 1,
                      "ambiguous_exact": 1}
    assert counts.kept_fraction == 0.5
    assert am.MatchCounts().kept_fraction == 0.0
    with pytest.raises(ValueError, match="unknown weak supervision mode 'test'"):
        am.apply_weak_supervision(_interaction(DOC_TABLE, ["Lions"]), "test")


# --- the WTQ reader with supervision ------------------------------------------------------------------

WTQ_LINES = ["nt-0\tmatched\tcsv/200-csv/0.csv\tparis",
             "nt-1\tno match\tcsv/200-csv/0.csv\tRome",
             "nt-2\tambiguous\tcsv/200-csv/0.csv\tEurope",
             "nt-3\tfloat\tcsv/200-csv/0.csv\t7",
             "nt-4\tmissing table\tcsv/200-csv/9.csv\t1"]


def _wtq_dataset(tmp_path, lines):
    (tmp_path / "csv" / "200-csv").mkdir(parents=True)
    (tmp_path / "csv" / "200-csv" / "0.tsv").write_text(
        "City\tContinent\tPopulation\nParis\tEurope\t2,148,000\nVienna\tEurope\t1,897,000\n")
    path = tmp_path / "split.tsv"
    path.write_text("\n".join(["id\tutterance\tcontext\ttargetValue"] + lines) + "\n")
    return str(path)


def test_wtq_reader_in_train_mode_yields_drops_as_errors(tmp_path):
    path = _wtq_dataset(tmp_path, WTQ_LINES)
    reader = wtq.WtqFile(path, str(tmp_path), supervision="train")
    items = list(reader.interactions())
    errors = [(e.reason, e.lines, e.question_id) for e in items if isinstance(e, ReaderError)]
    assert errors == [("answer_no_match", "3", "nt-1_0"), ("answer_ambiguous", "4", "nt-2_0"),
                      ("missing_table", "6", "nt-4_0")]
    message = str(items[1])
    assert message.startswith(f"{path}:3: question nt-1_0: answer 'Rome'") and "csv/200-csv/0.csv" in message
    kept = [i for i in items if not isinstance(i, ReaderError)]
    assert [(i.id, _coordinates(i)) for i in kept] == [("nt-0", [(0, 0)]), ("nt-3", [])]
    assert reader.lines_read == 6 == reader.header_lines + reader.question_lines
    assert reader.match_counts["questions"] == 4 and reader.match_counts["kept"] == 2


def test_wtq_reader_in_eval_mode_keeps_every_question(tmp_path):
    path = _wtq_dataset(tmp_path, WTQ_LINES)
    items = list(wtq.read_wtq_interactions(path, str(tmp_path), supervision="eval"))
    kept = [(i.id, _coordinates(i)) for i in items if not isinstance(i, ReaderError)]
    assert kept == [("nt-0", [(0, 0)]), ("nt-1", []), ("nt-2", []), ("nt-3", [])]


def test_wtq_reader_without_supervision_is_unchanged(tmp_path):
    path = _wtq_dataset(tmp_path, WTQ_LINES)
    items = list(wtq.WtqFile(path, str(tmp_path)).interactions())
    kept = [i for i in items if not isinstance(i, ReaderError)]
    assert [i.id for i in kept] == ["nt-0", "nt-1", "nt-2", "nt-3"]
    assert all(not i.questions[0].answer.answer_coordinates and not i.questions[0].answer.HasField("is_valid")
               for i in kept)
    with pytest.raises(ValueError, match="supervision must be None"):
        wtq.WtqFile(path, str(tmp_path), supervision="dev")
