"""The WikiSQL release (Zhong et al., 2017): `{split}.jsonl` questions and `{split}.tables.jsonl`.

Each question line is `{"table_id", "question", "sql": {"sel", "agg", "conds"}}` (other keys such
as "phase" are ignored); each table line is `{"id", "header", "types", "rows"}` with optional
"page_title", "section_title" and "caption" (kept as the Table's document_title,
context_heading and caption). The answer of a question is obtained by executing its gold SQL on
its table (`sql_execution`, whose docstring gives every rule). Cells become texts by
`sql_execution.cell_text` (9.0 -> "9").

One interaction per question line, with id `{split}-{line_number - 1}` and one question
`{interaction_id}_0` (its text and original_text are the question as given). The answer:

| field                | supervised=False (WIKISQL)        | supervised=True (WIKISQL_SUPERVISED) |
|----------------------|-----------------------------------|--------------------------------------|
| answer_texts         | answer (the executed result)      | answer                               |
| float_value          | answer, when the result is scalar | answer, when the result is scalar    |
| answer_coordinates   | derived (what weak supervision    | gold                                 |
|                      | would find from the answer)       |                                      |
| aggregation_function | left NONE: to be learned          | gold                                 |

`WEAK_ANSWER_FIELDS` / `DERIVED_ANSWER_FIELDS` / `GOLD_ANSWER_FIELDS` say the same in code.

Accounting (docs/DATA_CONTRACT.md): every line of the question file becomes an interaction or
a `ReaderError` naming the file and line. Lines that cannot become a question (invalid UTF-8, a
blank line, invalid JSON, a missing field) are line errors ("invalid_utf8", "blank_line",
"malformed_line"); a question that was read but cannot be answered is a question error with
`question_id` set ("missing_table", "bad_table", "bad_column", "bad_aggregation",
"bad_operator", "bad_condition"). After `interactions()`:
`lines_read == question_lines + the lines of the errors without question_id`. Bad lines of the
tables file are yielded first as line errors on that file ("malformed_line", "bad_table",
"duplicate_table"); `table_lines_read == tables_read + their lines`. A file that is not JSON lines
at all (its first non-blank line is not a JSON object: a gzip file, a JSON array) is refused whole
by `check_header()` ("bad_header"), before any line is read.

If a question line carries a released "answer" (some WikiSQL derivatives add one: a value or a
list of values), it is compared with the executed answer (order-insensitive; numbers compared
numerically to 6 decimals, texts lower-cased); `differs_from_release` counts the questions whose
answers differ (their ids are in `differing_question_ids`), `release_answers_compared` the
questions compared.
"""

import dataclasses
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from tapas_tf.data import sql_execution
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, make_table

WEAK_ANSWER_FIELDS = ("answer_texts", "float_value")
DERIVED_ANSWER_FIELDS = ("answer_coordinates",)  # In supervised=False mode.
GOLD_ANSWER_FIELDS = ("answer_texts", "float_value", "answer_coordinates", "aggregation_function")

_TITLE_FIELDS = (("page_title", "document_title"), ("section_title", "context_heading"),
                 ("caption", "caption"))


@dataclasses.dataclass(frozen=True)
class WikiSqlTable:
    """A table of the tables file: raw cells (for execution) and the proto (cells as text)."""

    table_id: str
    header: Tuple[str, ...]
    types: Optional[Tuple[str, ...]]
    rows: Tuple[Tuple[sql_execution.Cell, ...], ...]
    proto: interaction_pb2.Table


def _decode(raw: bytes, path: str, number: int) -> Union[str, ReaderError]:
    """The line's text, or a line error for bad UTF-8, a blank line or no JSON object."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return _line_error("invalid_utf8", path, number, f"byte {e.start} of the line is not valid UTF-8 "
                           f"({e.reason}); the line is skipped")
    if not text.strip():
        return _line_error("blank_line", path, number, "blank line")
    return text


def _load_object(raw: bytes, path: str, number: int) -> Union[Dict[str, Any], ReaderError]:
    text = _decode(raw, path, number)
    if isinstance(text, ReaderError):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return _line_error("malformed_line", path, number, f"invalid JSON ({e.msg} at column {e.colno})")
    except (ValueError, RecursionError) as e:  # E.g. an integer with too many digits, deep nesting.
        return _line_error("malformed_line", path, number, f"invalid JSON ({type(e).__name__}: {e})")
    if not isinstance(value, dict):
        return _line_error("malformed_line", path, number,
                           f"expected a JSON object, got {type(value).__name__}")
    return value


def _line_error(reason: str, path: str, number: int, message: str,
                question_id: Optional[str] = None) -> ReaderError:
    prefix = f"{path}:{number}: " + (f"question {question_id}: " if question_id else "")
    return ReaderError(reason, prefix + message, path=path, first_line=number, last_line=number,
                       question_id=question_id)


def _file_error(path: str, error: OSError) -> ReaderError:
    """The error of a file that cannot be opened (it covers no line: none could be read)."""
    reason = "missing_file" if isinstance(error, FileNotFoundError) else "unreadable_file"
    return ReaderError(reason, f"{path}: {error.strerror or error}", path=path)


def _iter_lines(path: str) -> Iterator[Tuple[int, bytes]]:
    """(1-based line number, bytes without the newline) of each line of `path`."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            yield number, raw.rstrip(b"\r\n")


def check_jsonl(path: str) -> None:
    """Raises ReaderError("bad_header") when the first non-blank line of `path` is not a JSON object
    (invalid UTF-8, not JSON, or another JSON value: a gzip file, a JSON array file), so that a file
    that is not JSON lines at all is refused whole rather than read as that many bad lines. A file
    with no non-blank line passes (it has no line to refuse); later bad lines are line errors.

    Raises:
      ReaderError: "bad_header" as above, "unreadable_file" when it cannot be read.
    """
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                if raw.strip():
                    break
            else:
                return
    except OSError as e:
        raise _file_error(path, e) from None

    def refuse(why: str):
        return ReaderError("bad_header", f"{path}:{number}: not a JSONL file: {why}", path=path,
                           first_line=number)

    try:
        text = raw.rstrip(b"\r\n").decode("utf-8")
    except UnicodeDecodeError as e:
        raise refuse(f"byte {e.start} of the line is not valid UTF-8 (a binary or compressed file?)") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise refuse(f"the line is not JSON ({e.msg} at column {e.colno}); each line is one JSON object") from None
    except (ValueError, RecursionError) as e:
        raise refuse(f"the line is not JSON ({type(e).__name__}: {e})") from None
    if not isinstance(value, dict):
        raise refuse(f"the line is a JSON {type(value).__name__}, not an object; each line is one JSON object")


def _is_cell(value) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def parse_table(value: Dict[str, Any]) -> WikiSqlTable:
    """A WikiSqlTable from a tables-file object; ValueError saying what is wrong."""
    table_id, header, rows = value.get("id"), value.get("header"), value.get("rows")
    if not isinstance(table_id, str) or not table_id:
        raise ValueError("'id' is missing or not a non-empty string")
    if not isinstance(header, list) or not header or not all(isinstance(h, str) for h in header):
        raise ValueError(f"table {table_id}: 'header' is not a non-empty list of strings")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise ValueError(f"table {table_id}: 'rows' is not a list of lists")
    for index, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"table {table_id}: row {index} has {len(row)} cells, "
                             f"the header has {len(header)}")
        if not all(_is_cell(c) for c in row):
            raise ValueError(f"table {table_id}: row {index} has a cell that is not a string, number or null")
    types = value.get("types")
    if types is not None and (not isinstance(types, list) or len(types) != len(header)):
        raise ValueError(f"table {table_id}: 'types' does not have one entry per column")
    proto = make_table(table_id, list(header), [[sql_execution.cell_text(c) for c in row] for row in rows])
    for source, target in _TITLE_FIELDS:
        if isinstance(value.get(source), str):
            setattr(proto, target, value[source])
    return WikiSqlTable(table_id, tuple(header), tuple(types) if types is not None else None,
                        tuple(tuple(row) for row in rows), proto)


@dataclasses.dataclass
class TablesFile:
    """The tables of a tables file by id (a ReaderError for a table that is unusable), and its
    line errors; `lines_read == tables_read + sum(e.num_lines for e in errors)`."""

    path: str
    tables: Dict[str, Union[WikiSqlTable, ReaderError]] = dataclasses.field(default_factory=dict)
    errors: List[ReaderError] = dataclasses.field(default_factory=list)
    lines_read: int = 0
    tables_read: int = 0


def read_tables(path: str) -> TablesFile:
    """Reads a `{split}.tables.jsonl` file once. A missing file gives one "missing_file" error."""
    result = TablesFile(path)
    try:
        for number, raw in _iter_lines(path):
            result.lines_read = number
            _add_table(result, number, raw)
    except OSError as e:
        result.errors.append(_file_error(path, e))
    return result


def _add_table(result: TablesFile, number: int, raw: bytes) -> None:
    """Adds the table of one line of the tables file, or its line error."""
    path = result.path
    value = _load_object(raw, path, number)
    if isinstance(value, ReaderError):
        result.errors.append(value)
        return
    table_id = value.get("id")
    if isinstance(table_id, str) and table_id in result.tables:
        result.errors.append(_line_error("duplicate_table", path, number,
                                         f"table {table_id} was already defined; the first is kept"))
        return
    try:
        result.tables[table_id] = parse_table(value)
    except ValueError as e:
        error = _line_error("bad_table", path, number, str(e))
        result.errors.append(error)
        if isinstance(table_id, str) and table_id:
            result.tables[table_id] = error  # Its questions are skipped with this reason.
        return
    result.tables_read += 1


def answer_keys(values: Sequence[Any]) -> List[Tuple[str, Any]]:
    """Order-insensitive comparison keys of answer values: numbers to 6 decimals, texts folded."""
    keys = set()
    for value in values:
        number = sql_execution.cell_number(value)
        if number is not None:
            keys.add(("n", round(number, 6)))
        else:
            keys.add(("t", sql_execution.normalize_for_equality(value)))
    return sorted(keys)


def build_interaction(interaction_id: str, question_text: str, table: interaction_pb2.Table,
                      result: sql_execution.SqlResult, supervised: bool) -> interaction_pb2.Interaction:
    """One interaction with one question answered by `result` (see the module's table of fields)."""
    interaction = interaction_pb2.Interaction(id=interaction_id)
    interaction.table.CopyFrom(table)
    question = interaction.questions.add(id=f"{interaction_id}_0", text=question_text,
                                         original_text=question_text)
    answer = question.answer
    answer.answer_texts.extend(result.values)
    if result.float_value is not None:
        answer.float_value = result.float_value
    for row, column in result.coordinates:
        answer.answer_coordinates.add(row_index=row, column_index=column)
    if supervised:
        answer.aggregation_function = result.aggregation_function
    return interaction


def split_name(jsonl_path: str) -> str:
    """"data/dev.jsonl" -> "dev"."""
    name = os.path.basename(jsonl_path)
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else os.path.splitext(name)[0]


class WikiSqlFile:
    """One WikiSQL split read into one interaction per question line, errors inline.

    Args:
      jsonl_path: the `{split}.jsonl` question file.
      tables_path: its `{split}.tables.jsonl`, read once (on the first `interactions()`).
      supervised: True for WIKISQL_SUPERVISED (gold aggregation), False for WIKISQL.
      split: the interaction id prefix; by default the question file's name without ".jsonl".
    """

    header_lines = 0  # JSON lines have no header (kept for the same report as the TSV readers).

    def __init__(self, jsonl_path: str, tables_path: str, supervised: bool = False,
                 split: Optional[str] = None):
        self.jsonl_path = jsonl_path
        self.tables_path = tables_path
        self.supervised = supervised
        self.split = split if split is not None else split_name(jsonl_path)
        self._tables: Optional[TablesFile] = None
        self._reset_counts()

    def _reset_counts(self) -> None:
        self.lines_read = 0
        self.question_lines = 0
        self.questions_read = 0
        self.differs_from_release = 0
        self.release_answers_compared = 0
        self.differing_question_ids: List[str] = []
        self.skipped_non_numeric_cells = 0

    @property
    def tables(self) -> TablesFile:
        if self._tables is None:
            self._tables = read_tables(self.tables_path)
        return self._tables

    @property
    def table_lines_read(self) -> int:
        """Lines of the tables file read (its line errors are among `interactions()`' errors)."""
        return self.tables.lines_read

    @property
    def table_lines_used(self) -> int:
        """Lines of the tables file that became tables."""
        return self.tables.tables_read

    def check_files(self) -> None:
        """Raises ReaderError naming a question or tables file that is missing ("missing_file") or
        is not JSON lines at all ("bad_header": its first non-blank line is not a JSON object)."""
        for path in (self.jsonl_path, self.tables_path):
            if not os.path.isfile(path):
                raise ReaderError("missing_file", f"{path}: file not found", path=path)
            check_jsonl(path)

    check_header = check_files  # The name the create_data job calls on every release file.

    def reader_counts(self) -> Dict[str, int]:
        """After `interactions()`: released answers compared with the executed ones and how many
        differ (the paper's appendix counts these), and non-numeric cells that SUM, AVG, MIN or MAX
        skipped."""
        return {"release_answers_compared": self.release_answers_compared,
                "differs_from_release": self.differs_from_release,
                "skipped_non_numeric_cells": self.skipped_non_numeric_cells}

    def interactions(self) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        """The tables file's line errors, then one interaction or error per question line."""
        self._reset_counts()
        yield from self.tables.errors
        try:
            lines = _iter_lines(self.jsonl_path)
            for number, raw in lines:
                self.lines_read = number
                yield self._convert_line(number, raw)
        except OSError as e:
            yield _file_error(self.jsonl_path, e)

    def _convert_line(self, number: int, raw: bytes) -> Union[interaction_pb2.Interaction, ReaderError]:
        path = self.jsonl_path
        value = _load_object(raw, path, number)
        if isinstance(value, ReaderError):
            return value
        for key, kind, name in (("question", str, "string"), ("table_id", str, "string"),
                                ("sql", dict, "JSON object")):
            if not isinstance(value.get(key), kind):
                return _line_error("malformed_line", path, number, f"field {key!r} is missing or not a {name}")
        self.questions_read += 1
        self.question_lines += 1
        interaction_id = f"{self.split}-{number - 1}"
        question_id = f"{interaction_id}_0"
        table = self.tables.tables.get(value["table_id"])
        if table is None:
            return _line_error("missing_table", path, number, f"unknown table id {value['table_id']!r} "
                               f"(not in {self.tables_path})", question_id)
        if isinstance(table, ReaderError):
            return _line_error(table.reason, path, number, f"its table is unusable: {table}", question_id)
        sql = value["sql"]
        try:
            result = sql_execution.execute_sql(table.header, table.types, table.rows,
                                               sql.get("sel"), sql.get("agg"), sql.get("conds"))
        except sql_execution.SqlError as e:
            return _line_error(e.reason, path, number, f"{e} (table {table.table_id})", question_id)
        self.skipped_non_numeric_cells += result.skipped_non_numeric
        if "answer" in value:
            self._compare_with_release(question_id, value["answer"], result)
        return build_interaction(interaction_id, value["question"], table.proto, result, self.supervised)

    def _compare_with_release(self, question_id: str, released: Any, result: sql_execution.SqlResult) -> None:
        released_values = released if isinstance(released, list) else [released]
        self.release_answers_compared += 1
        if answer_keys(released_values) != answer_keys(result.values):
            self.differs_from_release += 1
            self.differing_question_ids.append(question_id)


def tables_path_for(jsonl_path: str) -> str:
    """"data/dev.jsonl" -> "data/dev.tables.jsonl"."""
    return os.path.join(os.path.dirname(jsonl_path), f"{split_name(jsonl_path)}.tables.jsonl")


def release_file(jsonl_path: str, input_dir: str, supervised: bool = False) -> WikiSqlFile:
    """The split file `jsonl_path` with its tables file beside it, in the create_data job's
    `release_file(path, input_dir)` form (`input_dir` is not needed: the paths are absolute)."""
    del input_dir
    return WikiSqlFile(jsonl_path, tables_path_for(jsonl_path), supervised=supervised)


def read_wikisql_interactions(jsonl_path: str, tables_path: str, supervised: bool = False
                              ) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
    """All interactions of a WikiSQL split, errors inline (for the counters, use `WikiSqlFile`)."""
    return WikiSqlFile(jsonl_path, tables_path, supervised=supervised).interactions()
