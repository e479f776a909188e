"""Tables as users hold them (CSV files, pandas DataFrames) -> DataFrames of text and Table protos.

    frame = read_table("cities.csv")             # or any DataFrame
    table = table_from_frame(frame, "cities")    # interaction_pb2.Table, cells as text

This is the room below the ask API (`tapas_tf.qa.tables` re-exports every name here) and table
retrieval (`tapas_tf.retrieval`): both read the same files by the same rules. Errors are
`TableFileError`, whose `reason` (`binary`, `empty`, `bad_csv`, `unreadable`, `bad_argument`)
lets a caller that reads many files count them; the ask API raises them as its `AskError`.

Cells of any dtype become text the way a person would write them: NaN, None and NaT are empty
cells; integral floats lose their ".0" (2.0 -> "2"); other floats use Python's shortest repr
(2.5 -> "2.5"); timestamps at midnight are ISO dates ("2020-01-05"), others ISO date-times;
booleans are "True"/"False". Column names are text too (None or NaN give an empty name, which the
model sees as `[EMPTY]`; a MultiIndex is joined with spaces). Duplicate column names are kept: the
model tells columns apart by position. The DataFrame's index is not part of the table.
"""

import csv
import datetime
import hashlib
import io
import math
import numbers
import os
from typing import List, Optional, Union

import numpy as np
import pandas as pd

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import add_rows, make_table

TableLike = Union[pd.DataFrame, str, "os.PathLike[str]"]


class TableFileError(ValueError):
    """A table file (or frame) that cannot be read as a table; the message says what to change.

    `reason` is one word for counting: `binary` (NUL bytes, or not UTF-8), `empty` (no header or
    no rows), `bad_csv` (does not parse), `unreadable` (missing, a directory, an OS error) or
    `bad_argument` (neither a frame nor a path, a bad delimiter).
    """

    def __init__(self, message: str, reason: str = "bad_csv"):
        super().__init__(message)
        self.reason = reason


def read_table(table: TableLike, delimiter: Optional[str] = None) -> pd.DataFrame:
    """A DataFrame as given, or the CSV file at a path read as text (no type guessing).

    The delimiter is `delimiter`, else the one the file's first lines use (`sniff_delimiter`: a
    comma, or a semicolon, tab or bar where those split every line into the same number of fields
    and the comma does not split the header).

    Raises:
      TableFileError: a path that is missing, is a directory, or does not hold CSV text.
    """
    if isinstance(table, pd.DataFrame):
        return table
    if not isinstance(table, (str, os.PathLike)):
        raise TableFileError(f"a table is a pandas DataFrame or the path of a CSV file, got {type(table).__name__}",
                             "bad_argument")
    path = os.fspath(table)
    if os.path.isdir(path):
        raise TableFileError(f"{path} is a directory, not a CSV file", "unreadable")
    if not os.path.exists(path):
        raise TableFileError(f"{path}: no such CSV file", "unreadable")
    with open(path, "rb") as f:
        return read_csv_bytes(f.read(), path, delimiter)


def read_csv_bytes(data: bytes, name: str = "the upload", delimiter: Optional[str] = None,
                   nrows: Optional[int] = None) -> pd.DataFrame:
    """CSV text held in memory (an uploaded file) as a DataFrame of text, by `read_table`'s rules.

    Args:
      data: the file's bytes, UTF-8 text.
      name: how messages name the file.
      delimiter: the field separator; default `sniff_delimiter(data)`.
      nrows: read at most this many rows after the header (default all); bytes past them may go
        unchecked.

    Raises:
      TableFileError: bytes that are not UTF-8 text, hold no table, or do not parse as CSV.
    """
    if b"\x00" in data[:65536]:  # Valid UTF-8, so pandas would make a table of it.
        raise TableFileError(
            f"{name} holds NUL bytes: a binary file, or text that is not UTF-8; is it a CSV file?", "binary")
    delimiter = {"\\t": "\t", "tab": "\t"}.get(delimiter, delimiter)  # As a shell passes a tab.
    if delimiter is not None and len(delimiter) != 1:
        raise TableFileError(f"the delimiter is one character (',', ';', a tab), not {delimiter!r}", "bad_argument")
    try:
        return _read_csv(data, delimiter or sniff_delimiter(data), nrows)
    except UnicodeDecodeError as e:
        raise TableFileError(f"{name} is not UTF-8 text (byte {e.start}); is it a CSV file?", "binary") from None
    except pd.errors.EmptyDataError:
        raise TableFileError(f"{name} is empty: a table needs a header row and at least one row", "empty") from None
    except (pd.errors.ParserError, ValueError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TableFileError(f"{name} does not parse as CSV: {first_line}", "bad_csv") from None


def _escapechar(data: bytes) -> Optional[str]:
    """A file that escapes quotes with backslashes (as WikiTableQuestions' do:
    `"Poul Erik \\"Popper\\" Petersen"`) is read with that dialect; the standard dialect would
    silently split such a cell in two."""
    return "\\" if b'\\"' in data else None


def _read_csv(data: bytes, delimiter: str = ",", nrows: Optional[int] = None) -> pd.DataFrame:
    """The CSV as text, every cell exactly as written (dtype=str, no NA guessing)."""
    return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, encoding="utf-8",
                       escapechar=_escapechar(data), sep=delimiter, nrows=nrows)


# Delimiters tried when the comma does not split a file's header: Excel's in many locales, TSV, bars.
OTHER_DELIMITERS = (";", "\t", "|")
_SNIFFED_LINES = 20


def sniff_delimiter(data: bytes) -> str:
    """The delimiter of CSV bytes: "," unless the comma leaves the header one field and one of
    OTHER_DELIMITERS splits the header and each of the first lines into the same number (> 1) of
    fields. Reads only the first 64 KiB."""
    text = data[:65536].decode("utf-8", errors="ignore")
    lines = [line for line in text.splitlines() if line.strip()][:_SNIFFED_LINES + 1]
    if len(lines) > _SNIFFED_LINES:
        lines = lines[:-1]  # The last line may be cut at 64 KiB.
    if not lines:
        return ","

    def widths(delimiter: str) -> List[int]:
        try:
            return [len(record) for record in csv.reader(lines, delimiter=delimiter, escapechar=_escapechar(data))]
        except csv.Error:
            return []

    comma = widths(",")
    if comma and comma[0] > 1:
        return ","
    for delimiter in OTHER_DELIMITERS:
        found = widths(delimiter)
        if found and found[0] > 1 and len(set(found)) == 1:
            return delimiter
    return ","


def header_width(data: bytes, delimiter: Optional[str] = None) -> Optional[int]:
    """The number of columns the CSV's header names, read from its first record only.

    A server checks a column limit with it before parsing the file: parsing a table of 100,000
    columns costs seconds, counting its header milliseconds. None when the header does not read
    as CSV text (`read_csv_bytes` then says why). `delimiter`: default `sniff_delimiter(data)`
    (a caller that parses the file next sniffs once and passes it to both).
    """
    if b"\x00" in data[:65536]:
        return None  # Binary: read_csv_bytes says so.
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")
    try:
        for record in csv.reader(text, escapechar=_escapechar(data), delimiter=delimiter or sniff_delimiter(data)):
            if record:  # pandas skips blank lines before the header too.
                return len(record)
    except (csv.Error, UnicodeDecodeError):
        pass  # A field beyond csv's size limit, or bytes that are not UTF-8.
    return None


def cell_text(value: object) -> str:
    """The text of one cell of any dtype (see the module docstring)."""
    if value is None or value is pd.NaT:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return ""
        if number.is_integer() and abs(number) < 1e16:
            return str(int(number))
        return repr(number)
    if isinstance(value, (pd.Timestamp, datetime.datetime)):
        if value.hour == value.minute == value.second == value.microsecond == 0 and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    try:
        if pd.isna(value):
            return ""
    except (TypeError, ValueError):
        pass  # Containers: pd.isna answers per element.
    return str(value)


def column_name(name: object) -> str:
    if isinstance(name, tuple):  # A MultiIndex level per element.
        return " ".join(part for part in (column_name(p) for p in name) if part)
    return cell_text(name)


def check_frame(frame: pd.DataFrame) -> None:
    """Raises TableFileError (reason `empty`) for a table without columns or rows."""
    if frame.shape[1] == 0:
        raise TableFileError("the table has no columns", "empty")
    if frame.shape[0] == 0:
        raise TableFileError("the table has no rows (a header alone is not a table)", "empty")


_FRAME_BLOCK_ROWS = 10_000  # Rows of a DataFrame turned into cells at a time (memory).


def table_from_frame(frame: pd.DataFrame, table_id: str = "table") -> interaction_pb2.Table:
    """The Table proto of a DataFrame, every cell as text (`cell_text`)."""
    check_frame(frame)
    header: List[str] = [column_name(c) for c in frame.columns]
    table = make_table(table_id, header, [])
    # A block of rows per conversion: iterating rows of a wide frame looks every column up per row
    # (seconds for 10,000 columns), and the whole frame as Python lists at once held ~130 MB more at
    # 10^6 cells; to_numpy keeps each cell's Python value (int, Timestamp, ...).
    for begin in range(0, len(frame), _FRAME_BLOCK_ROWS):
        block = frame.iloc[begin:begin + _FRAME_BLOCK_ROWS].to_numpy(dtype=object).tolist()
        add_rows(table, ([cell_text(v) for v in row] for row in block))
    return table


def frame_fingerprint(frame: pd.DataFrame) -> Optional[bytes]:
    """A key of the cell texts `table_from_frame` would make of `frame`, computed from its values
    without making them (a 100,000-row frame: ~0.1 s against ~1 s for the texts), or None when it
    cannot be: a column of other values than numbers, booleans or strings (dates, mixed objects),
    whose texts are not a function of what pandas hashes. Equal keys mean equal texts; frames with
    equal texts may still get different keys (1 and 1.0), which only costs a conversion."""
    for _, column in frame.items():
        if column.dtype.kind not in "iufb" and pd.api.types.infer_dtype(column, skipna=False) != "string":
            return None
    try:
        rows = pd.util.hash_pandas_object(frame, index=False, categorize=False).to_numpy()
    except (TypeError, ValueError):  # Unhashable cells; `check_frame` names what is wrong.
        return None
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr([(repr(name), str(dtype)) for name, dtype in zip(frame.columns, frame.dtypes)]).encode())
    digest.update(rows.tobytes())
    return digest.digest()


def frame_from_table(table: interaction_pb2.Table) -> pd.DataFrame:
    """The DataFrame of a Table proto (a reader's table, asked as a user would): every cell as its
    text, the header as column names (duplicates kept)."""
    header = [column.text for column in table.columns]
    rows = [[cell.text for cell in row.cells] for row in table.rows]
    return pd.DataFrame(rows, columns=pd.Index(header, dtype=object), dtype=object)
