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
from typing import List, Optional, Sequence, TextIO

import pandas as pd

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.qa.ask_results import AskResult
from tapas_tf.qa.rendering import render_html, render_text
from tapas_tf.qa.tables import AskError, check_frame, read_table

QUIT = (":quit", ":q")
NEW = ":new"


def read_table_file(path: str, delimiter: Optional[str] = None) -> pd.DataFrame:
    """The CSV table at `path`, read and checked (a header row and at least one row).

    Cheap next to loading a model: the command line calls it first, so that a typo in the path
    fails at once.

    Raises:
      AskError: naming the file: missing, a directory, unreadable, not UTF-8 CSV text, empty, or a
        header without rows.
    """
    try:
        frame = read_table(path, delimiter)
    except OSError as e:  # Permission denied, say; read_table's own checks raise AskError.
        raise AskError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        check_frame(frame)
    except AskError as e:
        raise AskError(f"{path}: {e}") from None
    return frame


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

    def show(self, table: interaction_pb2.Table, results: Sequence[AskResult]) -> None:
        """Prints the last of `results` (a conversation's answers so far) and rewrites the HTML page
        with every answer shown in this session."""
        result = results[-1]
        self.answers.append(result)
        if self.as_json:
            print(json.dumps(result.to_dict()), file=self.out, flush=True)
        else:
            print(render_text(table, result, self.max_rows) + "\n", file=self.out, flush=True)
        if self.html_path:
            with open(self.html_path, "w", encoding="utf-8") as f:
                f.write(render_html(table, self.answers, title=self.title))

    def run(self, chat, question: str, lines: TextIO) -> int:
        """Answers `question` in `chat` (a table_qa.Conversation), or without one converses on
        `lines` (prompting if it is a terminal); returns the answers given."""
        if question:
            chat.ask(question)
            self.show(chat.table.table, chat.history)
            return 1
        return self.converse(chat, lines, prompt=lines.isatty())

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
            self.show(chat.table.table, chat.history)
