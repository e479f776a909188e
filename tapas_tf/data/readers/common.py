"""Shared pieces of the data set readers: errors, safe paths and table files."""

import csv
import io
import os
from typing import Iterable, List, Optional

from tapas_tf.data.protos import interaction_pb2


class ReaderError(ValueError):
    """Bad input in a data set file.

    Attributes:
      reason: a short counter name, e.g. "malformed_line", "missing_table".
      path: the file the input came from, when known.
      first_line, last_line: the 1-based physical lines it covers, when known.
      question_id: set when a question was read but cannot be used (its table is missing, say);
        unset when the lines could not become a question at all.
    """

    def __init__(self, reason: str, message: str, path: Optional[str] = None,
                 first_line: Optional[int] = None, last_line: Optional[int] = None,
                 question_id: Optional[str] = None):
        super().__init__(message)
        self.reason = reason
        self.path = path
        self.first_line = first_line
        self.last_line = last_line if last_line is not None else first_line
        self.question_id = question_id

    @property
    def num_lines(self) -> int:
        """Physical lines covered (0 when unknown)."""
        if self.first_line is None:
            return 0
        return self.last_line - self.first_line + 1

    @property
    def lines(self) -> str:
        """"7", "7-9", or "" when unknown."""
        if self.first_line is None:
            return ""
        return str(self.first_line) if self.first_line == self.last_line else f"{self.first_line}-{self.last_line}"


def resolve_inside(root: str, relative_path: str, what: str = "file") -> str:
    """Joins `relative_path` to `root`, refusing paths that escape `root`.

    Data set files name their tables by relative path; an absolute path or one
    with `..` that leaves the data set folder is refused rather than read.
    """
    if not relative_path:
        raise ReaderError("bad_table_path", f"empty {what} path")
    if os.path.isabs(relative_path):
        raise ReaderError("bad_table_path", f"{what} path {relative_path!r} is absolute; "
                          f"it must be relative to {root}")
    # A lexical check: symlinks the user placed inside the data folder are followed.
    root_norm = os.path.normpath(os.path.abspath(root))
    path = os.path.normpath(os.path.join(root_norm, relative_path))
    if os.path.commonpath([root_norm, path]) != root_norm:
        raise ReaderError("bad_table_path", f"{what} path {relative_path!r} escapes {root}")
    return path


def read_csv_table(path: str, table_id: str) -> interaction_pb2.Table:
    """Reads a CSV table whose first row is the header.

    Raises ReaderError for a missing file, bytes that are not UTF-8, ragged
    rows (naming the line) and a table with no rows.
    """
    raw = read_table_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReaderError("table_not_utf8", f"{path}: byte {e.start} is not valid UTF-8 ({e.reason})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: List[List[str]] = []
    try:
        for row in reader:
            if rows and len(row) != len(rows[0]):
                raise ReaderError(
                    "ragged_table",
                    f"{path}:{reader.line_num}: row has {len(row)} cells, the header has {len(rows[0])}")
            rows.append(row)
    except csv.Error as e:
        raise ReaderError("bad_csv", f"{path}:{reader.line_num}: {e}") from None
    if len(rows) < 2 or not rows[0]:
        raise ReaderError("empty_table", f"{path}: table has no header or no rows")
    return make_table(table_id, rows[0], rows[1:])


def read_table_bytes(path: str) -> bytes:
    """The bytes of a table file; ReaderError for a missing, unreadable or non-regular file."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ReaderError("missing_table", f"{path}: table file not found") from None
    except IsADirectoryError:
        raise ReaderError("unreadable_table", f"{path}: is a directory, not a table file") from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path.
        raise ReaderError("unreadable_table", f"{path!r}: cannot read the table ({getattr(e, 'strerror', None) or e})"
                          ) from None


def make_table(table_id: str, header: List[str], rows: List[List[str]]) -> interaction_pb2.Table:
    table = interaction_pb2.Table(table_id=table_id)
    for text in header:
        table.columns.add(text=text)
    add_rows(table, rows)
    return table


def add_rows(table: interaction_pb2.Table, rows: Iterable[Iterable[str]]) -> None:
    """Appends body rows of cell texts to `table`."""
    for row in rows:
        cells = table.rows.add()
        for text in row:
            cells.cells.add(text=text)
