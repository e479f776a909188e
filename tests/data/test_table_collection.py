"""The distinct tables of interaction files, and `tapas-tf collect-tables` end to end."""

import pytest

from tapas_tf.data import interaction_io
from tapas_tf.data.table_collection import collect_tables, read_table_name_file, table_name, table_names_in
from tests.command_runner import run_command
from tests.conversion_fixtures import make_interaction


@pytest.mark.parametrize("table_id, name", [
    ("csv/204-csv/590.csv", "csv/204-csv/590.csv"),
    ("204-csv/590.csv", "csv/204-csv/590.csv"),
    ("table_csv/204_590.csv", "csv/204-csv/590.csv"),    # SQA's name of the same WTQ table.
    ("  csv/203-csv/7.csv\n", "csv/203-csv/7.csv"),
    ("http://en.wikipedia.org/wiki/Lions_1", "http://en.wikipedia.org/wiki/Lions_1"),
    ("my-table", "my-table"),
])
def test_table_name(table_id, name):
    assert table_name(table_id) == name


def _write(path, *table_ids):
    """One interaction per id; the table's one cell says which interaction it came from."""
    interactions = [make_interaction(["id"], [[f"{table_id}#{n}"]], [("q?", [(0, 0)])], table_id=table_id)
                    for n, table_id in enumerate(table_ids)]
    interaction_io.write_interactions(str(path), interactions)
    return str(path)


def test_collect_keeps_each_table_once_and_leaves_out_the_excluded(tmp_path):
    train = _write(tmp_path / "train.tfrecord", "csv/204-csv/590.csv", "csv/204-csv/590.csv",
                   "csv/203-csv/7.csv", "http://en.wikipedia.org/wiki/Lions_1")
    pages = _write(tmp_path / "pages.txtpb", "http://en.wikipedia.org/wiki/Lions_1", "table_csv/205_3.csv")
    dev = _write(tmp_path / "dev.tfrecord", "table_csv/203_7.csv")  # SQA's dev names WTQ's csv/203-csv/7.csv.
    excluded = table_names_in([dev])
    assert excluded == {"csv/203-csv/7.csv"}
    tables, counts = collect_tables([train, pages], excluded)
    assert [t.id for t in tables] == ["csv/204-csv/590.csv", "http://en.wikipedia.org/wiki/Lions_1",
                                      "csv/205-csv/3.csv"]
    assert tables[0].table.rows[0].cells[0].text == "csv/204-csv/590.csv#0"  # The first interaction's table.
    assert all(not t.questions for t in tables)
    assert dict(counts) == {"tables_read": 4, "kept": 3, "left_out_excluded": 1, "duplicate_interactions": 2}


def test_name_file_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "names.txt"
    path.write_text("# evaluation tables\n\ntable_csv/204_590.csv\nhttp://x/1\n")
    assert read_table_name_file(str(path)) == {"csv/204-csv/590.csv", "http://x/1"}


def test_collect_tables_command(tmp_path):
    train = _write(tmp_path / "train.tfrecord", "csv/204-csv/590.csv", "csv/203-csv/7.csv", "csv/201-csv/1.csv")
    dev = _write(tmp_path / "dev.tfrecord", "csv/203-csv/7.csv")
    names = tmp_path / "names.txt"
    names.write_text("table_csv/201_1.csv\n")
    output, excluded_out = tmp_path / "synth" / "train.tfrecord", tmp_path / "excluded.txt"
    result = run_command("collect-tables", f"--interactions={train}", f"--exclude_interactions={dev}",
                         f"--exclude_tables={names}", f"--output={output}", f"--excluded_out={excluded_out}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("3 distinct tables: 1 kept, 2 left out (among 2 excluded names)")
    assert [i.id for i in interaction_io.read_interactions(str(output))] == ["csv/204-csv/590.csv"]
    assert excluded_out.read_text() == "csv/201-csv/1.csv\ncsv/203-csv/7.csv\n"
    result = run_command("collect-tables", f"--interactions={tmp_path / 'missing.tfrecord'}", f"--output={output}")
    assert result.returncode == 1 and result.stderr.strip() == (
        f"tapas-tf collect-tables: error: {tmp_path / 'missing.tfrecord'}: no such interaction file")
    result = run_command("collect-tables", f"--interactions={train}", f"--output={tmp_path / 'tables.csv'}")
    assert result.returncode == 1 and "unknown interaction file type" in result.stderr
