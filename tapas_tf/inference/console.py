"""The terminal side of asking: printing answers, writing the HTML page, and a conversation on stdin.

Used by `python -m tapas_tf.ask`; kept here so that the command line stays a few lines of flags.
"""

import dataclasses
import json
import sys
from typing import Optional, Sequence, TextIO

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.inference.ask_results import AskResult
from tapas_tf.inference.rendering import render_html, render_text
from tapas_tf.inference.tables import AskError

QUIT = (":quit", ":q")
NEW = ":new"


@dataclasses.dataclass
class Console:
    """How answers are shown.

    Attributes:
      as_json: one JSON line per answer instead of the marked table.
      html_path: also write the conversation and the marked table to this page after every answer.
      max_rows: rows of the table printed (rows with selected cells are always shown).
      title: the page's title.
    """

    as_json: bool = False
    html_path: Optional[str] = None
    max_rows: int = 20
    title: str = "tapas-tf"
    out: TextIO = sys.stdout

    def show(self, table: interaction_pb2.Table, results: Sequence[AskResult]) -> None:
        """Prints the last answer; rewrites the HTML page with the whole conversation."""
        result = results[-1]
        if self.as_json:
            print(json.dumps(result.to_dict()), file=self.out)
        else:
            print(render_text(table, result, self.max_rows) + "\n", file=self.out)
        if self.html_path:
            with open(self.html_path, "w", encoding="utf-8") as f:
                f.write(render_html(table, results, title=self.title))

    def converse(self, chat, lines: TextIO, prompt: bool) -> int:
        """Asks each line of `lines` in `chat` (a table_qa.Conversation); returns the answers given.

        `:new` starts a new conversation, `:quit` or the end of input stops. A question that cannot
        be asked prints its error and the conversation goes on.
        """
        answered = 0
        while True:
            if prompt:
                print("question> ", end="", flush=True, file=self.out)
            line = lines.readline()
            if not line or line.strip() in QUIT:
                return answered
            question = line.strip()
            if not question:
                continue
            if question == NEW:
                chat.reset()
                print("(new conversation)", file=self.out)
                continue
            try:
                chat.ask(question)
            except AskError as e:
                print(f"ask: error: {e}", file=sys.stderr)
                continue
            answered += 1
            self.show(chat.table.table, chat.history)
