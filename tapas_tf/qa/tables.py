"""Tables as users hold them (pandas DataFrames, CSV files) -> the Interaction protos the model reads.

    frame = read_table("cities.csv")             # or any DataFrame
    table = table_from_frame(frame, "cities")    # interaction_pb2.Table, cells as text

The reading and cell-text rules live in `tapas_tf.data.table_files` (table retrieval reads files
by the same rules and may not import the ask API); this module gives them the ask API's error:
every function here that refuses a table raises `AskError`, a `TableFileError` with the same
message and reason. Cells of any dtype become text as `table_files` describes (NaN, None and NaT
are empty cells; 2.0 -> "2"; midnight timestamps are ISO dates; duplicate column names are kept).
"""

import functools
from typing import Callable, TypeVar

import pandas as pd  # noqa: F401 (tests patch `tables.pd.read_csv`)

from tapas_tf.data import table_files
from tapas_tf.data.table_files import (  # noqa: F401 (re-exported: the ask API's names since its start)
    OTHER_DELIMITERS,
    TableFileError,
    TableLike,
    _escapechar,
    _read_csv,
    cell_text,
    column_name,
    frame_fingerprint,
    frame_from_table,
    header_width,
    sniff_delimiter,
)


class AskError(TableFileError):
    """A table or question that cannot be asked; the message says what to change."""


_F = TypeVar("_F", bound=Callable)


def _raising_ask_errors(function: _F) -> _F:
    """`function` with its TableFileError raised as AskError, which callers of the ask API catch."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except AskError:
            raise
        except TableFileError as e:
            raise AskError(str(e), e.reason) from None

    return wrapper  # type: ignore[return-value]


read_table = _raising_ask_errors(table_files.read_table)
read_csv_bytes = _raising_ask_errors(table_files.read_csv_bytes)
check_frame = _raising_ask_errors(table_files.check_frame)
table_from_frame = _raising_ask_errors(table_files.table_from_frame)
