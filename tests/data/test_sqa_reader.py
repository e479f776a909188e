"""The SQA reader on real rows and on every kind of bad input."""

import os
import re

import numpy as np
import pytest

from tapas_tf.data import number_annotation
from tapas_tf.data.readers import sqa
from tapas_tf.data.readers.common import ReaderError, read_csv_table, resolve_inside
from tapas_tf.data.sample_data import write_sample
from tests.conversion_fixtures import make_converter

REAL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "sqa_real")
HEADER = "\t".join(sqa.COLUMNS) + "\n"


def _read_all(tsv, input_dir):
    return list(sqa.read_sqa_interactions(str(tsv), str(input_dir)))


def test_real_sequence_ids_order_and_answers():
    [interaction] = _read_all(os.path.join(REAL, "random-split-1-train.tsv"), REAL)
    assert interaction.id == "nt-639-1"
    assert [q.id for q in interaction.questions] == ["nt-639-1_0", "nt-639-1_1", "nt-639-1_2"]
    assert interaction.questions[2].original_text == "and of those, who is from louisiana state university?"
    assert [(c.row_index, c.column_index) for c in interaction.questions[2].answer.answer_coordinates] == [(0, 1)]
    assert list(interaction.questions[2].answer.answer_texts) == ["Ben McDonald"]
    assert len(interaction.table.rows) == 26
    assert [c.text for c in interaction.table.columns] == ["Pick", "Player", "Team", "Position", "School"]
    assert interaction.table.rows[1].cells[4].text == "Valley HS (Las Vegas, NV)"


def test_three_real_questions_labels_and_previous_labels(tmp_path):
    """Question 1 and 2 select the 26 players (column 1); question 3 selects Ben McDonald."""
    [interaction] = _read_all(os.path.join(REAL, "random-split-1-train.tsv"), REAL)
    number_annotation.add_numeric_values(interaction)
    words = set()
    for row in [interaction.table.columns] + [r.cells for r in interaction.table.rows]:
        for cell in row:
            words.update(re.findall(r"[a-z0-9]+", cell.text.lower()))
    for question in interaction.questions:
        words.update(re.findall(r"[a-z0-9]+", question.text))
    converter = make_converter(tmp_path, extra_words=sorted(words))

    def cells(features, name):
        on = features[name] == 1
        return set(zip((features["row_ids"][on] - 1).tolist(), (features["column_ids"][on] - 1).tolist()))

    players = {(r, 1) for r in range(26)}
    examples = [converter.convert(interaction, i).features for i in range(3)]
    assert cells(examples[0], "label_ids") == players
    assert cells(examples[0], "prev_label_ids") == set()
    assert cells(examples[1], "label_ids") == players
    assert cells(examples[1], "prev_label_ids") == players
    assert cells(examples[2], "label_ids") == {(0, 1)}
    assert cells(examples[2], "prev_label_ids") == players
    # "Ben McDonald" is two tokens in row 1, column 2.
    tokens = converter.tokenizer.convert_ids_to_tokens(examples[2]["input_ids"][examples[2]["label_ids"] == 1])
    assert tokens == ["ben", "mcdonald"]
    # "top 26 picks": the Pick column holds 1..26, so 26 is EQ for row 26 and GT (4) above it.
    relations = examples[1]["numeric_relations"]
    pick = examples[1]["column_ids"] == 1
    rows = examples[1]["row_ids"]
    assert relations[pick & (rows == 26)].tolist() == [1]
    assert relations[pick & (rows == 1)].tolist() == [4]
    assert np.all(relations[examples[1]["column_ids"] == 2] == 0)


def test_sample_data_reads(tmp_path):
    counts = write_sample(str(tmp_path))
    interactions = _read_all(tmp_path / "random-split-1-train.tsv", tmp_path)
    assert sum(len(i.questions) for i in interactions) == counts["random-split-1-train.tsv"]
    assert [i.id for i in interactions] == ["s-1-0", "s-2-0", "s-3-0", "s-4-0"]


def _write(tmp_path, rows, tables=None):
    for name, content in (tables or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    tsv = tmp_path / "split.tsv"
    tsv.write_text(HEADER + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return tsv


GOOD_TABLE = "a,b\n1,2\n"


def _row(seq="q", position="0", table="t/x.csv", coords="['(0, 0)']", texts="['1']"):
    return [seq, "0", position, "what?", table, coords, texts]


@pytest.mark.parametrize("table_file,content,reason,message", [
    ("t/missing.csv", None, "missing_table", "table file not found"),
    ("t/ragged.csv", "a,b\n1,2\n3\n", "ragged_table", "ragged.csv:3: row has 1 cells, the header has 2"),
    ("t/empty.csv", "a,b\n", "empty_table", "no header or no rows"),
    ("t/latin1.csv", b"a,b\ncaf\xe9,2\n", "table_not_utf8", "byte 7 is not valid UTF-8"),
    ("../outside.csv", None, "bad_table_path", "escapes"),
    ("/etc/passwd", None, "bad_table_path", "is absolute"),
])
def test_bad_tables_are_clear_errors(tmp_path, table_file, content, reason, message):
    (tmp_path.parent / "outside.csv").write_text(GOOD_TABLE)
    tables = {table_file: content} if content is not None else {}
    tsv = _write(tmp_path, [_row(table=table_file)], tables)
    [error] = _read_all(tsv, tmp_path)
    assert isinstance(error, ReaderError)
    assert error.reason == reason
    assert message in str(error)


def test_malformed_lines_name_file_and_line(tmp_path):
    tsv = _write(tmp_path, [
        _row(),
        ["q", "0", "1", "too few fields"],
        _row(position="two"),
        _row(position="2", coords="['(0, 0'"),
    ], {"t/x.csv": GOOD_TABLE})
    items = _read_all(tsv, tmp_path)
    errors = [i for i in items if isinstance(i, ReaderError)]
    assert [str(e) for e in errors] == [
        f"{tsv}:3: expected 7 tab-separated fields ({', '.join(sqa.COLUMNS)}), found 4",
        f"{tsv}:4: annotator '0' and position 'two' must be integers",
    ]
    [interaction] = [i for i in items if not isinstance(i, ReaderError)]
    # The row with unparseable coordinates is kept (positions stay intact) but marked invalid.
    assert [q.id for q in interaction.questions] == ["q-0_0", "q-0_2"]
    assert [q.answer.is_valid for q in interaction.questions] == [True, False]


def test_answer_outside_table_is_counted_at_conversion(tmp_path):
    from tapas_tf.features.conversion_config import ConversionError, Reason

    tsv = _write(tmp_path, [_row(coords="['(5, 0)']")], {"t/x.csv": GOOD_TABLE})
    [interaction] = _read_all(tsv, tmp_path)
    number_annotation.add_numeric_values(interaction)
    [(_, result)] = list(make_converter(tmp_path).convert_interaction(interaction))
    assert isinstance(result, ConversionError)
    assert result.reason == Reason.ANSWER_OUTSIDE_TABLE


def test_bad_header_and_missing_tsv(tmp_path):
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("id\tquestion\n")
    with pytest.raises(ReaderError, match="header"):
        list(sqa.read_sqa_rows(str(tsv)))
    with pytest.raises(ReaderError, match="file not found"):
        list(sqa.read_sqa_rows(str(tmp_path / "nope.tsv")))


def test_quoted_fields_with_tabs_and_newlines(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.csv").write_text(GOOD_TABLE)
    tsv = tmp_path / "split.tsv"
    tsv.write_text(HEADER + 'q\t0\t0\t"which\tone is\nit?"\tt/x.csv\t[\'(0, 0)\']\t[\'1\']\n')
    [interaction] = _read_all(tsv, tmp_path)
    assert interaction.questions[0].original_text == "which\tone is\nit?"


def test_resolve_inside(tmp_path):
    assert resolve_inside(str(tmp_path), "a/b.csv") == os.path.join(str(tmp_path), "a", "b.csv")
    with pytest.raises(ReaderError):
        resolve_inside(str(tmp_path), "a/../../b.csv")
    with pytest.raises(ReaderError):
        resolve_inside(str(tmp_path), "")


def test_csv_table_keeps_quoted_commas(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text('a,b\n"1,836",x\n')
    table = read_csv_table(str(path), "x")
    assert table.rows[0].cells[0].text == "1,836"
    assert table.table_id == "x"
