"""The TabFact reader on a hand-written release: statements with labels, `#`-separated tables, a
malformed entry, a missing table, and every line of the split's file accounted for."""

import json

import pytest

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError
from tapas_tf.data.readers.tabfact import TabFactFile, parse_table
from tapas_tf.pipelines.reports import REPORT_FILE
from tests.command_runner import run_command

SPLIT = """{
"1-1.html.csv": [
[
"paris has more people than rome",
"rome has more people than paris"
],
[
1,
0
],
"european capitals"
],
"1-2.html.csv": [
[
"the bad entry"
],
[
2
],
"labels must be 0 or 1"
],
"1-missing.html.csv": [
[
"a statement about a table that is not there",
"another one"
],
[
0,
1
],
"no table"
]
}
"""


@pytest.fixture
def release(tmp_path):
    (tmp_path / "all_csv").mkdir()
    (tmp_path / "all_csv" / "1-1.html.csv").write_text("city#population\nparis#2,100\nrome#2,800\n")
    (tmp_path / "all_csv" / "1-2.html.csv").write_text("a#b\n1#2\n")
    (tmp_path / "val_examples.json").write_text(SPLIT)
    return tmp_path


def test_statements_become_interactions_with_labels_and_every_line_is_accounted_for(release):
    reader = TabFactFile(str(release / "val_examples.json"), str(release))
    reader.check_header()
    items = list(reader.interactions())
    assert [type(item).__name__ for item in items] == ["Interaction", "Interaction", "ReaderError",
                                                       "ReaderError", "ReaderError"]
    first, second = items[0], items[1]
    assert (first.id, first.questions[0].id, first.questions[0].text) == (
        "1-1.html.csv-0", "1-1.html.csv-0_0", "paris has more people than rome")
    assert (first.questions[0].answer.class_index, second.questions[0].answer.class_index) == (1, 0)
    assert [c.text for c in first.table.columns] == ["city", "population"]
    assert [[c.text for c in row.cells] for row in first.table.rows] == [["paris", "2,100"],
                                                                         ["rome", "2,800"]]
    assert (first.table.table_id, first.table.document_title) == ("1-1.html.csv", "european capitals")

    malformed, missing, missing_too = items[2:]
    assert malformed.reason == "malformed_entry" and malformed.question_id is None
    assert "val_examples.json:13: entry '1-2.html.csv': its labels are not a list of 0" in str(malformed)
    assert (malformed.first_line, malformed.last_line) == (13, 21)
    assert missing.reason == "missing_table" and missing.question_id == "1-missing.html.csv-0"
    assert missing_too.question_id == "1-missing.html.csv-1"
    # The data contract: lines read = header lines + question lines + the line errors' lines.
    assert reader.lines_read == 33
    assert reader.lines_read == reader.header_lines + reader.question_lines + malformed.num_lines
    assert (reader.header_lines, reader.question_lines, reader.questions_read) == (2, 22, 4)
    assert reader.reader_counts() == {"entailed": 1, "refuted": 1, "tables_missing": 1}


def test_a_one_line_file_and_broken_json(tmp_path):
    (tmp_path / "all_csv").mkdir()
    (tmp_path / "all_csv" / "t.csv").write_text("a#b\n1#2\n")
    path = tmp_path / "train_examples.json"
    path.write_text(json.dumps({"t.csv": [["s1", "s2"], [0, 1], "c"], "u.csv": ["oops"]}))
    reader = TabFactFile(str(path), str(tmp_path))
    items = list(reader.interactions())
    assert [i.questions[0].text for i in items[:2]] == ["s1", "s2"] and items[2].reason == "malformed_entry"
    assert reader.lines_read == 1 == reader.question_lines and items[2].num_lines == 0
    # Broken JSON is an error of the whole file: the header check refuses it, naming line and column.
    path.write_text('{\n"t.csv": [["s1"], [1], "c"],\n"u.csv": [["s2"], [1\n')
    reader = TabFactFile(str(path), str(tmp_path))
    with pytest.raises(ReaderError) as refused:
        reader.check_header()
    assert refused.value.reason == "malformed_json" and refused.value.first_line == 4
    assert str(refused.value) == f"{path}:4:1: not valid JSON (Expecting ',' delimiter, at byte 52)"
    # If the file breaks after the check, reading raises the same error after the entries before it.
    items = reader.interactions()
    assert isinstance(next(items), interaction_pb2.Interaction)
    with pytest.raises(ReaderError, match=r"train_examples.json:4:1: not valid JSON") as raised:
        next(items)
    assert raised.value.reason == "malformed_json"


def test_a_truncated_release_file_is_refused_up_front(release):
    path = release / "val_examples.json"
    cut = SPLIT.index('"the bad entry"') + 5  # Inside a string of the second entry, on line 15.
    path.write_text(SPLIT[:cut])
    with pytest.raises(ReaderError) as refused:
        TabFactFile(str(path), str(release)).check_header()
    assert (refused.value.reason, refused.value.path, refused.value.first_line) == (
        "malformed_json", str(path), 15)
    assert str(refused.value) == f"{path}:15:1: not valid JSON (Unterminated string starting at byte {cut - 5})"
    # The column counts characters, the byte offset the file's UTF-8 bytes (each "é" is two).
    text = '{"été.csv": [["s"], [1]], "é": [["s"], [1]] x}'
    path.write_text(text, encoding="utf-8")
    column, offset = text.index("x") + 1, len(text[:text.index("x")].encode("utf-8"))
    assert offset == column - 1 + 3
    with pytest.raises(ReaderError, match=rf":1:{column}: not valid JSON \(Expecting ',' delimiter, "
                       rf"at byte {offset}\)"):
        TabFactFile(str(path), str(release)).check_header()


def test_create_data_and_make_statements_stop_on_a_truncated_file(release, tmp_path_factory):
    (release / "train_examples.json").write_text(SPLIT[:SPLIT.index('"the bad entry"') + 5])
    out = tmp_path_factory.mktemp("out")
    result = run_command("create-data", "--task=TABFACT", f"--input_dir={release}", f"--output_dir={out}",
                         "--noprogress_bar", cwd=str(release))
    assert result.returncode != 0
    message = f"{release / 'train_examples.json'}:15:1: not valid JSON (Unterminated string"
    assert f"create-data: error: {message}" in result.stderr, result.stderr[-3000:]
    assert not (out / REPORT_FILE).exists()
    result = run_command("make-statements", f"--input_dir={release}", f"--output_dir={out / 'statements'}",
                         cwd=str(release))
    assert result.returncode != 0 and f"make-statements: error: {message}" in result.stderr, result.stderr
    assert not (out / "statements").exists()


def test_the_header_check_names_the_file(tmp_path):
    with pytest.raises(ReaderError, match="test_examples.json: file not found"):
        TabFactFile(str(tmp_path / "test_examples.json"), str(tmp_path)).check_header()
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(ReaderError, match="not a TabFact split file"):
        TabFactFile(str(tmp_path / "x.json"), str(tmp_path)).check_header()


def test_tables_are_hash_separated_and_ragged_rows_are_named():
    table = parse_table("name#score\n a # 1\nb#2\n\n", "t.csv", "t.csv")
    assert [[c.text for c in row.cells] for row in table.rows] == [["a", "1"], ["b", "2"]]
    with pytest.raises(ReaderError, match=r"t.csv:3: row has 3 cells, the header has 2"):
        parse_table("name#score\na#1\nb#2#3\n", "t.csv", "t.csv")
    with pytest.raises(ReaderError, match="no header or no rows"):
        parse_table("name#score\n", "t.csv", "t.csv")
