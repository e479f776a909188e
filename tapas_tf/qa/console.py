"""The terminal side of asking: checking the table, printing answers, writing the HTML page, and a
conversation on stdin.

Used by `python -m tapas_tf.ask`; kept here so that the command line stays a few lines of flags.
Answers go to stdout (with `as_json`, one JSON line each and nothing else); prompts, notes such as
"(new conversation)" and errors go to stderr. Imports no TensorFlow, so that `read_table_file`
can refuse a bad table before the model loads.
"""

import dataclasses
import json
import sys
from typing import Iterable, List, Optional, Sequence, TextIO, Tuple

import pandas as pd

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.qa.ask_results import AskResult
from tapas_tf.qa.collection_qa import CollectionAnswer, CollectionConversation, NoTableFound
from tapas_tf.qa.rendering import render_html, render_text
from tapas_tf.qa.table_sources import DEFAULT_MAX_MB, read_table_source
from tapas_tf.qa.tables import AskError

QUIT = (":quit", ":q")
NEW = ":new"


def read_table_file(path: str, delimiter: Optional[str] = None, max_mb: Optional[float] = DEFAULT_MAX_MB,
                    max_rows: Optional[int] = None, table_name: Optional[str] = None) -> pd.DataFrame:
    """The table at `path` (a CSV file, a SQLite file or a database URL), read and checked (a header
    row and at least one row): `table_sources.read_table_source`.

    Cheap next to loading a model: the command line calls it first, so that a typo in the path
    fails at once.

    Raises:
      AskError: naming the file: missing, a directory, unreadable, not UTF-8 CSV text, empty, a
        header without rows, over `max_mb` without `max_rows`, or a database table it cannot read.
    """
    return read_table_source(path, delimiter, max_mb, max_rows, table_name)


@dataclasses.dataclass
class Console:
    """How answers are shown.

    Attributes:
      as_json: one JSON line per answer instead of the marked table.
      html_path: also write every answer of the session (across `:new`) and the table marked for
        the last one to this page, after every answer.
      max_rows: rows of the table printed (rows with selected cells are always shown).
      title: the page's title.
      out: where answers go.
      messages: where prompts and notes go (never `out`, so that JSON lines stay alone there).
    """

    as_json: bool = False
    html_path: Optional[str] = None
    max_rows: int = 20
    title: str = "tapas-tf"
    out: TextIO = sys.stdout
    messages: TextIO = sys.stderr
    answers: List[AskResult] = dataclasses.field(default_factory=list)

    def show(self, table: interaction_pb2.Table, results: Sequence[AskResult], record: Optional[dict] = None,
             heading: Sequence[str] = (), footer: Sequence[str] = ()) -> None:
        """Prints the last of `results` (a conversation's answers so far) and rewrites the HTML page
        with every answer shown in this session.

        `record` replaces the result's own JSON view (an answer over a collection names its table);
        `heading` and `footer` are text lines printed above and below the marked table.
        """
        result = results[-1]
        self.answers.append(result)
        if self.as_json:
            print(json.dumps(record if record is not None else result.to_dict(), ensure_ascii=False),
                  file=self.out, flush=True)
        else:
            lines = [*heading, render_text(table, result, self.max_rows), *footer]
            print("\n".join(lines) + "\n", file=self.out, flush=True)
        if self.html_path:
            with open(self.html_path, "w", encoding="utf-8") as f:
                f.write(render_html(table, self.answers, title=self.title))

    def run(self, chat, question: str, lines: TextIO) -> int:
        """Answers `question` in `chat` (a table_qa.Conversation), or without one converses on
        `lines` (prompting if it is a terminal); returns the answers given."""
        if question:
            chat.ask(question)
            self._show_chat(chat)
            return 1
        return self.converse(chat, lines, prompt=lines.isatty())

    def _show_chat(self, chat) -> None:
        """Shows a conversation's last answer; over a collection, with the table it came from."""
        if not isinstance(chat, CollectionConversation) or chat.first is None:
            self.show(chat.table.table, chat.history)
            return
        found = chat.first
        if len(chat.history) == 1:
            self.show(chat.table.table, chat.history, found.to_dict(), [table_heading(found)],
                      runners_up_lines(found))
            return
        record = {**chat.history[-1].to_dict(), **table_fields(found)}
        self.show(chat.table.table, chat.history, record, [table_heading(found, follow_up=True)])

    def answer_file(self, ids_and_questions: Iterable[Tuple[str, str]], answer) -> Tuple[int, int]:
        """Answers each (id, question) with `answer(question)` (an AskResult or a CollectionAnswer)
        and prints it with its id; a question that cannot be answered prints its error (a JSON line
        with `error`) and the others go on. Returns (answered, failed)."""
        answered = failed = 0
        for question_id, question in ids_and_questions:
            try:
                found = answer(question)
            except AskError as e:
                failed += 1
                if self.as_json:
                    print(json.dumps({"id": question_id, "question": question, "error": str(e)}, ensure_ascii=False),
                          file=self.out, flush=True)
                else:
                    print(f"[{question_id}] {question}\n  error: {e}\n", file=self.out, flush=True)
                continue
            answered += 1
            if isinstance(found, CollectionAnswer):
                self.show(found.prepared.table, [found.result], {"id": question_id, **found.to_dict()},
                          [f"[{question_id}] {table_heading(found)}"], runners_up_lines(found))
            else:
                table, result = found
                self.show(table, [result], {"id": question_id, **result.to_dict()}, [f"[{question_id}]"])
        return answered, failed

    def converse(self, chat, lines: TextIO, prompt: bool) -> int:
        """Asks each line of `lines` in `chat` (a table_qa.Conversation); returns the answers given.

        `:new` starts a new conversation, `:quit` or the end of input stops. A question that cannot
        be asked prints its error and the conversation goes on.
        """
        answered = 0
        while True:
            if prompt:
                print("question> ", end="", flush=True, file=self.messages)
            line = lines.readline()
            if not line or line.strip() in QUIT:
                return answered
            question = line.strip()
            if not question:
                continue
            if question == NEW:
                chat.reset()
                print("(new conversation)", file=self.messages, flush=True)
                continue
            try:
                chat.ask(question)
            except AskError as e:
                print(f"ask: error: {e}", file=self.messages, flush=True)
                continue
            answered += 1
            self._show_chat(chat)


def table_fields(found: CollectionAnswer) -> dict:
    """The JSON fields that name an answer's table."""
    return {"table_id": found.table_id, "table_title": found.title, "table_source": found.source}


def table_heading(found: CollectionAnswer, follow_up: bool = False) -> str:
    """"From table csv/204-csv/590.csv, "Torre Jaume I" (retrieval rank 1 of 5)"."""
    where = f"From table {found.table_id}"
    if found.title and found.title != found.table_id:
        where += f', "{found.title}"'
    if follow_up:
        return where + " (the conversation's table)"
    return where + f" (retrieval rank {found.chosen.rank} of {len(found.candidates)}, {found.method})"


def runners_up_lines(found: CollectionAnswer, shown: int = 4) -> List[str]:
    """Up to `shown` runners-up, one line each: table, answer, confidence."""
    if not found.runners_up:
        return []
    lines = ["Runners-up:"]
    for candidate in found.runners_up[:shown]:
        if candidate.result is None:
            lines.append(f"  {candidate.table_id}: not asked ({candidate.error})")
            continue
        confidence = candidate.result.confidence
        sure = "" if confidence is None else f", confidence {confidence:.2f}"
        lines.append(f"  {candidate.table_id}: {candidate.result.summary} (retrieval rank {candidate.rank}{sure})")
    if len(found.runners_up) > shown:
        lines.append(f"  ... {len(found.runners_up) - shown} more")
    return lines


def ask_one_table(qa, frame: pd.DataFrame):
    """`Console.answer_file`'s answer function over one table (converted once)."""
    prepared = qa.prepare(frame)

    def answer(question: str):
        result = qa.answer_encoded([qa.encode(prepared, question)])[0]
        return prepared.table, result

    return answer


__all__ = ["AskError", "Console", "NoTableFound", "ask_one_table", "read_table_file",
           "runners_up_lines", "table_heading"]
