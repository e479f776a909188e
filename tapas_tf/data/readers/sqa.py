"""The SQA release (Iyyer et al., 2017): TSV files of question sequences plus `table_csv/`.

TSV columns: `id annotator position question table_file answer_coordinates
answer_text`. Fields may be quoted (questions can hold tabs and newlines).
`answer_coordinates` is a Python-literal list of `'(row, column)'` strings, rows
counted from the first body row. One interaction is made per (id, annotator)
sequence, with its questions in position order and ids
`{id}-{annotator}_{position}`.
"""

import ast
import csv
import dataclasses
from typing import Dict, Iterator, List, Tuple, Union

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, read_csv_table, resolve_inside

COLUMNS = ("id", "annotator", "position", "question", "table_file", "answer_coordinates", "answer_text")


@dataclasses.dataclass(frozen=True)
class SqaRow:
    sequence_id: str
    annotator: int
    position: int
    question: str
    table_file: str
    coordinates: Tuple[Tuple[int, int], ...]
    answer_texts: Tuple[str, ...]
    # False when the answer fields could not be parsed; the question is kept so
    # that positions stay intact, and conversion counts it as an invalid answer.
    answer_valid: bool
    location: str  # "file:line", for messages.


def parse_coordinates(text: str) -> Tuple[Tuple[int, int], ...]:
    """"['(0, 4)', '(1, 4)']" -> ((0, 4), (1, 4)). Raises ValueError."""
    items = ast.literal_eval(text)
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected a list, got {type(items).__name__}")
    coordinates = []
    for item in items:
        pair = ast.literal_eval(item) if isinstance(item, str) else item
        if (not isinstance(pair, tuple) or len(pair) != 2
                or not all(isinstance(v, int) for v in pair)):
            raise ValueError(f"bad coordinate {item!r}")
        coordinates.append((pair[0], pair[1]))
    return tuple(coordinates)


def parse_answer_texts(text: str) -> Tuple[str, ...]:
    items = ast.literal_eval(text)
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected a list, got {type(items).__name__}")
    return tuple(str(item) for item in items)


def _parse_row(fields: List[str], location: str) -> SqaRow:
    if len(fields) != len(COLUMNS):
        raise ReaderError("malformed_line", f"{location}: expected {len(COLUMNS)} tab-separated "
                          f"fields, found {len(fields)}")
    sequence_id, annotator, position, question, table_file, coordinates, answer_text = fields
    try:
        annotator_int, position_int = int(annotator), int(position)
    except ValueError:
        raise ReaderError("malformed_line", f"{location}: annotator {annotator!r} and position "
                          f"{position!r} must be integers") from None
    if not sequence_id:
        raise ReaderError("malformed_line", f"{location}: empty id")
    try:
        parsed_coordinates = parse_coordinates(coordinates)
        parsed_texts = parse_answer_texts(answer_text)
        valid = True
    except (ValueError, SyntaxError):
        parsed_coordinates, parsed_texts, valid = (), (), False
    return SqaRow(sequence_id, annotator_int, position_int, question, table_file,
                  parsed_coordinates, parsed_texts, valid, location)


def read_sqa_rows(tsv_path: str) -> Iterator[Union[SqaRow, ReaderError]]:
    """Yields the rows of an SQA TSV file, or a ReaderError for each malformed line."""
    try:
        f = open(tsv_path, encoding="utf-8", newline="")
    except FileNotFoundError:
        raise ReaderError("missing_file", f"{tsv_path}: file not found") from None
    with f:
        reader = csv.reader(f, delimiter="\t")
        try:
            header = next(reader)
        except StopIteration:
            return
        if tuple(header) != COLUMNS:
            raise ReaderError("bad_header", f"{tsv_path}:1: header {header} is not {list(COLUMNS)}")
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as e:
                yield ReaderError("malformed_line", f"{tsv_path}:{reader.line_num}: {e}")
                return
            location = f"{tsv_path}:{reader.line_num}"
            try:
                yield _parse_row(fields, location)
            except ReaderError as e:
                yield e


def sequence_key(row: SqaRow) -> str:
    """The interaction id of the row's sequence: `{id}-{annotator}`."""
    return f"{row.sequence_id}-{row.annotator}"


def build_interaction(key: str, rows: List[SqaRow], input_dir: str,
                      table_cache: Dict[str, interaction_pb2.Table] = None) -> interaction_pb2.Interaction:
    """One interaction from the rows of a sequence (any order).

    Raises ReaderError when the sequence's table cannot be read, its rows name
    different tables, or two rows share a position.
    """
    rows = sorted(rows, key=lambda r: r.position)
    tables = {r.table_file for r in rows}
    if len(tables) != 1:
        raise ReaderError("inconsistent_sequence", f"{rows[0].location}: sequence {key} names "
                          f"several tables: {sorted(tables)}")
    positions = [r.position for r in rows]
    if len(set(positions)) != len(positions):
        raise ReaderError("inconsistent_sequence", f"{rows[0].location}: sequence {key} repeats "
                          f"a position: {positions}")
    table_file = rows[0].table_file
    if table_cache is not None and table_file in table_cache:
        table = table_cache[table_file]
    else:
        table = read_csv_table(resolve_inside(input_dir, table_file, "table"), table_file)
        if table_cache is not None:
            table_cache[table_file] = table
    interaction = interaction_pb2.Interaction(id=key)
    interaction.table.CopyFrom(table)
    for row in rows:
        question = interaction.questions.add(id=f"{key}_{row.position}", original_text=row.question)
        question.text = row.question
        answer = question.answer
        answer.is_valid = row.answer_valid
        for r, c in row.coordinates:
            answer.answer_coordinates.add(row_index=r, column_index=c)
        answer.answer_texts.extend(row.answer_texts)
    return interaction


def read_sqa_interactions(tsv_path: str, input_dir: str
                          ) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
    """All interactions of an SQA TSV file (in order of first appearance), with errors inline."""
    grouped: Dict[str, List[SqaRow]] = {}
    for row in read_sqa_rows(tsv_path):
        if isinstance(row, ReaderError):
            yield row
            continue
        grouped.setdefault(sequence_key(row), []).append(row)
    cache: Dict[str, interaction_pb2.Table] = {}
    for key, rows in grouped.items():
        try:
            yield build_interaction(key, rows, input_dir, cache)
        except ReaderError as e:
            yield e
