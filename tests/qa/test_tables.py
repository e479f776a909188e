"""Tables as users hold them -> Table protos: cells of any dtype, CSV files, and bad input."""

import datetime
import decimal

import numpy as np
import pandas as pd
import pytest

from tapas_tf.qa import pruning
from tapas_tf.qa.tables import (
    AskError,
    cell_text,
    column_name,
    header_width,
    read_csv_bytes,
    read_table,
    sniff_delimiter,
    table_from_frame,
)


@pytest.mark.parametrize("value, text", [
    (None, ""), (float("nan"), ""), (pd.NaT, ""), (np.nan, ""), (pd.NA, ""),
    (2.0, "2"), (2.5, "2.5"), (-0.125, "-0.125"), (1e20, "1e+20"), (np.float32(1.5), "1.5"),
    (3, "3"), (np.int64(-7), "-7"), (True, "True"), (np.bool_(False), "False"),
    (pd.Timestamp("2020-01-05"), "2020-01-05"), (pd.Timestamp("2020-01-05 10:30"), "2020-01-05 10:30:00"),
    (datetime.date(1998, 11, 10), "1998-11-10"), (decimal.Decimal("1.50"), "1.50"),
    ("  Paris ", "  Paris "), ("1,000", "1,000"),
])
def test_cell_text_of_every_dtype(value, text):
    assert cell_text(value) == text


def test_column_names():
    assert column_name(("Medals", "Gold")) == "Medals Gold"
    assert column_name(None) == "" and column_name(2020) == "2020"


def test_frame_to_table_keeps_duplicates_and_drops_the_index():
    frame = pd.DataFrame([[1, 2.5, None], [3, float("nan"), "x"]], columns=["a", "a", None],
                         index=["r1", "r2"])
    table = table_from_frame(frame, "t")
    assert [c.text for c in table.columns] == ["a", "a", ""]
    assert [[c.text for c in row.cells] for row in table.rows] == [["1", "2.5", ""], ["3", "", "x"]]


def test_frames_of_every_dtype_convert_cell_by_cell():
    """The whole frame is converted at once (to_numpy): each cell keeps its Python value, so every
    dtype's text is `cell_text`'s."""
    frame = pd.DataFrame({
        "int": [1, 2], "float": [2.5, float("nan")], "integral": [3.0, 4.0], "bool": [True, False],
        "date": pd.to_datetime(["2020-01-05 00:00", "2020-01-05 10:30"]), "nullable": pd.array([7, None], "Int64"),
        "category": pd.Categorical(["a", "b"]), "object": [None, "x"],
        "zoned": pd.to_datetime(["2020-01-05 10:30", None]).tz_localize("UTC")})
    table = table_from_frame(frame)
    assert [[c.text for c in row.cells] for row in table.rows] == [
        ["1", "2.5", "3", "True", "2020-01-05", "7", "a", "", "2020-01-05 10:30:00+00:00"],
        ["2", "", "4", "False", "2020-01-05 10:30:00", "", "b", "x", ""]]


@pytest.mark.parametrize("data, width", [
    (b"a,b,c\n1,2,3\n", 3),
    (b'"a,1","b\nstill b"\n1,2\n', 2),  # Quoted commas and newlines belong to their field.
    (b'"#","Scorers"\n"163","Poul \\"Popper\\" Petersen, Edwin"\n', 2),  # Backslash-escaped quotes.
    (b"\n\na,b\n1,2\n", 2),  # pandas skips blank lines before the header, and so does the count.
    (b"a,b\n" + b"1,2,3,4,5\n" * 3, 2),  # Only the header is read.
    (b"", None), (b"\n\n", None),
    (b"a,\x00b\n", None),  # Binary: read_csv_bytes names the problem.
    (b"caf\xe9,b\n", None),  # Not UTF-8: likewise.
])
def test_header_width_counts_the_first_record_only(data, width):
    assert header_width(data) == width
    try:
        frame = read_csv_bytes(data)
    except AskError:
        return  # Rows wider than the header, say: the count is of the header all the same.
    assert frame.shape[1] == width


def test_header_width_of_a_100000_column_header():
    header = ",".join(f"c{i}" for i in range(100_000)).encode()
    assert header_width(header + b"\n" + b"x," * 99_999 + b"x\n") == 100_000


@pytest.mark.parametrize("frame, message", [
    (pd.DataFrame(), "no columns"),
    (pd.DataFrame(columns=["a", "b"]), "no rows"),
])
def test_empty_frames_are_refused(frame, message):
    with pytest.raises(AskError, match=message):
        table_from_frame(frame)


def test_read_table_reads_every_cell_as_written(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('year,total,note\n2001,"1,000",NA\n2002,2.50,\n', encoding="utf-8")
    frame = read_table(str(path))
    assert frame.values.tolist() == [["2001", "1,000", "NA"], ["2002", "2.50", ""]]


@pytest.mark.parametrize("content, message", [
    (None, "no such CSV file"),
    ("directory", "is a directory"),
    (b"a,b\ncaf\xe9,1\n", "is not UTF-8 text"),
    (b"", "is empty"),
    (b'a,b\n"unclosed,1\n', "does not parse as CSV"),
])
def test_read_table_bad_files(tmp_path, content, message):
    path = tmp_path / "t.csv"
    if content == "directory":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(AskError, match=message):
        read_table(str(path))
    with pytest.raises(AskError, match="DataFrame or the path"):
        read_table(42)


# --- pruning ------------------------------------------------------------------------------------


def test_words_fold_case_and_accents_and_drop_function_words():
    assert pruning.words("What is the population of Zürich?") == {"population", "zurich"}


def _table(rows, header=("city", "country", "population")):
    return table_from_frame(pd.DataFrame(rows, columns=list(header)))


def test_rows_and_columns_most_related_to_the_question_are_kept_in_table_order():
    table = _table([["paris", "france", "2"], ["berlin", "germany", "4"], ["london", "england", "8"],
                    ["rome", "italy", "3"]])
    ranked = pruning.rank_rows(table, "is london bigger than paris?", [0, 1, 2])
    assert ranked.tolist()[:2] == [0, 2]  # Paris and London, then the others in order.
    assert pruning.choose_columns(table, "which country has the largest population?", 2) == (1, 2)
    cut = pruning.subset(table, [0, 2], [0, 2])
    assert [[c.text for c in r.cells] for r in cut.table.rows] == [["paris", "2"], ["london", "8"]]
    assert cut.to_original(1, 1) == (2, 2)
    assert cut.from_original([(2, 2), (1, 0), (0, 1)]) == [(1, 1)]
    assert cut.is_pruned and not pruning.unpruned(table).is_pruned


def test_read_table_accepts_backslash_escaped_quotes(tmp_path):
    """WikiTableQuestions' CSV files escape quotes with a backslash."""
    path = tmp_path / "t.csv"
    path.write_text('"#","Scorers"\n"163","Poul Erik \\"Popper\\" Petersen, Edwin Hansen"\n', encoding="utf-8")
    assert read_table(str(path)).values.tolist() == [["163", 'Poul Erik "Popper" Petersen, Edwin Hansen']]


@pytest.mark.parametrize("data, delimiter", [
    (b"city;population\nparis;\"2,100\"\nrome;2800\n", ";"),  # Excel in a comma-decimal locale.
    (b"city\tpopulation\nparis\t2,100\n", "\t"),
    (b"city|population\nparis|2100\nrome|2800\n", "|"),
    (b"city,population\nparis;x,2100\n", ","),  # The comma splits the header: a CSV file.
    (b"name\nsmith; john\nlee; ann\n", ","),  # One column whose cells hold semicolons: not split.
    (b"a;b\n1;2;3\n", ","),  # Semicolons that split lines unevenly are no delimiter.
    (b"", ","),
])
def test_the_delimiter_is_sniffed(data, delimiter):
    assert sniff_delimiter(data) == delimiter


def test_a_semicolon_file_reads_as_columns_and_a_given_delimiter_wins(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"city;population\nparis;\"2,100\"\nrome;2800\n")
    frame = read_table(str(path))
    assert list(frame.columns) == ["city", "population"] and frame["population"].tolist() == ["2,100", "2800"]
    assert list(read_table(str(path), delimiter=",").columns) == ["city;population"]
    tabbed = tmp_path / "t.tsv"
    tabbed.write_bytes(b"a\tb\n1\t2\n")
    assert list(read_table(str(tabbed), delimiter="\\t").columns) == ["a", "b"]  # As a shell passes it.
    with pytest.raises(AskError, match="the delimiter is one character"):
        read_table(str(path), delimiter=";;")
