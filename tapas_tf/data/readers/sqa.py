"""The SQA release (Iyyer et al., 2017): TSV files of question sequences plus `table_csv/`.

TSV columns: `id annotator position question table_file answer_coordinates
answer_text`. Fields may be quoted (questions can hold tabs and newlines).
`answer_coordinates` is a Python-literal list of `'(row, column)'` strings, rows
counted from the first body row. One interaction is made per (id, annotator)
sequence, with its questions in position order and ids
`{id}-{annotator}_{position}`.

Every physical line ends up in one place (docs/DATA_CONTRACT.md): the header, a question, or a
`ReaderError` with its lines. A question whose sequence cannot be built (its table is missing,
say) is yielded as one `ReaderError` per question, with the question id and its lines.
"""

import ast
import dataclasses
from typing import Dict, Iterator, List, Optional, Tuple, Union

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, read_csv_table, resolve_inside
from tapas_tf.data.readers.tsv import ReleaseFile, TsvRecord

COLUMNS = ("id", "annotator", "position", "question", "table_file", "answer_coordinates", "answer_text")


# Answer coordinates are stored as int32 in the Interaction proto.
_MAX_INDEX = 2**31 - 1


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
    path: str
    first_line: int
    last_line: int

    @property
    def location(self) -> str:
        """"file:line" or "file:first-last", for messages."""
        lines = str(self.first_line) if self.first_line == self.last_line else f"{self.first_line}-{self.last_line}"
        return f"{self.path}:{lines}"

    @property
    def num_lines(self) -> int:
        return self.last_line - self.first_line + 1


def parse_coordinates(text: str) -> Tuple[Tuple[int, int], ...]:
    """"['(0, 4)', '(1, 4)']" -> ((0, 4), (1, 4)). Raises ValueError (or SyntaxError)."""
    items = ast.literal_eval(text)
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected a list, got {type(items).__name__}")
    coordinates = []
    for item in items:
        pair = ast.literal_eval(item) if isinstance(item, str) else item
        if (not isinstance(pair, tuple) or len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)):
            raise ValueError(f"bad coordinate {item!r}")
        if not all(0 <= v <= _MAX_INDEX for v in pair):
            raise ValueError(f"coordinate {item!r} is outside 0..{_MAX_INDEX}")
        coordinates.append((pair[0], pair[1]))
    return tuple(coordinates)


def parse_answer_texts(text: str) -> Tuple[str, ...]:
    items = ast.literal_eval(text)
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected a list, got {type(items).__name__}")
    return tuple(str(item) for item in items)


def _line_error(record: TsvRecord, message: str) -> ReaderError:
    return ReaderError("malformed_line", f"{record.location}: {message}", path=record.path,
                       first_line=record.first_line, last_line=record.last_line)


def _parse_row(record: TsvRecord) -> Union[SqaRow, ReaderError]:
    fields = record.fields
    try:
        annotator, position = int(fields["annotator"]), int(fields["position"])
    except ValueError:
        return _line_error(record, f"annotator {fields['annotator']!r} and position "
                           f"{fields['position']!r} must be integers")
    if not fields["id"]:
        return _line_error(record, "empty id")
    try:
        coordinates = parse_coordinates(fields["answer_coordinates"])
        texts = parse_answer_texts(fields["answer_text"])
        valid = True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        # literal_eval raises all of these on hostile text; the question is still kept.
        coordinates, texts, valid = (), (), False
    return SqaRow(fields["id"], annotator, position, fields["question"], fields["table_file"],
                  coordinates, texts, valid, record.path, record.first_line, record.last_line)


class SqaFile(ReleaseFile):
    """One SQA TSV file, read into interactions with every line accounted for.

    After iterating `interactions()`: `lines_read == header_lines + question_lines + the lines of
    the line errors yielded`, and `questions_read` questions were read (some of them may have been
    yielded as question errors).
    """

    COLUMNS = COLUMNS

    def rows(self) -> Iterator[Union[SqaRow, ReaderError]]:
        """The file's rows in line order, with a ReaderError for each unusable line."""
        for item in self._tsv:
            row = item if isinstance(item, ReaderError) else _parse_row(item)
            if isinstance(row, SqaRow):
                self._count(row)
            yield row

    def interactions(self) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        """One interaction per sequence (in order of first appearance), with errors inline."""
        grouped: Dict[str, List[SqaRow]] = {}
        for row in self.rows():
            if isinstance(row, ReaderError):
                yield row
            else:
                grouped.setdefault(sequence_key(row), []).append(row)
        cache: Dict[str, interaction_pb2.Table] = {}
        for key, rows in grouped.items():
            try:
                yield build_interaction(key, rows, self.input_dir, cache)
            except ReaderError as e:
                yield from _question_errors(key, rows, e)


def _question_errors(key: str, rows: List[SqaRow], error: ReaderError) -> Iterator[ReaderError]:
    """One error per question of a sequence that could not be built, naming its id and lines."""
    for row in sorted(rows, key=lambda r: (r.position, r.first_line)):
        question_id = f"{key}_{row.position}"
        yield ReaderError(error.reason, f"{row.location}: question {question_id}: {error}", path=row.path,
                          first_line=row.first_line, last_line=row.last_line, question_id=question_id)


def read_sqa_rows(tsv_path: str) -> Iterator[Union[SqaRow, ReaderError]]:
    """Yields the rows of an SQA TSV file, or a ReaderError for each unusable line.

    Raises ReaderError up front for a missing file or a header without the SQA columns.
    """
    sqa_file = SqaFile(tsv_path, "")
    sqa_file.check_header()
    return sqa_file.rows()


def sequence_key(row: SqaRow) -> str:
    """The interaction id of the row's sequence: `{id}-{annotator}`."""
    return f"{row.sequence_id}-{row.annotator}"


def build_interaction(key: str, rows: List[SqaRow], input_dir: str,
                      table_cache: Optional[Dict[str, interaction_pb2.Table]] = None
                      ) -> interaction_pb2.Interaction:
    """One interaction from the rows of a sequence (any order).

    Raises ReaderError when the sequence's table cannot be read, its rows name
    different tables, or two rows share a position.
    """
    rows = sorted(rows, key=lambda r: r.position)
    tables = {r.table_file for r in rows}
    if len(tables) != 1:
        raise ReaderError("inconsistent_sequence", f"sequence {key} names several tables: {sorted(tables)}")
    positions = [r.position for r in rows]
    if len(set(positions)) != len(positions):
        raise ReaderError("inconsistent_sequence", f"sequence {key} repeats a position: {positions}")
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
    """All interactions of an SQA TSV file (in order of first appearance), with errors inline.

    For the line accounting, use `SqaFile` directly.
    """
    return SqaFile(tsv_path, input_dir).interactions()
