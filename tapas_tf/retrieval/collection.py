"""A table collection: the tables retrieval searches, read one at a time from a folder or a database.

    >>> import os, sqlite3, tempfile
    >>> from tapas_tf.retrieval.collection import open_collection
    >>> folder = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(folder, "csv", "204-csv"))
    >>> with open(os.path.join(folder, "csv", "204-csv", "590.csv"), "w") as f:
    ...     _ = f.write("Name,Height\\nTorre Jaume I,107 m\\n")
    >>> with open(os.path.join(folder, "notes.csv"), "w") as f:
    ...     pass                                       # an empty file: skipped, and counted
    >>> collection = open_collection(folder)
    >>> [(t.table_id, t.title, t.frame.values.tolist()) for t in collection]
    [('csv/204-csv/590.csv', '590', [['Torre Jaume I', '107 m']])]
    >>> collection.report.tables_read, collection.report.skipped_by_reason
    (1, {'empty': 1})
    >>> database = os.path.join(folder, "cities.db")
    >>> with sqlite3.connect(database) as connection:
    ...     _ = connection.execute("CREATE TABLE cities (name TEXT, population INTEGER)")
    ...     _ = connection.execute("INSERT INTO cities VALUES ('Paris', 2100000)")
    >>> [(t.table_id, t.source.endswith("cities.db#cities"), t.frame.values.tolist())
    ...  for t in open_collection(database)]
    [('cities', True, [['Paris', '2100000']])]

What a spec names (`open_collection`):

- a folder: every `.csv` and `.tsv` file under it (recursively, any letter case), sorted by table
  id, the path relative to the folder with `/` separators; read by `tapas_tf.data.table_files`'
  rules (the ask API's: cells exactly as written, the delimiter sniffed; a `.tsv` is tab-separated).
  Title: the file name without its extension.
- `sqlite:///PATH`, or the path of a file that starts with SQLite's header: every table of the
  database (not SQLite's own `sqlite_%` tables), read with the standard library's `sqlite3`,
  read-only, rows fetched in chunks. Table id and title: the table's name; source
  `sqlite:///ABSOLUTE_PATH#TABLE`.
- any other URL (`postgresql://user@host/db`, `sqlite+pysqlite:///x.db`, ...): through SQLAlchemy
  (optional: `pip install sqlalchemy`, and the database's driver) and `pandas.read_sql_query`, at
  most `max_rows + 1` rows asked for (`LIMIT`), in chunks. Sources show the URL without its password.

A `titles_file` (a TSV with the columns `table_id` and `title`) overrides titles; its ids that
name no table of the collection are counted (`report.titles_unmatched`) and logged, not refused,
since one titles file often serves several collections.

Every cell is text (`table_files.cell_text`: SQL NULL is "", 2.0 is "2"; a BLOB is its UTF-8 text,
or "" when it is not text). A table keeps at most `max_rows` rows: the index would otherwise be
dominated by a few huge tables, and the reader reads only a few hundred rows anyway. A table cut
there says so (`rows_truncated`) and logs one warning. `rows_total` is the real number of rows
where that is cheap to know: always for a table not cut; for a SQLite table cut, from
`SELECT COUNT(*)` (SQLite counts 10^6 rows in milliseconds); None for a cut CSV file (counting
its records means parsing the rest of it: quoted cells may hold line breaks) and for a cut table
behind SQLAlchemy (a server's COUNT(*) over a big table can take long).

Iteration is lazy, one table in memory at a time (a file's bytes are read whole, as the ask API
reads them, but parsed only to `max_rows + 1` rows). A file or table that cannot be read is skipped,
named in `report.skipped` with a reason, and iteration goes on: `unreadable` (an OS or database
error), `empty` (no header, or a header and no rows: nothing to answer from), `binary` (NUL bytes,
or not UTF-8 text), `bad_csv` (does not parse). Errors in the spec or the titles file itself raise
`CollectionError` at `open_collection`, before any table is read.
"""

from __future__ import annotations

import csv
import dataclasses
import fnmatch
import logging
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import pandas as pd

from tapas_tf.data import table_files
from tapas_tf.data.protos import interaction_pb2

__all__ = [
    "CollectionError",
    "CollectionReport",
    "CollectionTable",
    "TableCollection",
    "absolute_spec",
    "open_collection",
    "recorded_spec",
    "read_titles",
    "table_to_interaction_table",
]

log = logging.getLogger(__name__)

SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_URL_PREFIX = "sqlite:///"
TABLE_FILE_SUFFIXES = (".csv", ".tsv")
# Rows per database fetch: small enough to bound memory, large enough that the round trips
# do not dominate.
FETCH_ROWS = 1000


class CollectionError(ValueError):
    """A collection spec or titles file that cannot be opened; the message names it."""


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: DataFrames have no truth value for ==.
class CollectionTable:
    """One table of a collection: its cells as text, at most the collection's `max_rows` rows."""

    table_id: str
    source: str
    title: str
    frame: pd.DataFrame
    rows_total: Optional[int] = None  # None: not cheap to know (see the module docstring).
    rows_truncated: bool = False


@dataclasses.dataclass
class CollectionReport:
    """What one pass over a collection read, skipped and cut."""

    tables_read: int = 0
    skipped: List[Dict[str, str]] = dataclasses.field(default_factory=list)
    skipped_by_reason: Dict[str, int] = dataclasses.field(default_factory=dict)
    rows_truncated: int = 0
    titles_unmatched: int = 0

    def skip(self, source: str, reason: str, message: str) -> None:
        self.skipped.append({"source": source, "reason": reason, "message": message})
        self.skipped_by_reason[reason] = self.skipped_by_reason.get(reason, 0) + 1

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, eq=False)
class _Read:
    """A table as a source read it, before the collection gives it its title."""

    table_id: str
    source: str
    default_title: str
    frame: pd.DataFrame
    rows_total: Optional[int]
    rows_truncated: bool


@dataclasses.dataclass(frozen=True)
class _Skip:
    source: str
    reason: str
    message: str


_Item = Union[_Read, _Skip]


# --- folders of CSV / TSV files --------------------------------------------------------------------


class _FolderSource:
    def __init__(self, folder: str, patterns: Optional[Sequence[str]] = None):
        self.folder = os.path.abspath(folder)
        self.patterns = tuple(patterns) if patterns else None
        self.files = self._list()
        self._paths = dict(self.files)

    def _list(self) -> List[Tuple[str, str]]:
        """(table id, absolute path) of every table file under the folder, sorted by id."""
        found = []
        for directory, _, names in os.walk(self.folder):
            for name in names:
                if not name.lower().endswith(TABLE_FILE_SUFFIXES):
                    continue
                path = os.path.join(directory, name)
                table_id = os.path.relpath(path, self.folder).replace(os.sep, "/")
                if self.patterns is None or any(fnmatch.fnmatchcase(table_id, p) for p in self.patterns):
                    found.append((table_id, path))
        return sorted(found)

    @property
    def table_ids(self) -> List[str]:
        return [table_id for table_id, _ in self.files]

    def read(self, max_rows: int) -> Iterator[_Item]:
        for table_id, path in self.files:
            yield self._read_file(table_id, path, max_rows)

    def read_one(self, table_id: str, max_rows: int) -> _Item:
        return self._read_file(table_id, self._paths[table_id], max_rows)

    @staticmethod
    def _read_file(table_id: str, path: str, max_rows: int) -> _Item:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:  # Permissions, a dangling link, a file gone since the listing.
            return _Skip(path, "unreadable", f"{path}: {e.strerror or e}")
        delimiter = "\t" if path.lower().endswith(".tsv") else None  # None: sniffed.
        try:
            # One row past the limit tells a table cut at max_rows from one of exactly max_rows.
            frame = table_files.read_csv_bytes(data, path, delimiter, nrows=max_rows + 1)
            table_files.check_frame(frame)
        except table_files.TableFileError as e:
            message = str(e) if str(e).startswith(path) else f"{path}: {e}"
            return _Skip(path, e.reason, message)
        truncated = len(frame) > max_rows
        return _Read(table_id, path, os.path.splitext(os.path.basename(path))[0], frame.iloc[:max_rows],
                     None if truncated else len(frame), truncated)


# --- databases -------------------------------------------------------------------------------------


def _db_cell(value: object) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return ""  # An image or other binary value: no text to retrieve it by.
    return table_files.cell_text(value)


def _text_frame(header: Sequence[object], rows: Sequence[Sequence[object]]) -> pd.DataFrame:
    """Database rows as read_table gives a CSV file: every cell and column name as text."""
    return pd.DataFrame([[_db_cell(value) for value in row] for row in rows],
                        columns=pd.Index([table_files.column_name(name) for name in header]), dtype=str)


def _is_sqlite_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _quote_sqlite(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _SqliteSource:
    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        if not os.path.exists(path):
            raise CollectionError(f"{path}: no such file or directory")
        if os.path.isdir(path) or not _is_sqlite_file(path):
            raise CollectionError(f"{path}: not a SQLite database")
        try:
            with closing(self._connect()) as connection:
                self.table_ids = [name for (name,) in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                    "ORDER BY name")]
        except sqlite3.Error as e:  # A SQLite header over a damaged or encrypted file.
            raise CollectionError(f"{path}: not a readable SQLite database: {e}") from None

    def _connect(self) -> sqlite3.Connection:
        # Read-only, through a URI: plain connect() would create a database at a mistyped path.
        return sqlite3.connect(Path(self.path).as_uri() + "?mode=ro", uri=True)

    def read(self, max_rows: int) -> Iterator[_Item]:
        with closing(self._connect()) as connection:
            for name in self.table_ids:
                yield self._read_table(connection, name, max_rows)

    def read_one(self, table_id: str, max_rows: int) -> _Item:
        with closing(self._connect()) as connection:
            return self._read_table(connection, table_id, max_rows)

    def _read_table(self, connection: sqlite3.Connection, name: str, max_rows: int) -> _Item:
        source = f"{SQLITE_URL_PREFIX}{self.path}#{name}"
        try:
            with closing(connection.execute(f"SELECT * FROM {_quote_sqlite(name)}")) as cursor:
                header = [column[0] for column in cursor.description]
                rows = _fetch_rows(cursor, max_rows + 1)
            truncated = len(rows) > max_rows
            total = connection.execute(f"SELECT COUNT(*) FROM {_quote_sqlite(name)}").fetchone()[0] \
                if truncated else len(rows)
        except sqlite3.Error as e:  # E.g. a virtual table whose module this SQLite lacks.
            return _Skip(source, "unreadable", f"{source}: {e}")
        if not rows:
            return _Skip(source, "empty", f"{source}: the table has no rows")
        return _Read(name, source, name, _text_frame(header, rows[:max_rows]), total, truncated)


def _fetch_rows(cursor: sqlite3.Cursor, limit: int) -> List[tuple]:
    """At most `limit` rows, fetched in chunks: a 10^6-row table is never held whole."""
    rows: List[tuple] = []
    while len(rows) < limit:
        chunk = cursor.fetchmany(min(FETCH_ROWS, limit - len(rows)))
        if not chunk:
            break
        rows.extend(chunk)
    return rows


class _SqlAlchemySource:
    def __init__(self, url: str):
        try:
            import sqlalchemy
        except ImportError:
            raise CollectionError(f"{url.split('://', 1)[0]}://...: reading a database URL needs SQLAlchemy: "
                                  "pip install sqlalchemy (and the database's driver)") from None
        self._sqlalchemy = sqlalchemy
        try:
            self.engine = sqlalchemy.create_engine(url)
            self.url = self.engine.url.render_as_string(hide_password=True)
            self.table_ids = sorted(sqlalchemy.inspect(self.engine).get_table_names())
        except ImportError as e:  # The dialect's driver (psycopg2, pymysql, ...).
            raise CollectionError(f"{_hidden_password(url)}: the database's driver is not installed ({e}); "
                                  "pip install it") from None
        except sqlalchemy.exc.SQLAlchemyError as e:
            raise CollectionError(f"{_hidden_password(url)}: {_database_message(e)}") from None

    def read(self, max_rows: int) -> Iterator[_Item]:
        with self.engine.connect() as connection:
            for name in self.table_ids:
                yield self._read_table(connection, name, max_rows)
        self.engine.dispose()

    def read_one(self, table_id: str, max_rows: int) -> _Item:
        with self.engine.connect() as connection:
            return self._read_table(connection, table_id, max_rows)

    def _read_table(self, connection: Any, name: str, max_rows: int) -> _Item:
        sqlalchemy = self._sqlalchemy
        source = f"{self.url}#{name}"
        # LIMIT (in the dialect's own form) as well as chunks: many drivers fetch a whole result
        # set to the client before the first chunk is read.
        # The name always quoted: a dialect's list of reserved words misses some (SQLite's NOTHING).
        table = sqlalchemy.table(sqlalchemy.sql.quoted_name(name, quote=True))
        query = sqlalchemy.select(sqlalchemy.text("*")).select_from(table).limit(max_rows + 1)
        chunks: List[pd.DataFrame] = []
        try:
            # coerce_float=False: a NUMERIC value stays a Decimal, whose text is as the database holds it.
            with closing(pd.read_sql_query(query, connection, chunksize=FETCH_ROWS, coerce_float=False)) as read:
                for chunk in read:
                    chunks.append(chunk)
                    if sum(map(len, chunks)) > max_rows:
                        break
        except (sqlalchemy.exc.SQLAlchemyError, pd.errors.DatabaseError) as e:  # pandas wraps the first.
            connection.rollback()  # A failed statement aborts the transaction on some servers.
            return _Skip(source, "unreadable", f"{source}: {_database_message(e)}")
        frame = pd.concat(chunks) if chunks else pd.DataFrame()
        if frame.shape[0] == 0:
            return _Skip(source, "empty", f"{source}: the table has no rows")
        truncated = len(frame) > max_rows
        rows = frame.iloc[:max_rows].to_numpy(dtype=object).tolist()
        return _Read(name, source, name, _text_frame(list(frame.columns), rows),
                     None if truncated else len(frame), truncated)


def _database_message(error: BaseException) -> str:
    """The driver's own words: pandas and SQLAlchemy wrap them in the statement and a web link."""
    if isinstance(error, pd.errors.DatabaseError) and error.__cause__ is not None:
        error = error.__cause__
    error = getattr(error, "orig", None) or error  # A DBAPIError's driver exception.
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _hidden_password(url: str) -> str:
    try:
        import sqlalchemy

        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # Not even a URL: say only its scheme.
        return url.split("://", 1)[0] + "://..."


# --- titles ----------------------------------------------------------------------------------------


def recorded_spec(spec: str) -> str:
    """`spec` as an index may write it down: a URL's password hidden."""
    return _hidden_password(spec) if "://" in spec and not spec.startswith(SQLITE_URL_PREFIX) else spec


def read_titles(path: str) -> Dict[str, str]:
    """{table id: title} from a TSV whose header has the columns `table_id` and `title`.

    Tab-separated, no quoting (a title may hold quotes); blank lines are ignored.

    Raises:
      CollectionError: naming `PATH:LINE` for a missing column, a row of the wrong width, an empty
        table id or a second row for one id; `PATH` for a file that cannot be read.
    """
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return _parse_titles(path, csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    except OSError as e:
        raise CollectionError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CollectionError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _parse_titles(path: str, reader: Any) -> Dict[str, str]:
    header = [name.strip() for name in next(reader, [])]
    for column in ("table_id", "title"):
        if column not in header:
            raise CollectionError(f"{path}:1: no column {column!r}; the header is table_id<TAB>title")
    id_column, title_column = header.index("table_id"), header.index("title")
    titles: Dict[str, str] = {}
    first_line: Dict[str, int] = {}
    for record in reader:
        line = reader.line_num
        if not any(field.strip() for field in record):
            continue
        if len(record) != len(header):
            raise CollectionError(f"{path}:{line}: {len(record)} tab-separated fields, the header has {len(header)}")
        table_id, title = record[id_column].strip(), record[title_column].strip()
        if not table_id:
            raise CollectionError(f"{path}:{line}: an empty table_id")
        if table_id in titles:
            raise CollectionError(f"{path}:{line}: a second title for {table_id!r} (the first is on line "
                                  f"{first_line[table_id]})")
        titles[table_id], first_line[table_id] = title, line
    return titles


# --- the collection --------------------------------------------------------------------------------


class TableCollection:
    """The tables of a spec, read lazily: iterate it (more than once if need be).

    `report` describes the latest pass, filled as it goes (complete once a pass has ended).
    """

    def __init__(self, spec: str, source: Any, titles: Dict[str, str], max_rows: int,
                 titles_file: Optional[str] = None, patterns: Optional[Sequence[str]] = None):
        self.spec = spec
        self.max_rows = max_rows
        self.titles_file = titles_file  # Absolute: an index opens the collection again from anywhere.
        self.patterns = list(patterns) if patterns else None
        self._source = source
        self._titles = titles
        unmatched = sorted(set(titles) - set(source.table_ids))
        self._titles_unmatched = len(unmatched)
        if unmatched:
            log.warning("%d titles name no table of %s, e.g. %s", len(unmatched), spec,
                        ", ".join(repr(table_id) for table_id in unmatched[:3]))
        self.report = CollectionReport(titles_unmatched=self._titles_unmatched)
        self._id_set: Optional[frozenset] = None  # Built on the first read_table: lookups by id.

    @property
    def table_ids(self) -> List[str]:
        """Every table the collection lists, in order, including those a pass will skip."""
        return list(self._source.table_ids)

    def __len__(self) -> int:
        return len(self._source.table_ids)

    def read_table(self, table_id: str, max_rows: Optional[int] = None) -> CollectionTable:
        """One table by its id, read again from its source: at most `max_rows` rows (default the
        collection's), so an answer can read more of a table than its index entry holds.

        Raises:
          CollectionError: an id the collection does not list, or a table that cannot be read now.
        """
        if self._id_set is None:
            self._id_set = frozenset(self._source.table_ids)
        if table_id not in self._id_set:
            raise CollectionError(f"{self.spec} has no table {table_id!r}")
        item = self._source.read_one(table_id, max_rows or self.max_rows)
        if isinstance(item, _Skip):
            raise CollectionError(item.message)
        return CollectionTable(item.table_id, item.source, self._titles.get(item.table_id, item.default_title),
                               item.frame, item.rows_total, item.rows_truncated)

    def __iter__(self) -> Iterator[CollectionTable]:
        report = self.report = CollectionReport(titles_unmatched=self._titles_unmatched)
        for item in self._source.read(self.max_rows):
            if isinstance(item, _Skip):
                log.info("skipped %s (%s): %s", item.source, item.reason, item.message)
                report.skip(item.source, item.reason, item.message)
                continue
            if item.rows_truncated:
                report.rows_truncated += 1
                log.warning("%s: kept the first %d rows of %s", item.source, self.max_rows,
                            "more" if item.rows_total is None else f"{item.rows_total:,}")
            report.tables_read += 1
            yield CollectionTable(item.table_id, item.source, self._titles.get(item.table_id, item.default_title),
                                  item.frame, item.rows_total, item.rows_truncated)


def _open_source(spec: str, patterns: Optional[Sequence[str]] = None) -> Any:
    if patterns and not os.path.isdir(spec):
        raise CollectionError(f"{spec}: file patterns ({', '.join(patterns)}) apply to a folder only")
    if spec.startswith(SQLITE_URL_PREFIX):
        return _SqliteSource(spec[len(SQLITE_URL_PREFIX):])
    if "://" in spec:
        return _SqlAlchemySource(spec)
    if os.path.isdir(spec):
        return _FolderSource(spec, patterns)
    if not os.path.exists(spec):
        raise CollectionError(f"{spec}: no such file or directory")
    if _is_sqlite_file(spec):
        return _SqliteSource(spec)
    raise CollectionError(f"{spec}: neither a folder of .csv/.tsv files nor a SQLite database")


def open_collection(spec: Union[str, "os.PathLike[str]"], titles_file: Optional[str] = None,
                    max_rows: int = 1000, patterns: Optional[Sequence[str]] = None) -> TableCollection:
    """The collection `spec` names: a folder, a SQLite file or `sqlite:///PATH`, or a database URL.

    `patterns` (a folder only): shell patterns matched against each file's table id (its path
    relative to the folder, `/`-separated), e.g. `("*.csv",)` where every table also has a `.tsv`
    twin; a file is kept when any pattern matches. Default: every `.csv` and `.tsv` file.

    Lists the tables (and reads `titles_file`) now, so a bad spec fails here; reads them only as
    the collection is iterated. See the module docstring for ids, titles, sources and limits.

    Raises:
      CollectionError: a missing path, a file that is not a SQLite database, a URL that SQLAlchemy
        (or its absence) cannot open, or a bad titles file.
    """
    if max_rows < 1:
        raise CollectionError(f"max_rows must be at least 1, got {max_rows}")
    spec = os.fspath(spec)
    source = _open_source(spec, patterns)
    titles = read_titles(titles_file) if titles_file else {}
    return TableCollection(spec, source, titles, max_rows, os.path.abspath(titles_file) if titles_file else None,
                           patterns)


def absolute_spec(spec: str) -> str:
    """`spec` with a local path made absolute (a URL as it is): what an index records."""
    if spec.startswith(SQLITE_URL_PREFIX):
        return SQLITE_URL_PREFIX + os.path.abspath(spec[len(SQLITE_URL_PREFIX):])
    if "://" in spec:
        return spec
    return os.path.abspath(spec)


def table_to_interaction_table(table: CollectionTable) -> interaction_pb2.Table:
    """The Table proto of a collection's table (what the reader asks), with its id and title.

    Raises:
      table_files.TableFileError: a frame with no columns or rows (a collection never yields one).
    """
    proto = table_files.table_from_frame(table.frame, table.table_id)
    proto.document_title = table.title
    return proto
