"""Interaction files: TFRecord and one-line text format round trips, and errors."""

import gzip

import pytest

from tapas_tf.data.interaction_io import (
    InteractionFormatError,
    read_interactions,
    write_interactions,
)
from tests.conversion_fixtures import make_interaction


def _interactions():
    first = make_interaction(["city", "population"], [["Paris", "2,161,000"], ["Zürich", ""]],
                             [("which city has 2 million people?", [(0, 0)], 0)], table_id="t1")
    second = make_interaction(["a"], [["b"]], [("hello", [], 3, 2.5)], table_id="t2")
    second.id = "second"
    return [first, second]


@pytest.mark.parametrize("name", ["x.tfrecord", "x.tfrecord.gz", "x.txtpb", "x.txtpb.gz"])
def test_round_trip(tmp_path, name):
    path = str(tmp_path / name)
    assert write_interactions(path, _interactions()) == 2
    assert list(read_interactions(path)) == _interactions()


def test_text_format_is_one_interaction_per_line(tmp_path):
    path = str(tmp_path / "x.txtpb.gz")
    write_interactions(path, _interactions())
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('id: "i" table {')
    assert "Zürich" in lines[0]  # UTF-8, not escaped octal.


def test_bad_text_line_names_file_and_line(tmp_path):
    path = tmp_path / "x.txtpb"
    path.write_text('id: "ok"\nid: "broken\n')
    with pytest.raises(InteractionFormatError, match=r"x.txtpb:2:"):
        list(read_interactions(str(path)))


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown interaction file type"):
        list(read_interactions(str(tmp_path / "x.json")))
    with pytest.raises(FileNotFoundError):
        list(read_interactions(str(tmp_path / "x.tfrecord")))


def test_reads_text_written_by_the_original_tools(tmp_path):
    # A line as the original release writes it: field names and numbers are shared.
    line = ('id: "nt-1-0" table { columns { text: "Year" } rows { cells { text: "1998" '
            'numeric_value { float_value: 1998.0 } } } table_id: "table_csv/1.csv" } '
            'questions { id: "nt-1-0_0" original_text: "when?" answer { answer_coordinates '
            '{ row_index: 0 column_index: 0 } answer_texts: "1998" } }\n')
    path = tmp_path / "x.txtpb"
    path.write_text(line)
    [interaction] = read_interactions(str(path))
    assert interaction.table.rows[0].cells[0].numeric_value.float_value == 1998.0
    assert interaction.questions[0].answer.answer_coordinates[0].column_index == 0
