"""What the web page keeps and sends: uploads checked into tables, conversations by session, JSON views.

    limits = WebLimits()
    frame = load_upload(data, "cities.csv", limits)        # AskError with a readable message
    sessions = SessionStore(limits.max_sessions)
    session = sessions.open("cities.csv", qa.conversation(frame))
    ask_in_session(sessions.get(session.id), "which city?", lambda q: qa.answer_encoded([q])[0])

No web framework here: `web_app` wires these to HTTP, and the tests call them directly. A table
is converted once, when it is uploaded (`TableQA.conversation`); every question of the session
reuses it. Sessions are few and bounded (least recently used first out), so a server that runs for
weeks holds at most `max_sessions` tables. Uploads are checked against the limits as early as each
can be: bytes first, then the header's columns before the file is parsed, then the rows.

A session may instead hold a collection of tables (`web_collections`: the server's, or files uploaded
together): its conversation is a `collection_qa.CollectionConversation`, whose first answer chooses
the table that its follow-ups stay with, and its views name that table and the runners-up.
"""

import collections
import dataclasses
import os
import re
import secrets
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd

import tapas_tf.data
from tapas_tf.qa.ask_encoding import EncodedQuestion, PreparedTable
from tapas_tf.qa.ask_results import AskResult, format_number
from tapas_tf.qa.collection_qa import Candidate, CollectionConversation, NoTableFound
from tapas_tf.qa.rendering import render_table_html
from tapas_tf.qa.table_qa import Conversation, TableQA
from tapas_tf.qa.tables import AskError, check_frame, header_width, read_csv_bytes, sniff_delimiter

EXAMPLE_TABLES_DIR = os.path.join(os.path.dirname(os.path.abspath(tapas_tf.data.__file__)), "example_tables")
# What the page accepts as a CSV file. A CSV is text, so the name is the only cheap sign of a
# spreadsheet or an image chosen by mistake.
CSV_SUFFIXES = (".csv", ".txt")
# Files uploaded together as a collection may also be tab-separated.
COLLECTION_SUFFIXES = (".csv", ".tsv", ".txt")


@dataclasses.dataclass(frozen=True)
class WebLimits:
    """What one request may cost the server.

    Attributes:
      max_upload_bytes: the largest CSV file accepted.
      max_table_rows: the most body rows of a table (pruning then keeps what the model holds: at
        most 255 rows, fewer when the cells do not fit the sequence).
      max_table_columns: the most columns of a table, checked on the header before the file is
        parsed (pruning then keeps the at most 255 columns most related to each question).
      max_sessions: conversations kept at once; the least recently used one goes first.
      max_question_chars: the longest question accepted.
      max_rows_shown: rows of the table in the page (rows with selected cells are always shown).
      max_collection_files: the most files uploaded together as a collection (each is checked
        against the limits of one table above).
      max_collection_bytes: the most bytes of the files uploaded together.
    """

    max_upload_bytes: int = 5 * 2**20
    max_table_rows: int = 10_000
    max_table_columns: int = 1_000
    max_sessions: int = 32
    max_question_chars: int = 1_000
    max_rows_shown: int = 200
    max_collection_files: int = 20
    max_collection_bytes: int = 20 * 2**20


class WebError(Exception):
    """A request the page cannot serve, with the HTTP status and a sentence for the user."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


# --- tables ---------------------------------------------------------------------------------------


def load_upload(data: bytes, filename: str, limits: WebLimits,
                suffixes: Sequence[str] = CSV_SUFFIXES) -> pd.DataFrame:
    """An uploaded CSV file (or TSV, a .tsv name among `suffixes`) as a DataFrame of text.

    Raises:
      AskError: a file that is not CSV, is empty, or has more bytes, columns or rows than `limits`
        allow. The columns are counted on the header before the file is parsed: parsing and
        converting 100,000 columns would cost seconds of the server's time for a table refused anyway.
    """
    name = os.path.basename(filename or "") or "the upload"
    if not name.lower().endswith(tuple(suffixes)):
        kind = "CSV or TSV" if ".tsv" in suffixes else "CSV"
        raise AskError(f"{name} is not a {kind} file: choose a .csv file with a header row")
    if len(data) > limits.max_upload_bytes:
        raise AskError(f"{name} has {len(data):,} bytes; this page takes CSV files up to "
                       f"{limits.max_upload_bytes:,} bytes")
    # Once, for the header check and the parse.
    delimiter = "\t" if name.lower().endswith(".tsv") else sniff_delimiter(data)
    _check_columns(name, header_width(data, delimiter), limits)
    frame = read_csv_bytes(data, name, delimiter)
    check_frame(frame)
    _check_columns(name, frame.shape[1], limits)  # When the header alone did not read as CSV.
    if len(frame) > limits.max_table_rows:
        raise AskError(f"{name} has {len(frame):,} rows; this page takes tables of up to "
                       f"{limits.max_table_rows:,} rows (the model reads at most 255 of them per question); "
                       "upload the part of the table you want to ask about")
    return frame


def _check_columns(name: str, columns: Optional[int], limits: WebLimits) -> None:
    if columns is not None and columns > limits.max_table_columns:
        raise AskError(f"{name} has {columns:,} columns; this page takes tables of up to "
                       f"{limits.max_table_columns:,} columns (the model reads at most 255 of them per "
                       "question); upload the columns you want to ask about")


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


@dataclasses.dataclass(frozen=True)
class CollectionInfo:
    """What the page says about a session's collection of tables.

    Attributes:
      name: what the page calls it ("my_tables", "3 uploaded files").
      source: where its tables are (a folder, a database; "uploaded files").
      tables: how many tables it holds.
      method: the retrieval method (bm25).
      k: how many of the best-matching tables a first question reads.
      uploaded: files uploaded together: a table's source is shown as its file name, not the
        server's temporary folder.
      skipped: how many files or tables could not be read.
      skipped_files: some of them (at most `MAX_SKIPPED_SHOWN`), as {"name", "reason"}.
    """

    name: str
    source: str
    tables: int
    method: str
    k: int
    uploaded: bool = False
    skipped: int = 0
    skipped_files: Tuple[Dict[str, str], ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        return dict(dataclasses.asdict(self), skipped_files=[dict(item) for item in self.skipped_files])

    def shown_source(self, table_id: str, source: str) -> str:
        """A table's source as the page shows it: the uploaded file's name for an upload."""
        return f"uploaded {table_id}" if self.uploaded else source


# Files that could not be read that a collection's view names (all are counted).
MAX_SKIPPED_SHOWN = 20


@dataclasses.dataclass
class Session:
    """One browser's table and its conversation (`table_qa.Conversation`), or a collection of tables
    and a conversation over it (`collection_qa.CollectionConversation`, with `collection` set).

    `lock` keeps one question at a time per conversation: a follow-up sees the answer before it
    (questions of different sessions run at once, and their model calls are batched together).
    `keeps` holds what the session needs on disk (the temporary folder of uploaded files), which
    goes with the session.
    """

    id: str
    name: str
    conversation: Union[Conversation, CollectionConversation]
    lock: threading.RLock = dataclasses.field(default_factory=threading.RLock, repr=False, compare=False)
    collection: Optional[CollectionInfo] = None
    keeps: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def reader(self) -> TableQA:
        """The model that reads the session's tables (a collection's `BatchedReader` stands in for it)."""
        conversation = self.conversation
        return conversation.cqa.qa if isinstance(conversation, CollectionConversation) else conversation.qa

    @property
    def table(self) -> Optional[PreparedTable]:
        """The table asked about; None in a collection before its first answer chooses one."""
        return self.conversation.table


def ask_in_session(session: Session, question: str,
                   answer_one: Callable[[EncodedQuestion], AskResult]) -> AskResult:
    """`Conversation.ask` with the model call handed to `answer_one` (a server's
    `QuestionBatcher.answer`): the question is encoded on the caller's thread, with the previous
    answer as its context, and the result joins the conversation. In a collection the
    conversation's reader already hands its calls to the server's batcher (`web_collections`)."""
    with session.lock:
        if session.collection is not None:
            return _ask_collection(session, question)
        conversation = session.conversation
        previous = conversation.history[-1].coordinates if conversation.history else None
        encoded = conversation.qa.encode(conversation.table, question, previous)
        result = answer_one(encoded)
        conversation.history.append(result)
        return result


def _ask_collection(session: Session, question: str) -> AskResult:
    """The collection's answer; its first question chooses the table, follow-ups stay with it."""
    try:
        return session.conversation.ask(question)
    except NoTableFound:  # Its message names the index's folder, a temporary one for uploads.
        raise AskError(f"no table of {session.collection.name} shares a word with the question: ask with "
                       "words of the tables you mean (their titles, column names or cells)") from None


def reset_session(session: Session) -> None:
    """A new conversation about the same table (after any question in flight); in a collection,
    the next question chooses the table again."""
    with session.lock:
        session.conversation.reset()


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

    def open(self, name: str, conversation: Union[Conversation, CollectionConversation],
             collection: Optional[CollectionInfo] = None, keeps: Any = None) -> Session:
        """A new session; `collection` (with a `CollectionConversation`) makes it a collection's,
        and `keeps` goes with it (dropped, and so removed, when the session is)."""
        session = Session(secrets.token_urlsafe(16), name, conversation, collection=collection, keeps=keeps)
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
    """The table as the page shows it, marked for `result`, with notes about the whole table. A
    collection's view adds `collection` (`CollectionInfo.to_dict`); before its first answer it has
    no table yet (no rows, no columns, `table_html` "")."""
    prepared = session.table
    view: Dict[str, Any] = {"session": session.id, "name": session.name}
    if session.collection is not None:
        view["collection"] = session.collection.to_dict()
    if prepared is None:
        return dict(view, rows=0, columns=0, notes=[], table_html="")
    table = prepared.table
    return dict(view, **{
        "rows": len(table.rows),
        "columns": len(table.columns),
        "notes": [_table_note(note) for note in prepared.diagnostics]
                 + _size_notes(session.reader, len(table.rows), len(table.columns)),
        "table_html": render_table_html(table, result, limits.max_rows_shown),
    })


def _size_notes(qa: TableQA, rows: int, columns: int) -> List[str]:
    """A sentence saying how a big table will be read, before anyone asks."""
    max_rows, max_columns = qa.encoder.max_table_shape
    if rows <= max_rows and columns <= max_columns:
        return []
    if qa.windows:
        limit = f"; only its first {qa.max_rows:,} rows are read" if qa.max_rows and rows > qa.max_rows else ""
        return [f"The table has {rows:,} rows and {columns:,} columns, more than the model reads at once: "
                f"each question reads it in windows of rows, so counts and totals cover every row{limit}."]
    return [f"The table has {rows:,} rows and {columns:,} columns; the model reads at most {max_rows} rows "
            f"and {max_columns} columns at once, so each question sees the rows and columns most related "
            "to it (greyed cells were left out)."]


def answer_view(session: Session, result: AskResult, limits: WebLimits, elapsed_ms: float,
                model_name: str = "") -> Dict:
    """One answer: `AskResult.to_dict()` (its `diagnostics` are the ask API's sentences, unchanged),
    the marked table, the conversation so far, the time the model took, and the answer in plain
    words for the page:

      answer_line    "paris, berlin", "Sum of 3 cells = 14", "Count: 3"
      working        how an aggregation got its value ("2 + 4 + 8 = 14"); "" for a lookup
      answer_notes   what changes the meaning of this answer (rows left out, a question the model
                     cannot compute), in plain words: shown with the answer
      table_notes    routine notes about the table (long cells shortened, ...), the same for every
                     question: the page shows each once, above the table
      details        the routine diagnostics as the ask API says them, and the model's confidence
                     in its operation: folded away under the answer
      answered_by    "Answered by bundled sqa_tiny" (`model_name`, else `AskResult.model`; the
                     aggregation model of a pair by its own name)

    In a collection, also the table that answered and the others read (`collection_fields`).
    """
    view = result.to_dict()
    view.update(table_view(session, limits, result))
    if session.collection is not None:
        view.update(collection_fields(session))
    notes = sort_diagnostics(result.diagnostics, session.table.diagnostics)
    view["turn"] = len(session.conversation.history)
    view["answer_line"] = answer_line(result)
    view["working"] = working_line(result)
    # The answer's own notes (an operator that does not fit the question, not sure) come first.
    view["answer_notes"] = list(result.notes) + notes.answer_notes
    view["table_notes"] = notes.table_notes
    view["details"] = notes.details + _confidence(result) + [
        f"The model read {view['kept_rows']:,} rows and {view['kept_columns']:,} columns of the table "
        f"({result.sequence_length} word pieces with the question)."]
    # The page's name for the model (its header's) first, unless the pair's aggregation model answered;
    # the result's otherwise (serve gives both the same).
    own = result.model == session.reader.display_name
    view["answered_by"] = f"Answered by {(model_name if own else '') or result.model or 'the model'}"
    view["value_text"] = "" if result.value is None else format_number(result.value)
    view["elapsed_ms"] = round(elapsed_ms, 1)
    view["history"] = history_view(session.conversation.history)
    return view


# --- plain words ----------------------------------------------------------------------------------

# What the page calls the operators; NONE (the selected cells are the answer) goes unnamed.
OPERATOR_WORDS = {"SUM": "Sum", "AVERAGE": "Average", "COUNT": "Count"}
# Numbers written out in the working line of a sum or average; more are elided.
_MAX_NUMBERS_SHOWN = 12


_MAX_CELLS_SHOWN = 12


def answer_line(result: AskResult) -> str:
    """The answer as a person reads it: the cells' texts for a lookup, else "Sum of 3 cells = 14",
    "Average of 2 cells = 4.5", "Count: 3" (never the operator's internal name)."""
    if result.operator not in OPERATOR_WORDS or result.computed is not None:
        if not result.cells:
            return "No answer: the model selected no cell"
        if result.computed is not None or len(result.answers) <= _MAX_CELLS_SHOWN:
            return result.answer_text
        # A lookup over a big table's windows may select hundreds of cells: the table shows them all.
        shown = ", ".join(result.answers[:_MAX_CELLS_SHOWN])
        return f"{shown}, … and {len(result.answers) - _MAX_CELLS_SHOWN:,} more (highlighted in the table)"
    word = OPERATOR_WORDS[result.operator]
    if result.operator == "COUNT":
        return f"{word}: {format_number(result.value)}"
    if not result.cells:
        return f"{word}: no cell was selected"
    cells = f"{len(result.cells)} {'cell' if len(result.cells) == 1 else 'cells'}"
    if not result.numbers:
        return f"{word} of {cells}: none of them holds a number"
    return f"{word} of {cells} = {format_number(result.value)}"


def working_line(result: AskResult) -> str:
    """How an aggregation reached its value, "2 + 4 + 8 = 14", "(2 + 4) / 2 = 3", "3 highlighted
    cells counted"; "" for a lookup, whose highlighted cells are the answer."""
    if result.operator == "COUNT":
        return f"{len(result.cells)} highlighted {'cell' if len(result.cells) == 1 else 'cells'} counted"
    if result.operator not in ("SUM", "AVERAGE") or not result.numbers:
        return ""
    numbers = [format_number(n) for n in result.numbers]
    if len(numbers) > _MAX_NUMBERS_SHOWN:
        numbers = numbers[:_MAX_NUMBERS_SHOWN - 1] + [f"… ({len(result.numbers)} numbers)"]
    terms = " + ".join(numbers)
    line = (f"{terms} = {format_number(result.value)}" if result.operator == "SUM"
            else f"({terms}) / {len(result.numbers)} = {format_number(result.value)}")
    without = len(result.cells) - len(result.numbers)
    if without == 1:
        line += "; 1 highlighted cell holds no number and is left out"
    elif without:
        line += f"; {without} highlighted cells hold no number and are left out"
    return line


def _confidence(result: AskResult) -> List[str]:
    """How likely the answer is right, and how sure the model was of its operation (with an
    aggregation head)."""
    lines = []
    if result.confidence is not None:
        lines.append(f"Confidence that this answer is right: {result.confidence:.2f}"
                     + (" (calibrated on questions with known answers)." if result.calibrated
                        else " (uncalibrated)."))
    probability = result.operator_probabilities.get(result.operator)
    if probability is None:
        return lines
    chose = (f"to {OPERATOR_WORDS[result.operator].lower()} the highlighted cells"
             if result.operator in OPERATOR_WORDS else "to give the highlighted cells as they are")
    return lines + [f"The model chose {chose} with probability {probability:.2f}."]


@dataclasses.dataclass(frozen=True)
class SortedNotes:
    """An answer's diagnostics as the page shows them (see `sort_diagnostics`)."""

    answer_notes: List[str]
    table_notes: List[str]
    details: List[str]


# The ask API's routine sentences (tapas_tf/qa/ask_encoding.py, TableEncoder._diagnostics):
# the same for most questions about a table and no reason to doubt an answer. The page says each
# once per table, in these words, and keeps the exact sentence in the answer's details.
_ROUTINE_NOTES = (
    (re.compile(r"^[\d,]+ cells (were cut to fewer word pieces|longer than \d+ word pieces were cut)"),
     "Some long cells are shortened to fit the model: it reads only their beginning."),
    (re.compile(r"^[\d,]+ cells rank above \d+ in their column"),
     "Some columns hold more different values than the model can put in order, so comparisons "
     "there (largest, earliest) are approximate."),
    (re.compile(r"^The model saw \d+ rows; its heads were trained for at most"),
     "The model reads more rows of this table than it was trained on; answers in the later rows "
     "are less reliable."),
    # How a big table was read, when it was read whole (a limit that cut it stays with the answer).
    (re.compile(r"^Read all [\d,]+ rows in [\d,]+ windows"),
     "This table is bigger than the model reads at once: each question reads every row, in windows "
     "of rows, so counts and totals cover the whole table."),
)
# Sentences that change what an answer means, in plain words; anything else the ask API says
# (the note of a model that cannot count, tapas_tf/qa/question_hints.py) is shown as it is.
_PRUNED = re.compile(r"^The table was pruned to the (\d+) of (\d+) rows and (\d+) of (\d+) columns")
_UNKNOWN_WORDS = re.compile(r"^\d+ of the question's \d+ word pieces are unknown")


def sort_diagnostics(diagnostics: Sequence[str], table_diagnostics: Sequence[str] = ()) -> SortedNotes:
    """An answer's diagnostics (`AskResult.diagnostics`) sorted for the page.

    The table's own (`PreparedTable.diagnostics`, repeated in every answer) are left out: the table
    notes say them once. Routine ones become a table note and a detail; the rest stay with the
    answer, in plain words where the sentence is known.
    """
    answer_notes, table_notes, details = [], [], []
    for sentence in diagnostics:
        if sentence in table_diagnostics:
            continue
        routine = next((note for pattern, note in _ROUTINE_NOTES if pattern.match(sentence)), None)
        if routine is not None:
            table_notes.append(routine)
            details.append(sentence)
        elif _PRUNED.match(sentence):
            answer_notes.append(_pruned_note(*(int(n) for n in _PRUNED.match(sentence).groups())))
        elif _UNKNOWN_WORDS.match(sentence):
            answer_notes.append("Most words of this question are unknown to the model, so the answer is a "
                                "guess; try other words.")
        else:
            answer_notes.append(sentence)
    return SortedNotes(answer_notes, table_notes, details)


def _pruned_note(rows: int, all_rows: int, columns: int, all_columns: int) -> str:
    kept = f"{rows:,} of the {all_rows:,} rows"
    if columns < all_columns:
        kept += f" and {columns} of the {all_columns} columns"
    return (f"The model read only the {kept} most related to this question (greyed cells were left "
            "out); a count or sum covers only those.")


def _table_note(sentence: str) -> str:
    """A note about the table (`ask_encoding._table_diagnostics`) without the model's token names."""
    return sentence.replace("the model sees them as [EMPTY]", "the model reads them as unnamed")


def check_question(question: object, limits: WebLimits, kind: str = "question") -> str:
    """The question (or statement: `kind`), stripped; AskError for an empty, non-text or too long one."""
    if not isinstance(question, str) or not question.strip():
        raise AskError(f"the {kind} is empty: type a {kind} about the table")
    if len(question) > limits.max_question_chars:
        verb = "ask in" if kind == "question" else "write it in"
        raise AskError(f"the {kind} has {len(question):,} characters; {verb} at most "
                       f"{limits.max_question_chars:,}")
    return question.strip()


def collection_fields(session: Session) -> Dict[str, Any]:
    """Which table of a collection answered, as `tapas-tf ask --index_dir --json` says it:

      table_id, table_title, table_source    the table (an upload's source is its file name)
      retrieval_method, retrieval_rank, retrieval_score, combined_score
                                             how the first answer chose it
      runners_up                             the other tables read for the first answer, best first
                                             (`Candidate.to_dict`); [] for a follow-up, which reads
                                             only the conversation's table
      table_line                             "From table cities (cities.csv)" for the page
    """
    chat: CollectionConversation = session.conversation
    first, info = chat.first, session.collection
    chosen = first.chosen
    first_turn = len(chat.history) == 1
    line = f"From table {chosen.title} ({chosen.table_id})"
    if not first_turn:
        line += ", the table of this conversation's first answer"
    return {
        "table_id": chosen.table_id,
        "table_title": chosen.title,
        "table_source": info.shown_source(chosen.table_id, chosen.source),
        "retrieval_method": first.method,
        "retrieval_rank": chosen.rank,
        "retrieval_score": round(chosen.retrieval_score, 4),
        "combined_score": round(chosen.combined, 4),
        "runners_up": [_runner_up(candidate, info) for candidate in first.runners_up] if first_turn else [],
        "table_line": line,
    }


def _runner_up(candidate: Candidate, info: CollectionInfo) -> Dict[str, Any]:
    view = candidate.to_dict()
    view["source"] = info.shown_source(candidate.table_id, candidate.source)
    return view


def session_frame(session: Session) -> pd.DataFrame:
    """The session's table as a DataFrame of its cells' texts (header and rows as uploaded).

    Raises:
      WebError: a collection whose first answer has not chosen a table yet.
    """
    if session.table is None:
        raise WebError("ask a question first: in a collection, the first answer chooses the table that "
                       "statements are checked against")
    table = session.table.table
    return pd.DataFrame([[cell.text for cell in row.cells] for row in table.rows],
                        columns=pd.Index([column.text for column in table.columns]))


def verdict_view(result, elapsed_ms: float) -> Dict:
    """A `fact_checker.VerifyResult` for the page: the verdict in plain words, P(entailed), notes."""
    if result.entailed:
        line = f"True: the table supports this statement (P(entailed) = {result.probability:.2f})."
    else:
        line = f"False: the table refutes this statement (P(entailed) = {result.probability:.2f})."
    return dict(result.to_dict(), verdict_line=line, elapsed_ms=elapsed_ms,
                details=[f"The model's probability that the table entails the statement is "
                         f"{result.probability:.3f}; at or above 0.5 it is judged true.",
                         f"Judged by {result.model}."] + list(result.diagnostics))


def history_view(results: Sequence[AskResult]) -> List[Dict]:
    """The conversation so far: question and answer of each turn (`answer_line` in plain words)."""
    return [{"question": r.question, "summary": r.summary, "answer_line": answer_line(r)} for r in results]
