"""Line accounting of the release readers: every physical line ends up in exactly one place.

Each test writes a small SQA-format data set, damages it, and checks that every line is the
header, a question, or an error naming that line, and that the questions that can be read are.
"""

import os
import pathlib
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tapas_tf.data import number_annotation
from tapas_tf.data.readers import sqa, wtq
from tapas_tf.data.readers.common import ReaderError, read_csv_table
from tapas_tf.data.readers.tsv import HeaderError, TsvReader
from tapas_tf.features.conversion_config import ConversionError
from tests.conversion_fixtures import make_converter

HEADER = "\t".join(sqa.COLUMNS)
TABLE = "City,Population\nParis,2148000\nVienna,\"1,897,000\"\n"


def _question(n: int, table: str = "t/cities.csv") -> str:
    return f"seq-{n}\t0\t0\twhich city is number {n}?\t{table}\t['(0, 0)']\t['Paris']"


def _dataset(tmp_path, lines, table=TABLE):
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "t" / "cities.csv").write_text(table, encoding="utf-8")
    tsv = tmp_path / "split.tsv"
    data = b"".join((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n" for line in lines)
    tsv.write_bytes(data)
    return str(tsv)


def _coverage(sqa_file: sqa.SqaFile):
    """Runs the reader; returns (line -> where it went, row errors, interactions, question errors)."""
    where, line_errors = {}, []
    rows = []
    for item in sqa_file.rows():
        first, last = item.first_line, item.last_line
        for line in range(first, last + 1):
            assert line not in where, f"line {line} accounted twice"
            where[line] = item.reason if isinstance(item, ReaderError) else "question"
        (line_errors if isinstance(item, ReaderError) else rows).append(item)
    if sqa_file.header_lines:
        where[1] = "header"
    return where, line_errors, rows


def _physical_lines(path: str) -> int:
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


def test_a_bad_byte_costs_its_line_only(tmp_path):
    """A 301-line file (header + 300 questions) with a latin-1 byte at line 251."""
    lines = [HEADER] + [_question(n) for n in range(300)]
    lines[250] = lines[250].replace("which city", "caf\xe9 which city").encode("latin-1")
    path = _dataset(tmp_path, lines)
    sqa_file = sqa.SqaFile(path, str(tmp_path))
    where, errors, rows = _coverage(sqa_file)
    assert sqa_file.lines_read == 301 == len(where)
    assert [(e.reason, e.first_line) for e in errors] == [("invalid_utf8", 251)]
    assert f"{path}:251: byte 15 of the line is not valid UTF-8" in str(errors[0])
    assert len(rows) == 299 and sqa_file.questions_read == 299 and sqa_file.question_lines == 299


def test_a_stray_quote_costs_its_line_and_the_swallowed_lines_are_read_again(tmp_path):
    lines = [HEADER] + [_question(n) for n in range(10)]
    lines[4] = lines[4].replace("which city", '"which city')  # Opens a quoted field never closed.
    path = _dataset(tmp_path, lines)
    sqa_file = sqa.SqaFile(path, str(tmp_path))
    where, errors, rows = _coverage(sqa_file)
    assert len(where) == 11
    assert [(e.reason, e.first_line) for e in errors] == [("malformed_line", 5)]
    assert [r.first_line for r in rows] == [2, 3, 4, 6, 7, 8, 9, 10, 11]


def test_quoted_field_over_two_lines_is_one_question(tmp_path):
    lines = [HEADER, _question(0), 'seq-1\t0\t0\t"which\ncity?"\tt/cities.csv\t[\'(0, 0)\']\t[\'Paris\']',
             _question(2)]
    path = _dataset(tmp_path, lines)
    sqa_file = sqa.SqaFile(path, str(tmp_path))
    where, errors, rows = _coverage(sqa_file)
    assert errors == [] and len(where) == 5 == sqa_file.lines_read
    assert [(r.first_line, r.last_line) for r in rows] == [(2, 2), (3, 4), (5, 5)]
    assert rows[1].question == "which\ncity?"


def test_blank_lines_and_wrong_field_counts_are_counted_by_line(tmp_path):
    lines = [HEADER, _question(0), "", _question(1) + "\textra", "only\tthree\tfields", _question(2)]
    path = _dataset(tmp_path, lines)
    where, errors, rows = _coverage(sqa.SqaFile(path, str(tmp_path)))
    assert [(e.reason, e.first_line) for e in errors] == [
        ("blank_line", 3), ("malformed_line", 4), ("malformed_line", 5)]
    assert len(rows) == 2 and len(where) == 6


def test_header_in_any_order_with_extra_columns(tmp_path):
    columns = list(reversed(sqa.COLUMNS)) + ["comment"]
    values = dict(zip(sqa.COLUMNS, _question(0).split("\t")))
    line = "\t".join(values.get(c, "note") for c in columns)
    path = _dataset(tmp_path, ["\t".join(columns), line])
    [interaction] = list(sqa.SqaFile(path, str(tmp_path)).interactions())
    assert interaction.questions[0].original_text == "which city is number 0?"


def test_a_header_without_a_required_column_is_one_clear_error(tmp_path):
    path = _dataset(tmp_path, ["id\tannotator\tposition\tquestion\ttable_file\tanswer_text", _question(0)])
    with pytest.raises(HeaderError, match=r"split.tsv:1: the header lacks the column\(s\) answer_coordinates"):
        sqa.SqaFile(path, str(tmp_path)).check_header()
    # Iterating gives one failure that covers every line of the file.
    [error] = list(sqa.SqaFile(path, str(tmp_path)).interactions())
    assert (error.reason, error.first_line, error.last_line) == ("bad_header", 1, 2)


def test_table_problems_name_the_tsv_line_and_question_id(tmp_path):
    (tmp_path / "t" / "a_directory.csv").mkdir(parents=True)
    lines = [HEADER, _question(0), _question(1, "t/a_directory.csv"),
             "seq-1\t0\t1\tand then?\tt/a_directory.csv\t['(0, 0)']\t['Paris']"]
    path = _dataset(tmp_path, lines)
    items = list(sqa.SqaFile(path, str(tmp_path)).interactions())
    errors = [i for i in items if isinstance(i, ReaderError)]
    assert [(e.reason, e.question_id, e.lines) for e in errors] == [
        ("unreadable_table", "seq-1-0_0", "3"), ("unreadable_table", "seq-1-0_1", "4")]
    assert str(errors[1]).startswith(f"{path}:4: question seq-1-0_1: ")
    assert "is a directory" in str(errors[1])


def test_coordinates_beyond_int32_make_an_invalid_answer_not_a_crash(tmp_path):
    lines = [HEADER, _question(0).replace("['(0, 0)']", "['(0, 99999999999)']"),
             _question(1).replace("['(0, 0)']", "['(-1, 0)']")]
    path = _dataset(tmp_path, lines)
    interactions = list(sqa.SqaFile(path, str(tmp_path)).interactions())
    assert [i.questions[0].answer.is_valid for i in interactions] == [False, False]
    assert all(len(i.questions[0].answer.answer_coordinates) == 0 for i in interactions)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(ReaderError, match="file not found"):
        sqa.SqaFile(str(tmp_path / "nope.tsv"), str(tmp_path)).check_header()
    [error] = list(sqa.SqaFile(str(tmp_path), str(tmp_path)).interactions())  # A directory.
    assert error.reason == "unreadable_file"
    empty = tmp_path / "empty.tsv"
    empty.write_bytes(b"")
    reader = sqa.SqaFile(str(empty), str(tmp_path))
    assert list(reader.interactions()) == [] and reader.lines_read == 0


def test_wtq_reader_keeps_the_same_contract(tmp_path):
    (tmp_path / "csv" / "200-csv").mkdir(parents=True)
    (tmp_path / "csv" / "200-csv" / "0.tsv").write_text("City\tPopulation\nParis\t2148000\n")
    lines = ["id\tutterance\tcontext\ttargetValue",
             "nt-0\twhich city?\tcsv/200-csv/0.csv\tParis",
             b"nt-1\tcaf\xe9?\tcsv/200-csv/0.csv\tParis",
             'nt-2\ta "quoted word\tcsv/200-csv/0.csv\tParis',  # WTQ does not quote: no swallowing.
             "nt-3\tmissing table\tcsv/200-csv/9.csv\t1",
             "nt-4\ttoo\tfew"]
    path = _dataset(tmp_path, lines)
    reader = wtq.WtqFile(path, str(tmp_path))
    items = list(reader.interactions())
    errors = [(e.reason, e.lines, e.question_id) for e in items if isinstance(e, ReaderError)]
    assert errors == [("invalid_utf8", "3", None), ("missing_table", "5", "nt-3_0"), ("malformed_line", "6", None)]
    assert [i.id for i in items if not isinstance(i, ReaderError)] == ["nt-0", "nt-2"]
    assert reader.lines_read == 6 == reader.header_lines + reader.question_lines + 2
    assert reader.questions_read == 3


def test_tsv_reader_without_quoting(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text('a\tb\n"x\ty\n"z\tw\n')
    records = list(TsvReader(str(path), ("a", "b"), quoting=False))
    assert [r.fields for r in records] == [{"a": '"x', "b": "y"}, {"a": '"z', "b": "w"}]


# --- Fuzzing: random damage never escapes, and every line is accounted for ------------------------

GOOD_LINES = [HEADER] + [
    f"seq-{n % 4}\t{n % 2}\t{n // 8}\twhat is the {n}th city?\tt/cities.csv\t['({n % 2}, 0)']\t['x']"
    for n in range(16)
]
GOOD_BYTES = ("\n".join(GOOD_LINES) + "\n").encode("utf-8")
NASTY = [b'"', b"\t", b"\n", b"\r", b"\xff", b"\xe9", b"\x00", b"", b"''", b"[", b"]", b"(", b",",
         b"99999999999999999999", b"-1", b"1e400", b"t/", b"../", b"/etc/passwd", b"t/cities.csv"]


@st.composite
def damaged(draw, original: bytes):
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "flip", "duplicate_line"]))
        if action == "insert":
            data[position:position] = draw(st.sampled_from(NASTY))
        elif action == "delete":
            del data[position:position + draw(st.integers(1, 12))]
        elif action == "flip" and position < len(data):
            data[position] = draw(st.integers(0, 255))
        elif action == "duplicate_line":
            lines = bytes(data).split(b"\n")
            index = draw(st.integers(0, len(lines) - 1))
            lines.insert(index, lines[index])
            data = bytearray(b"\n".join(lines))
    return bytes(data)


FUZZ = settings(max_examples=int(os.environ.get("TAPAS_TF_FUZZ_EXAMPLES", "70")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(data=damaged(GOOD_BYTES), table=damaged(TABLE.encode("utf-8")),
       table_is_directory=st.booleans())
def test_fuzzed_release_never_escapes_and_every_line_is_accounted_for(tmp_path, data, table, table_is_directory):
    case = pathlib.Path(tempfile.mkdtemp(dir=tmp_path))  # Hypothesis may replay an example.
    (case / "t").mkdir()
    if table_is_directory:
        (case / "t" / "cities.csv").mkdir()
    else:
        (case / "t" / "cities.csv").write_bytes(table)
    path = case / "split.tsv"
    path.write_bytes(data)

    sqa_file = sqa.SqaFile(str(path), str(case))
    try:
        sqa_file.check_header()
    except ReaderError:
        pass  # A damaged header: the job refuses the file up front with this error.
    where, line_errors, rows = _coverage(sqa_file)
    assert sqa_file.lines_read == _physical_lines(str(path))
    assert sorted(where) == list(range(1, sqa_file.lines_read + 1))
    assert sqa_file.lines_read == (sqa_file.header_lines + sqa_file.question_lines
                                   + sum(e.num_lines for e in line_errors))

    # Interactions: every read question is in an interaction or a question error.
    again = sqa.SqaFile(str(path), str(case))
    items = list(again.interactions())
    interactions = [i for i in items if not isinstance(i, ReaderError)]
    question_errors = [e for e in items if isinstance(e, ReaderError) and e.question_id]
    assert again.questions_read == sum(len(i.questions) for i in interactions) + len(question_errors)

    # The per-element work of the job raises nothing but its counted errors.
    converter = make_converter(case, max_seq_length=64)
    for interaction in interactions:
        try:
            number_annotation.add_numeric_values(interaction)
        except ValueError:
            continue
        for index in range(len(interaction.questions)):
            try:
                converter.convert(interaction, index)
            except ConversionError:
                pass


@FUZZ
@given(table=damaged(TABLE.encode("utf-8") + b"Rome,2873000\nBern,\"133,115\"\n"))
def test_fuzzed_table_files_raise_only_reader_errors(tmp_path, table):
    path = pathlib.Path(tempfile.mkdtemp(dir=tmp_path)) / "t.csv"
    path.write_bytes(table)
    try:
        parsed = read_csv_table(str(path), "t")
    except ReaderError as e:
        assert e.reason in {"table_not_utf8", "ragged_table", "empty_table", "bad_csv"}
        return
    number_annotation.add_numeric_table_values(parsed)
    assert len(parsed.rows) >= 1 and all(len(r.cells) == len(parsed.columns) for r in parsed.rows)

