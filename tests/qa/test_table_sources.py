"""Big and awkward tables a user points `ask` at (tapas_tf/qa/table_sources.py, and the windows behind
TableQA): a CSV over the size limit, a SQLite table of 10^6 rows, 10,000 columns, 1 MB cells.
Each gets a clear error or an answer that states its limit. The model is the scripted runner of
test_window_reading (no weights), so every case runs in seconds."""

import sqlite3

import pandas as pd
import pytest

from tapas_tf.inference.decoding import DecodingRule
from tapas_tf.qa.table_qa import TableQA
from tapas_tf.qa.table_sources import ROWS_TOTAL, read_table_source
from tapas_tf.qa.tables import AskError
from tests.qa.test_window_reading import ScriptedRunner, make_encoder, token_is, vocab  # noqa: F401


def write_csv(path, rows):
    path.write_text("city,colour\n" + "".join(f"town{i},{'red' if i % 3 == 0 else 'blue'}\n" for i in range(rows)))
    return str(path)


def counting_qa(vocab, **options):  # noqa: F811
    encoder = make_encoder(vocab)
    return TableQA(ScriptedRunner(token_is(encoder, "red", 1), "COUNT"), encoder, DecodingRule(), name="scripted",
                   **options)


def test_a_csv_over_the_size_limit_is_refused_with_the_limit_named(tmp_path):
    path = write_csv(tmp_path / "big.csv", 2_000)
    with pytest.raises(AskError, match=r"big.csv is \d\d,\d\d\d bytes, more than the 0\.01 MB allowed \(--max_table_mb\); "
                                       r"raise the limit, or read only its first rows \(--max_rows\)"):
        read_table_source(path, max_mb=0.01)


def test_a_csv_over_the_size_limit_is_streamed_to_its_first_rows_with_max_rows(tmp_path, vocab):  # noqa: F811
    path = write_csv(tmp_path / "big.csv", 2_000)
    frame = read_table_source(path, max_mb=0.01, max_rows=90)
    assert len(frame) == 90 and frame.attrs[ROWS_TOTAL] == "more" and frame.iloc[-1, 0] == "town89"
    result = counting_qa(vocab).answer(frame, "how many are red?")
    assert result.value == 30  # Rows 0, 3, ..., 87 of the 90 read.
    assert any(d.startswith("Only the first 90 of its rows were read") for d in result.diagnostics)


def test_a_sqlite_table_of_a_million_rows_is_read_in_chunks_to_the_limit(tmp_path, vocab):  # noqa: F811
    path = str(tmp_path / "shop.db")
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE orders (city TEXT, colour TEXT)")
        connection.executemany("INSERT INTO orders VALUES (?, ?)",
                               ((f"town{i}", "red" if i % 3 == 0 else "blue") for i in range(1_000_000)))
        connection.execute("CREATE TABLE other (x TEXT)")
        connection.execute("INSERT INTO other VALUES ('y')")
    with pytest.raises(AskError, match=r"holds 2 tables \(orders, other\); name one \(--table_name\)"):
        read_table_source(path)
    with pytest.raises(AskError, match="has no table 'order'"):
        read_table_source(path, table_name="order")
    frame = read_table_source(path, table_name="orders", max_rows=3_000)
    assert len(frame) == 3_000 and frame.attrs[ROWS_TOTAL] == 1_000_000
    result = counting_qa(vocab).answer(frame, "how many are red?")
    assert result.value == 1_000 and result.reading.rows_read == 3_000
    assert any(d.startswith("Only the first 3,000 of its 1,000,000 rows were read") for d in result.diagnostics)
    assert len(read_table_source(f"sqlite:///{path}", table_name="other")) == 1


def test_a_csv_table_name_is_refused(tmp_path):
    with pytest.raises(AskError, match="a table name applies to a database only"):
        read_table_source(write_csv(tmp_path / "t.csv", 3), table_name="orders")


def test_a_table_of_ten_thousand_columns_keeps_the_column_the_question_names(vocab):  # noqa: F811
    wide = pd.DataFrame({f"c{i}": [str(i + r) for r in range(3)] for i in range(10_000)})
    wide["colour"] = ["red", "blue", "red"]
    encoder = make_encoder(vocab, max_seq_length=128)
    qa = TableQA(ScriptedRunner(token_is(encoder, "red", 0), "COUNT"), encoder, DecodingRule(), name="scripted")
    result = qa.answer(wide, "how many colour are red?")
    assert wide.columns.get_loc("colour") in result.kept_columns
    assert any("of the table's 10,001 columns were kept" in d for d in result.diagnostics)
    assert result.reading.rows_read == 3


@pytest.mark.parametrize("rows", [5, 300])  # One example with its cells cut, and windows.
def test_cells_of_a_megabyte_are_cut_and_said_so(vocab, rows):  # noqa: F811
    frame = pd.DataFrame({"colour": ["red" if i % 3 == 0 else "blue" for i in range(rows)],
                          "notes": ["short"] * rows})
    frame.loc[1, "notes"] = "word " * 200_000  # 1 MB
    encoder = make_encoder(vocab, max_seq_length=128)
    qa = TableQA(ScriptedRunner(token_is(encoder, "red", 0), "COUNT"), encoder, DecodingRule(), name="scripted")
    result = qa.answer(frame, "how many are red?")
    assert result.value == len(range(0, rows, 3))
    assert any("cut" in d and "word pieces" in d for d in result.diagnostics), result.diagnostics
    assert max(len(f["input_ids"]) for f in qa.runner.examples) <= 128
