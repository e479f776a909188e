"""Table collections: folders of CSV/TSV files, SQLite files, SQLAlchemy URLs; titles; skips; limits."""

import logging
import os
import sqlite3
from contextlib import closing

import pytest

from tapas_tf.data.table_files import TableFileError
from tapas_tf.retrieval import collection as collection_module
from tapas_tf.retrieval.collection import (
    CollectionError,
    CollectionTable,
    open_collection,
    read_titles,
    table_to_interaction_table,
)


def _write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def _cells(table: CollectionTable):
    return [list(table.frame.columns)] + table.frame.values.tolist()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "tables"
    _write(root / "csv" / "204-csv" / "590.csv", 'Name,Height\nTorre Jaume I,107 m\n"Gant, Hohtaelli",94 m\n')
    _write(root / "csv" / "204-csv" / "12.tsv", "City\tCountry\nParis\tFrance\n")
    _write(root / "a_semicolons.CSV", "x;y\n1;\n")  # Upper-case suffix; the delimiter sniffed.
    _write(root / "deep" / "er" / "still.tsv", "only\n  spaced  \n")
    _write(root / "empty.csv", "")
    _write(root / "header_only.csv", "a,b\n")
    _write(root / "image.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    _write(root / "latin1.csv", "name\nJos\xe9\n".encode("latin-1"))
    _write(root / "notes.txt", "not a table file\n")
    os.symlink(root / "gone.csv", root / "dangling.csv")  # Listed, cannot be opened.
    return root


def test_a_folder_reads_every_table_file_in_id_order_and_names_what_it_skips(folder):
    collection = open_collection(str(folder))
    assert collection.table_ids == [
        "a_semicolons.CSV", "csv/204-csv/12.tsv", "csv/204-csv/590.csv", "dangling.csv", "deep/er/still.tsv",
        "empty.csv", "header_only.csv", "image.csv", "latin1.csv"]
    tables = list(collection)
    assert [(t.table_id, t.title) for t in tables] == [
        ("a_semicolons.CSV", "a_semicolons"), ("csv/204-csv/12.tsv", "12"), ("csv/204-csv/590.csv", "590"),
        ("deep/er/still.tsv", "still")]
    by_id = {t.table_id: t for t in tables}
    assert _cells(by_id["csv/204-csv/590.csv"]) == [["Name", "Height"], ["Torre Jaume I", "107 m"],
                                                    ["Gant, Hohtaelli", "94 m"]]
    assert _cells(by_id["csv/204-csv/12.tsv"]) == [["City", "Country"], ["Paris", "France"]]
    assert _cells(by_id["a_semicolons.CSV"]) == [["x", "y"], ["1", ""]]
    assert _cells(by_id["deep/er/still.tsv"]) == [["only"], ["  spaced  "]]  # Cells exactly as written.
    first = by_id["csv/204-csv/590.csv"]
    assert first.source == str(folder / "csv" / "204-csv" / "590.csv") and os.path.isabs(first.source)
    assert (first.rows_total, first.rows_truncated) == (2, False)

    report = collection.report
    assert report.tables_read == 4 and report.rows_truncated == 0 and report.titles_unmatched == 0
    skipped = {os.path.basename(entry["source"]): entry["reason"] for entry in report.skipped}
    assert skipped == {"dangling.csv": "unreadable", "empty.csv": "empty", "header_only.csv": "empty",
                       "image.csv": "binary", "latin1.csv": "binary"}
    assert report.skipped_by_reason == {"unreadable": 1, "empty": 2, "binary": 2}
    messages = {os.path.basename(entry["source"]): entry["message"] for entry in report.skipped}
    assert messages["latin1.csv"].startswith(f"{folder / 'latin1.csv'} is not UTF-8 text (byte ")
    assert messages["image.csv"].startswith(f"{folder / 'image.csv'} holds NUL bytes")
    assert messages["header_only.csv"] == f"{folder / 'header_only.csv'}: the table has no rows (a header alone is not a table)"
    assert messages["dangling.csv"] == f"{folder / 'dangling.csv'}: No such file or directory"
    assert report.as_dict()["skipped_by_reason"] == report.skipped_by_reason


def test_iteration_is_lazy_and_a_second_pass_starts_a_new_report(folder):
    collection = open_collection(folder)  # A PathLike too.
    tables = iter(collection)
    assert next(tables).table_id == "a_semicolons.CSV"
    assert collection.report.tables_read == 1 and collection.report.skipped == []  # Read as it goes.
    assert len(list(collection)) == 4
    assert collection.report.tables_read == 4 and len(collection.report.skipped) == 5


def test_a_bad_csv_file_is_skipped_as_bad_csv(tmp_path):
    _write(tmp_path / "ragged.csv", "a,b\n1,2\n1,2,3,4\n")
    _write(tmp_path / "ok.csv", "a\n1\n")
    collection = open_collection(tmp_path)
    assert [t.table_id for t in collection] == ["ok.csv"]
    assert collection.report.skipped_by_reason == {"bad_csv": 1}
    assert "does not parse as CSV" in collection.report.skipped[0]["message"]


def test_a_file_over_max_rows_keeps_its_first_rows_and_warns_once(tmp_path, caplog):
    _write(tmp_path / "long.csv", "n\n" + "".join(f"{i}\n" for i in range(25)))
    _write(tmp_path / "exact.csv", "n\n" + "".join(f"{i}\n" for i in range(10)))
    with caplog.at_level(logging.WARNING, logger=collection_module.__name__):
        collection = open_collection(tmp_path, max_rows=10)
        exact, long = list(collection)
    assert (long.rows_truncated, long.rows_total, len(long.frame)) == (True, None, 10)  # None: see the docstring.
    assert long.frame["n"].tolist() == [str(i) for i in range(10)]
    assert (exact.rows_truncated, exact.rows_total, len(exact.frame)) == (False, 10, 10)
    assert collection.report.rows_truncated == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"{tmp_path / 'long.csv'}: kept the first 10 rows of more"]


# --- titles ----------------------------------------------------------------------------------------


def test_titles_file_sets_titles_and_counts_ids_it_does_not_match(folder, tmp_path, caplog):
    titles = _write(tmp_path / "titles.tsv", 'table_id\ttitle\ncsv/204-csv/590.csv\tAerial lift pylons "tall"\n\n'
                                             "deep/er/still.tsv\tStill\nmissing.csv\tNowhere\n")
    with caplog.at_level(logging.WARNING, logger=collection_module.__name__):
        collection = open_collection(str(folder), titles_file=str(titles))
    assert {t.table_id: t.title for t in collection} == {
        "a_semicolons.CSV": "a_semicolons", "csv/204-csv/12.tsv": "12",
        "csv/204-csv/590.csv": 'Aerial lift pylons "tall"', "deep/er/still.tsv": "Still"}
    assert collection.report.titles_unmatched == 1
    assert any("1 titles name no table" in r.getMessage() and "'missing.csv'" in r.getMessage()
               for r in caplog.records)


def test_titles_columns_may_come_in_any_order_with_others_beside(tmp_path):
    path = _write(tmp_path / "t.tsv", "title\tnote\ttable_id\nCities\tx\tc.csv\n")
    assert read_titles(str(path)) == {"c.csv": "Cities"}


@pytest.mark.parametrize("content, where, says", [
    ("id\ttitle\na\tA\n", 1, "no column 'table_id'"),
    ("table_id\tname\na\tA\n", 1, "no column 'title'"),
    ("", 1, "no column 'table_id'"),
    ("table_id\ttitle\na\tA\nb\n", 3, "1 tab-separated fields, the header has 2"),
    ("table_id\ttitle\na\tA\n\nb\tB\textra\n", 4, "3 tab-separated fields"),
    ("table_id\ttitle\n\tA\n", 2, "an empty table_id"),
    ("table_id\ttitle\na\tA\nb\tB\na\tC\n", 4, "a second title for 'a' (the first is on line 2)"),
])
def test_a_bad_titles_file_names_its_line(tmp_path, folder, content, where, says):
    path = _write(tmp_path / "titles.tsv", content)
    with pytest.raises(CollectionError) as raised:
        open_collection(str(folder), titles_file=str(path))
    assert str(raised.value).startswith(f"{path}:{where}: ")
    assert says in str(raised.value)


def test_a_titles_file_that_is_missing_or_not_text(tmp_path, folder):
    with pytest.raises(CollectionError, match=r"nope.tsv: No such file or directory$"):
        open_collection(str(folder), titles_file=str(tmp_path / "nope.tsv"))
    latin = _write(tmp_path / "latin.tsv", "table_id\ttitle\na\tJos\xe9\n".encode("latin-1"))
    with pytest.raises(CollectionError, match=r"latin.tsv: not UTF-8 text"):
        open_collection(str(folder), titles_file=str(latin))


# --- specs -----------------------------------------------------------------------------------------


def test_a_missing_spec_and_a_file_that_is_no_collection(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(CollectionError, match=f"^{missing}: no such file or directory$"):
        open_collection(str(missing))
    with pytest.raises(CollectionError, match=f"^{missing}.db: no such file or directory$"):
        open_collection(f"sqlite:///{missing}.db")
    assert not os.path.exists(f"{missing}.db")  # Not created by connecting.
    csv_file = _write(tmp_path / "one.csv", "a\n1\n")
    with pytest.raises(CollectionError, match="neither a folder of .csv/.tsv files nor a SQLite database"):
        open_collection(str(csv_file))
    with pytest.raises(CollectionError, match="max_rows must be at least 1, got 0"):
        open_collection(str(tmp_path), max_rows=0)


def test_a_file_given_as_sqlite_that_is_not_a_database(tmp_path):
    not_db = _write(tmp_path / "tables.db", "a,b\n1,2\n")
    with pytest.raises(CollectionError, match=f"^{not_db}: not a SQLite database$"):
        open_collection(f"sqlite:///{not_db}")
    assert issubclass(CollectionError, ValueError)


def _database(path, tables):
    with sqlite3.connect(path) as connection:
        for name, (columns, rows) in tables.items():
            connection.execute(f'CREATE TABLE "{name}" ({", ".join(columns)})')
            connection.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(columns))})', rows)
    connection.close()
    return str(path)


@pytest.fixture
def database(tmp_path):
    return _database(tmp_path / "collection.sqlite", {
        "cities": (["name TEXT", "population INTEGER", "area REAL", "note TEXT", "photo BLOB"],
                   [("Paris", 2100000, 105.4, None, b"\x89PNG\x00"), ("Lyon", 520000, 47.0, "on the \"Rhone\"",
                                                                       "café".encode())]),
        "events log": (["n INTEGER"], [(i,) for i in range(2500)]),
        "nothing": (["a TEXT"], []),
    })


def test_a_sqlite_file_reads_every_table_with_cells_as_text(database, caplog):
    with caplog.at_level(logging.WARNING, logger=collection_module.__name__):
        collection = open_collection(database, max_rows=1000)  # A path with SQLite's header.
        assert collection.table_ids == ["cities", "events log", "nothing"]
        cities, events = list(collection)
    assert (cities.table_id, cities.title, cities.source) == ("cities", "cities", f"sqlite:///{database}#cities")
    assert _cells(cities) == [["name", "population", "area", "note", "photo"],
                              ["Paris", "2100000", "105.4", "", ""], ["Lyon", "520000", "47", 'on the "Rhone"', "café"]]
    assert (cities.rows_total, cities.rows_truncated) == (2, False)
    assert events.source == f"sqlite:///{database}#events log"
    assert (events.rows_total, events.rows_truncated, len(events.frame)) == (2500, True, 1000)
    assert events.frame["n"].tolist() == [str(i) for i in range(1000)]
    report = collection.report
    assert (report.tables_read, report.rows_truncated) == (2, 1)
    assert report.skipped == [{"source": f"sqlite:///{database}#nothing", "reason": "empty",
                               "message": f"sqlite:///{database}#nothing: the table has no rows"}]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"sqlite:///{database}#events log: kept the first 1000 rows of 2,500"]


def test_a_sqlite_url_fetches_in_chunks_and_is_read_only(database, monkeypatch):
    fetched = []
    real = collection_module._fetch_rows

    def counting(cursor, limit):
        rows = real(cursor, limit)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(collection_module, "FETCH_ROWS", 100)
    monkeypatch.setattr(collection_module, "_fetch_rows", counting)
    collection = open_collection(f"sqlite:///{database}", max_rows=1000)
    assert [t.table_id for t in collection] == ["cities", "events log"]
    assert fetched == [2, 1001, 0]  # One row past the limit says the table was cut; never the 2,500.
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        collection._source._connect().execute("CREATE TABLE x (a)")


@pytest.fixture
def ghost_database(tmp_path):
    """A database with a readable table and a virtual table whose module no SQLite has."""
    path = _database(tmp_path / "ghost.db", {"a": (["x INTEGER"], [(1,)])})
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA writable_schema=ON")
        connection.execute("INSERT INTO sqlite_master VALUES "
                           "('table', 'ghost', 'ghost', 0, 'CREATE VIRTUAL TABLE ghost USING nosuchmodule(x)')")
        connection.commit()
    return path


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+pysqlite"])
def test_a_table_that_cannot_be_read_is_skipped_as_unreadable(ghost_database, scheme):
    if scheme != "sqlite":
        pytest.importorskip("sqlalchemy")
    collection = open_collection(f"{scheme}:///{ghost_database}")
    assert [t.table_id for t in collection] == ["a"]
    (skipped,) = collection.report.skipped
    assert (skipped["source"], skipped["reason"]) == (f"{scheme}:///{ghost_database}#ghost", "unreadable")
    assert "no such module: nosuchmodule" in skipped["message"]


def test_the_titles_file_names_sqlite_tables(database, tmp_path):
    titles = _write(tmp_path / "titles.tsv", "table_id\ttitle\nevents log\tThe events\n")
    assert [t.title for t in open_collection(database, titles_file=str(titles))] == ["cities", "The events"]


def test_a_collection_table_becomes_an_interaction_table(folder):
    table = next(iter(open_collection(folder)))
    proto = table_to_interaction_table(table)
    assert (proto.table_id, proto.document_title) == ("a_semicolons.CSV", "a_semicolons")
    assert [c.text for c in proto.columns] == ["x", "y"]
    assert [[c.text for c in row.cells] for row in proto.rows] == [["1", ""]]
    empty = CollectionTable("t", "s", "T", table.frame.iloc[:0])
    with pytest.raises(TableFileError, match="no rows"):
        table_to_interaction_table(empty)


# --- SQLAlchemy --------------------------------------------------------------------------------------


def test_a_database_url_through_sqlalchemy(database, caplog):
    pytest.importorskip("sqlalchemy")
    with caplog.at_level(logging.WARNING, logger=collection_module.__name__):
        collection = open_collection(f"sqlite+pysqlite:///{database}", max_rows=1000)
        cities, events = list(collection)
    assert (cities.table_id, cities.source) == ("cities", f"sqlite+pysqlite:///{database}#cities")
    assert _cells(cities) == [["name", "population", "area", "note", "photo"],
                              ["Paris", "2100000", "105.4", "", ""], ["Lyon", "520000", "47", 'on the "Rhone"', "café"]]
    assert (events.table_id, events.rows_total, events.rows_truncated, len(events.frame)) == (
        "events log", None, True, 1000)
    assert events.frame["n"].tolist() == [str(i) for i in range(1000)]
    report = collection.report
    assert (report.tables_read, report.rows_truncated, report.skipped_by_reason) == (2, 1, {"empty": 1})
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"sqlite+pysqlite:///{database}#events log: kept the first 1000 rows of more"]


def test_a_database_url_hides_its_password_and_names_a_missing_driver():
    pytest.importorskip("sqlalchemy")
    with pytest.raises(CollectionError) as raised:
        open_collection("postgresql+nosuchdriver://me:secret@localhost/db")
    assert "secret" not in str(raised.value) and str(raised.value).startswith("postgresql+nosuchdriver://me:***@")


def test_without_sqlalchemy_a_database_url_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_sqlalchemy(name, *args, **kwargs):
        if name == "sqlalchemy" or name.startswith("sqlalchemy."):
            raise ImportError("No module named 'sqlalchemy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sqlalchemy)
    with pytest.raises(CollectionError, match=r"^postgresql://\.\.\.: .*pip install sqlalchemy"):
        open_collection("postgresql://me:secret@localhost/db")
