"""Where a user's one table comes from when they ask it: a CSV file (of any size) or a database table.

    frame = read_table_source("orders.csv")                                   # a CSV file
    frame = read_table_source("shop.db", table_name="orders", max_rows=100_000)   # SQLite, in chunks
    frame = read_table_source("postgresql://me@db/shop", table_name="orders")     # any SQLAlchemy URL
    frame.attrs[ROWS_TOTAL]      # set when the frame holds only the first rows: the source's count

Limits are explicit. A CSV file larger than `max_mb` is refused with the limit named, unless
`max_rows` is given: then only its first rows are read (the file is streamed, never read whole).
A database table is fetched in chunks (`retrieval.collection`), at most `max_rows` rows
(`DATABASE_ROWS` by default), with a `COUNT(*)` for the note when it holds more. The ask API turns
`ROWS_TOTAL` into a note on every answer (`ask_encoding`), so an answer over a cut table says so.
"""

import os
from typing import Optional

import pandas as pd

from tapas_tf.qa.tables import AskError, check_frame, read_csv_bytes, read_table

ROWS_TOTAL = "tapas_tf.rows_total"  # DataFrame.attrs key: the source's rows, or "more" when unknown.
DEFAULT_MAX_MB = 512
DATABASE_ROWS = 100_000
_SQLITE_HEADER = b"SQLite format 3\x00"
_READ_BYTES = 1 << 20


def is_database(spec: str) -> bool:
    """A `sqlite:///` or other database URL, or a file that starts with SQLite's header."""
    if "://" in spec:
        return True
    try:
        with open(spec, "rb") as f:
            return f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


def read_table_source(spec: str, delimiter: Optional[str] = None, max_mb: Optional[float] = DEFAULT_MAX_MB,
                      max_rows: Optional[int] = None, table_name: Optional[str] = None) -> pd.DataFrame:
    """The table `spec` names, read and checked (a header and at least one row); see the module docstring.

    Raises:
      AskError: naming the file or table: missing, unreadable, over `max_mb` without `max_rows`, a
        database with several tables and no `table_name`, a `table_name` it does not hold, ...
    """
    if max_rows is not None and max_rows < 1:
        raise AskError(f"max_rows must be at least 1, got {max_rows}")
    if is_database(spec):
        return _read_database(spec, table_name, max_rows or DATABASE_ROWS)
    if table_name:
        raise AskError(f"{spec} is a CSV file; a table name applies to a database only")
    size = os.path.getsize(spec) if os.path.isfile(spec) else None
    if size is not None and max_mb and size > max_mb * 2 ** 20:
        if not max_rows:
            shown = f"{size / 2 ** 20:,.1f} MB" if size >= 2 ** 20 else f"{size:,} bytes"
            raise AskError(f"{spec} is {shown}, more than the {max_mb:g} MB allowed (--max_table_mb); "
                           "raise the limit, or read only its first rows (--max_rows)")
        frame = _first_rows(spec, delimiter, max_rows)
    else:
        try:
            frame = read_table(spec, delimiter)
        except OSError as e:  # Permission denied, say; read_table's own checks raise AskError.
            raise AskError(f"{spec}: cannot be read ({e.strerror or e})") from None
    try:
        check_frame(frame)
    except AskError as e:
        raise AskError(f"{spec}: {e}") from None
    return frame


def _first_rows(path: str, delimiter: Optional[str], max_rows: int) -> pd.DataFrame:
    """The header and first `max_rows` rows of a CSV file, reading only as many bytes as they take
    (and a few lines more, so that a quoted field over several lines is read whole)."""
    wanted = max_rows + 64
    chunks, lines = [], 0
    with open(path, "rb") as f:
        while lines <= wanted:
            chunk = f.read(_READ_BYTES)
            if not chunk:
                break
            chunks.append(chunk)
            lines += chunk.count(b"\n")
        more = bool(f.read(1))
    data = b"".join(chunks)
    if more:  # Cut at the last line end: a half line would be a malformed last row.
        data = data[: data.rfind(b"\n") + 1]
    frame = read_csv_bytes(data, path, delimiter, nrows=max_rows + 1)
    if len(frame) > max_rows or more:
        frame = frame.iloc[:max_rows].copy()
        frame.attrs[ROWS_TOTAL] = "more"
    return frame


def _read_database(spec: str, table_name: Optional[str], max_rows: int) -> pd.DataFrame:
    from tapas_tf.retrieval.collection import CollectionError, open_collection  # pylint: disable=import-outside-toplevel

    try:
        collection = open_collection(spec, max_rows=max_rows)
        names = collection.table_ids
        if table_name is None:
            if len(names) != 1:
                shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
                raise AskError(f"{spec} holds {len(names)} tables ({shown or 'none'}); name one (--table_name), "
                               "or ask them all through an index (tapas-tf index)")
            table_name = names[0]
        table = collection.read_table(table_name, max_rows)
    except CollectionError as e:
        raise AskError(str(e)) from None
    frame = table.frame
    if table.rows_truncated:
        frame = frame.copy()
        frame.attrs[ROWS_TOTAL] = table.rows_total if table.rows_total is not None else "more"
    try:
        check_frame(frame)
    except AskError as e:
        raise AskError(f"{table.source}: {e}") from None
    return frame
