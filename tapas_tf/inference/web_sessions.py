"""What the web page keeps and sends: uploads checked into tables, conversations by session, JSON views.

    limits = WebLimits()
    frame = load_upload(data, "cities.csv", limits)        # AskError with a readable message
    sessions = SessionStore(limits.max_sessions)
    session = sessions.open("cities.csv", qa.conversation(frame))
    sessions.get(session.id).conversation.ask("which city is the largest?")

No web framework here: `web_app` wires these to HTTP, and the tests call them directly. A table
is converted once, when it is uploaded (`TableQA.conversation`); every question of the session
reuses it. Sessions are few and bounded (least recently used first out), so a server that runs for
weeks holds at most `max_sessions` tables.
"""

import collections
import dataclasses
import os
import secrets
import threading
from typing import Dict, List, Optional, Sequence

import pandas as pd

import tapas_tf.data
from tapas_tf.inference.ask_results import AskResult, format_number
from tapas_tf.inference.rendering import render_table_html
from tapas_tf.inference.table_qa import Conversation
from tapas_tf.inference.tables import AskError, check_frame, read_csv_bytes

EXAMPLE_TABLES_DIR = os.path.join(os.path.dirname(os.path.abspath(tapas_tf.data.__file__)), "example_tables")
# What the page accepts as a CSV file. A CSV is text, so the name is the only cheap sign of a
# spreadsheet or an image chosen by mistake.
CSV_SUFFIXES = (".csv", ".txt")


@dataclasses.dataclass(frozen=True)
class WebLimits:
    """What one request may cost the server.

    Attributes:
      max_upload_bytes: the largest CSV file accepted.
      max_table_rows: the most body rows of a table (pruning then keeps what the model holds: at
        most 255 rows, fewer when the cells do not fit the sequence).
      max_sessions: conversations kept at once; the least recently used one goes first.
      max_question_chars: the longest question accepted.
      max_rows_shown: rows of the table in the page (rows with selected cells are always shown).
    """

    max_upload_bytes: int = 5 * 2**20
    max_table_rows: int = 10_000
    max_sessions: int = 32
    max_question_chars: int = 1_000
    max_rows_shown: int = 200


class WebError(Exception):
    """A request the page cannot serve, with the HTTP status and a sentence for the user."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


# --- tables ---------------------------------------------------------------------------------------


def load_upload(data: bytes, filename: str, limits: WebLimits) -> pd.DataFrame:
    """An uploaded CSV file as a DataFrame of text.

    Raises:
      AskError: a file that is not CSV, is empty, or has more rows than `limits` allow.
    """
    name = os.path.basename(filename or "") or "the upload"
    if not name.lower().endswith(CSV_SUFFIXES):
        raise AskError(f"{name} is not a CSV file: choose a .csv file with a header row")
    if len(data) > limits.max_upload_bytes:
        raise AskError(f"{name} has {len(data):,} bytes; this page takes CSV files up to "
                       f"{limits.max_upload_bytes:,} bytes")
    frame = read_csv_bytes(data, name)
    check_frame(frame)
    if len(frame) > limits.max_table_rows:
        raise AskError(f"{name} has {len(frame):,} rows; this page takes tables of up to "
                       f"{limits.max_table_rows:,} rows (the model reads at most 255 of them per question); "
                       "upload the part of the table you want to ask about")
    return frame


def example_tables() -> List[str]:
    """The file names of the example tables that ship with the package."""
    if not os.path.isdir(EXAMPLE_TABLES_DIR):
        return []
    return sorted(name for name in os.listdir(EXAMPLE_TABLES_DIR) if name.endswith(".csv"))


def load_example(name: str, limits: WebLimits) -> pd.DataFrame:
    """A bundled example table, by file name (only names that `example_tables` lists)."""
    if name not in example_tables():
        raise AskError(f"no example table is called {name!r}; choose one of {example_tables()}")
    with open(os.path.join(EXAMPLE_TABLES_DIR, name), "rb") as f:
        return load_upload(f.read(), name, limits)


# --- sessions -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Session:
    """One browser's table and its conversation (`table_qa.Conversation`)."""

    id: str
    name: str
    conversation: Conversation


class SessionStore:
    """Sessions by id, at most `max_sessions` of them; opening one more drops the least recently used."""

    def __init__(self, max_sessions: int):
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.max_sessions = max_sessions
        self._sessions: "collections.OrderedDict[str, Session]" = collections.OrderedDict()
        self._lock = threading.Lock()  # Requests run on a thread pool.

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, name: str, conversation: Conversation) -> Session:
        session = Session(secrets.token_urlsafe(16), name, conversation)
        with self._lock:
            self._sessions[session.id] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return session

    def get(self, session_id: Optional[str]) -> Session:
        """The session; WebError(404) for an unknown id, which is what an evicted session has."""
        with self._lock:
            session = self._sessions.get(session_id or "")
            if session is None:
                raise WebError("this table is no longer loaded (the server keeps the most recent "
                               f"{self.max_sessions} tables, or it restarted): choose the table again", 404)
            self._sessions.move_to_end(session.id)
            return session


# --- what the page receives -----------------------------------------------------------------------


def table_view(session: Session, limits: WebLimits, result: Optional[AskResult] = None) -> Dict:
    """The table as the page shows it, marked for `result`, with notes about the whole table."""
    prepared = session.conversation.table
    table = prepared.table
    return {
        "session": session.id,
        "name": session.name,
        "rows": len(table.rows),
        "columns": len(table.columns),
        "notes": list(prepared.diagnostics) + _size_notes(session.conversation, len(table.rows),
                                                          len(table.columns)),
        "table_html": render_table_html(table, result, limits.max_rows_shown),
    }


def _size_notes(conversation: Conversation, rows: int, columns: int) -> List[str]:
    """A sentence saying that a big table will be pruned, before anyone asks."""
    max_rows, max_columns = conversation.qa.encoder.max_table_shape
    if rows <= max_rows and columns <= max_columns:
        return []
    return [f"The table has {rows:,} rows and {columns:,} columns; the model reads at most {max_rows} rows "
            f"and {max_columns} columns at once, so each question sees the rows and columns most related "
            "to it (greyed cells were left out)."]


def answer_view(session: Session, result: AskResult, limits: WebLimits, elapsed_ms: float) -> Dict:
    """One answer: `AskResult.to_dict()` (its `diagnostics` say what pruning did to this question),
    the marked table, the operator's line, the conversation so far and the time the model took."""
    view = result.to_dict()
    view.update(table_view(session, limits, result))
    view["turn"] = len(session.conversation.history)
    view["operator_line"] = operator_line(result)
    view["value_text"] = "" if result.value is None else format_number(result.value)
    view["elapsed_ms"] = round(elapsed_ms, 1)
    view["history"] = history_view(session.conversation.history)
    return view


def operator_line(result: AskResult) -> str:
    """"operator SUM (p = 0.71) of 3 cells; numbers used: 1, 2, 3", or the cells' count for NONE."""
    probability = result.operator_probabilities.get(result.operator)
    operator = result.operator + (f" (p = {probability:.2f})" if probability is not None else "")
    cells = f"{len(result.cells)} selected {'cell' if len(result.cells) == 1 else 'cells'}"
    if result.operator == "NONE":
        return f"operator {operator}: the answer is the {cells}"
    line = f"operator {operator} executed on the {cells}"
    if result.numbers:
        line += "; numbers used: " + ", ".join(format_number(n) for n in result.numbers)
    return line


def check_question(question: object, limits: WebLimits) -> str:
    """The question, stripped; AskError for an empty, non-text or too long one."""
    if not isinstance(question, str) or not question.strip():
        raise AskError("the question is empty: type a question about the table")
    if len(question) > limits.max_question_chars:
        raise AskError(f"the question has {len(question):,} characters; ask in at most "
                       f"{limits.max_question_chars:,}")
    return question.strip()


def history_view(results: Sequence[AskResult]) -> List[Dict]:
    """The conversation so far: question and answer of each turn."""
    return [{"question": r.question, "summary": r.summary} for r in results]
