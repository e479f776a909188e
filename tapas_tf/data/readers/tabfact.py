"""TabFact (Chen et al., ICLR 2020): is a statement about a table true? The reader of the release.

The release's split files (`train_examples.json`, `val_examples.json`, `test_examples.json`) are one
JSON object, one entry per table:

    {"2-15654040-4.html.csv": [["statement 1", "statement 2"], [1, 0], "the page title"], ...}

with label 1 for an entailed (true) statement and 0 for a refuted one. Tables are
`all_csv/<table id>`: lowercased, `#`-separated, the first line the header.

    reader = TabFactFile("tabfact/val_examples.json", "tabfact")
    for item in reader.interactions():   # an Interaction per statement, or a ReaderError
        ...

Each statement becomes one interaction: the table, one question (the statement) whose
`answer.class_index` is the label, no answer cells. Every physical line of the split's file is
accounted for (docs/DATA_CONTRACT.md): the lines of an entry are question lines; an entry that is
not `[statements, labels, caption]` is a line error ("malformed_entry") covering its lines; a
statement whose table is missing or unreadable is read and yielded as a question error (it names the
statement); the object's own braces are header lines. A file that is not a JSON object, or not
valid JSON at all (truncated, say), is refused whole by `check_header()` with one error naming the
file, line and column ("bad_header", "malformed_json"); `interactions()` raises that error too if
the file went bad after the check.
"""

import bisect
import json
import os
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, make_table, read_table_bytes, resolve_inside

TABLES_DIR = "all_csv"
SEPARATOR = "#"
LABELS = (0, 1)  # refuted, entailed


def parse_table(text: str, path: str, table_id: str) -> interaction_pb2.Table:
    """A `#`-separated table (first line the header) as a Table proto.

    Raises:
      ReaderError: no header or no rows ("empty_table"), or a row with another number of cells than
        the header ("ragged_table", naming the line).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise ReaderError("empty_table", f"{path}: table has no header or no rows")
    rows = [line.split(SEPARATOR) for line in lines]
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            raise ReaderError("ragged_table", f"{path}:{number}: row has {len(row)} cells, "
                              f"the header has {len(rows[0])}")
    return make_table(table_id, [c.strip() for c in rows[0]], [[c.strip() for c in row] for row in rows[1:]])


def read_table(input_dir: str, table_id: str) -> interaction_pb2.Table:
    """The table `all_csv/<table_id>` of the release in `input_dir`.

    Raises:
      ReaderError: as `parse_table`, a missing or unreadable file, or bytes that are not UTF-8.
    """
    path = resolve_inside(input_dir, os.path.join(TABLES_DIR, table_id), "table")
    try:
        text = read_table_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReaderError("table_not_utf8", f"{path}: byte {e.start} is not valid UTF-8") from None
    return parse_table(text, path, table_id)


def _entry_problem(value: Any) -> Optional[str]:
    """Why an entry is not [statements, labels, caption], or None."""
    if not isinstance(value, list) or len(value) not in (2, 3):
        return "an entry is [statements, labels, caption]"
    statements, labels = value[0], value[1]
    if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
        return "its statements are not a list of strings"
    if not isinstance(labels, list) or any(isinstance(x, bool) or x not in LABELS for x in labels):
        return "its labels are not a list of 0 (refuted) and 1 (entailed)"
    if len(statements) != len(labels):
        return f"it has {len(statements)} statements and {len(labels)} labels"
    if len(value) == 3 and not isinstance(value[2], str):
        return "its caption is not a string"
    return None


class TabFactFile:
    """One split's file of the TabFact release, read into one interaction per statement.

    Args:
      path: the split's JSON file (`{train,val,test}_examples.json`).
      input_dir: the release folder, which holds `all_csv/`.
    """

    header_lines = 0
    table_lines_read = 0  # Tables are files of their own, not lines of the split's file.
    table_lines_used = 0

    def __init__(self, path: str, input_dir: str):
        self.path = path
        self.input_dir = input_dir
        self._reset_counts()

    def _reset_counts(self) -> None:
        self.lines_read = 0
        self.header_lines = 0
        self.question_lines = 0
        self.questions_read = 0
        self.tables_missing = 0
        self.labels = {label: 0 for label in LABELS}
        self._line_error_lines = 0

    def check_header(self) -> None:
        """Raises ReaderError when the file is missing, unreadable, not a JSON object ("bad_header") or
        not valid JSON anywhere in it ("malformed_json", naming the line and column)."""
        load_split(self.path)

    def reader_counts(self) -> Dict[str, int]:
        """After `interactions()`: statements by label, and tables that could not be read."""
        return {"entailed": self.labels[1], "refuted": self.labels[0], "tables_missing": self.tables_missing}

    def interactions(self) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        """One interaction per statement, in file order, with errors inline."""
        self._reset_counts()
        with open(self.path, encoding="utf-8") as f:
            text = f.read()
        lines = _LineIndex(text)
        self.lines_read = lines.count
        owned = 0  # Lines before this one belong to an earlier entry (or are header lines).
        for item in _entries(text):
            first, last = lines.line_of(item.start), lines.line_of(max(item.end - 1, item.start))
            span = (max(first, owned + 1), last) if last > owned else None
            owned = max(owned, last)
            num_lines = span[1] - span[0] + 1 if span else 0
            if item.error is not None or _entry_problem(item.value):
                self._line_error_lines += num_lines
            if item.error is not None:
                # The file is not valid JSON (it changed after `check_header()`): an error of the
                # whole file, not of its lines.
                parse_split(text, self.path)
                raise ReaderError(item.error[0], f"{self.path}:{first}: {item.error[1]}",
                                  path=self.path, first_line=first)
            problem = _entry_problem(item.value)
            if problem:
                yield ReaderError("malformed_entry", f"{self.path}:{first}: entry {item.key!r}: {problem}",
                                  self.path, *(span or (None, None)))
                continue
            self.question_lines += num_lines
            yield from self._statements(item.key, item.value, first)
        # What no entry covers: the object's braces, blank lines.
        self.header_lines = self.lines_read - self.question_lines - self._line_error_lines

    def _statements(self, table_id: str, value: List[Any], line: int
                    ) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        statements, labels = value[0], value[1]
        caption = value[2] if len(value) == 3 else ""
        try:
            table = read_table(self.input_dir, table_id)
            table.document_title = caption
        except ReaderError as e:
            self.tables_missing += 1
            table = e
        for index, (statement, label) in enumerate(zip(statements, labels)):
            self.questions_read += 1
            question_id = f"{table_id}-{index}"
            if isinstance(table, ReaderError):
                yield ReaderError(table.reason, f"{self.path}:{line}: statement {question_id}: {table}",
                                  self.path, question_id=question_id)
                continue
            self.labels[label] += 1
            yield build_interaction(question_id, statement, label, table)


def load_split(path: str) -> Dict[str, Any]:
    """The split file's JSON object (table id -> entry; the entries are not checked).

    Raises:
      ReaderError: "missing_file", "unreadable_file" (or not UTF-8), or as `parse_split`.
    """
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        raise ReaderError("missing_file", f"{path}: file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReaderError("unreadable_file", f"{path}: cannot read it ({e})", path=path) from None
    return parse_split(text, path)


def parse_split(text: str, path: str) -> Dict[str, Any]:
    """The JSON object of a split file's text.

    Raises:
      ReaderError: "bad_header" when the text does not start a JSON object; "malformed_json" when it
        is not valid JSON, as `PATH:LINE:COLUMN: not valid JSON (MESSAGE, at byte N)`
        (the byte offset counted in the file's UTF-8).
    """
    if not text.lstrip().startswith("{"):
        raise ReaderError("bad_header", f"{path}: not a TabFact split file (a JSON object of "
                          "table id -> [statements, labels, caption])", path=path, first_line=1)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        offset = len(text[:e.pos].encode("utf-8"))
        # "Unterminated string starting at" ends where the position goes; "Expecting value" does not.
        where = f"{e.msg} byte {offset}" if e.msg.endswith(" at") else f"{e.msg}, at byte {offset}"
        raise ReaderError("malformed_json", f"{path}:{e.lineno}:{e.colno}: not valid JSON ({where})",
                          path=path, first_line=e.lineno) from None
    except (ValueError, RecursionError) as e:  # An integer with too many digits, deep nesting: no position.
        raise ReaderError("malformed_json", f"{path}: not valid JSON ({type(e).__name__}: {e})",
                          path=path) from None


def build_interaction(interaction_id: str, statement: str, label: int,
                      table: interaction_pb2.Table) -> interaction_pb2.Interaction:
    """One statement about `table` with its label (1 entailed, 0 refuted) as `answer.class_index`."""
    interaction = interaction_pb2.Interaction(id=interaction_id)
    interaction.table.CopyFrom(table)
    question = interaction.questions.add(id=f"{interaction_id}_0", original_text=statement, text=statement)
    question.answer.class_index = label
    question.answer.is_valid = True
    return interaction


class _Entry:
    __slots__ = ("key", "value", "start", "end", "error")

    def __init__(self, key, value, start, end, error: Optional[Tuple[str, str]] = None):
        self.key, self.value, self.start, self.end, self.error = key, value, start, end, error


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _entries(text: str) -> Iterator[_Entry]:
    """The entries of a JSON object, each with its character span; a syntax error ends the walk with
    one "malformed_json" entry covering the rest of the text."""
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    if not text.startswith("{", position):
        yield _Entry(None, None, position, len(text), ("malformed_json", "the file is not a JSON object"))
        return
    position = _skip_space(text, position + 1)
    if text.startswith("}", position):
        return
    while True:
        start = position
        try:
            key, position = decoder.raw_decode(text, position)
            position = _skip_space(text, position)
            if not isinstance(key, str) or not text.startswith(":", position):
                raise ValueError("expected a table id and ':'")
            value, position = decoder.raw_decode(text, _skip_space(text, position + 1))
        except ValueError as e:
            yield _Entry(None, None, start, len(text), ("malformed_json", f"not valid JSON from here ({e})"))
            return
        yield _Entry(key, value, start, position)
        position = _skip_space(text, position)
        if text.startswith(",", position):
            position = _skip_space(text, position + 1)
        elif text.startswith("}", position):
            return
        else:
            yield _Entry(None, None, position, len(text),
                         ("malformed_json", "expected ',' or '}' after an entry"))
            return


class _LineIndex:
    """1-based line numbers of character offsets."""

    def __init__(self, text: str):
        self._starts = [0] + [m.end() for m in re.finditer("\n", text) if m.end() < len(text)]
        self.count = len(self._starts) if text else 0

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)
