"""WikiTableQuestions (Pasupat & Liang, 2015): questions with answer texts only.

TSV columns: `id utterance context targetValue`. `context` names
`csv/2xx-csv/N.csv`; the table is read from the `.tsv` file beside it, which
escapes newlines as `\\n`, pipes as `\\p` and backslashes as `\\\\`. Several
answers in `targetValue` are separated by `|` (escaped the same way).

Each question becomes its own interaction with `answer_texts` set and, when
the answer is a single number, `float_value`. Answer coordinates are found
later, by weak supervision (not part of this reader).
"""

import io
import os
from typing import Dict, Iterator, List, Union

from tapas_tf.data.number_parsing import parse_plain_number
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, make_table, read_table_bytes, resolve_inside
from tapas_tf.data.readers.tsv import ReleaseFile

COLUMNS = ("id", "utterance", "context", "targetValue")


def unescape(text: str) -> str:
    """Undoes the WTQ `.tsv` escapes `\\n`, `\\p` and `\\\\`."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append({"n": "\n", "p": "|", "\\": "\\"}.get(text[i + 1], text[i:i + 2]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def read_wtq_table(input_dir: str, context: str) -> interaction_pb2.Table:
    """The table of a `context` path (`csv/2xx-csv/N.csv`), read from its `.tsv` twin."""
    stem, _ = os.path.splitext(context)
    path = resolve_inside(input_dir, stem + ".tsv", "table")
    try:
        text = read_table_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReaderError("table_not_utf8", f"{path}: byte {e.start} is not valid UTF-8") from None
    # Universal newlines, as the release's tools read it.
    rows = [line.rstrip("\n").split("\t") for line in io.StringIO(text, newline=None)]
    if len(rows) < 2:
        raise ReaderError("empty_table", f"{path}: table has no header or no rows")
    for line_number, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            raise ReaderError("ragged_table", f"{path}:{line_number}: row has {len(row)} cells, "
                              f"the header has {len(rows[0])}")
    return make_table(context, [unescape(c) for c in rows[0]],
                      [[unescape(c) for c in row] for row in rows[1:]])


class WtqFile(ReleaseFile):
    """One WTQ TSV file, read into one interaction per question, with every line accounted for.

    The same accounting as `sqa.SqaFile`: after iterating `interactions()`,
    `lines_read == header_lines + question_lines + the lines of the line errors yielded`.
    """

    COLUMNS = COLUMNS
    # WTQ escapes tabs and newlines instead of quoting: a `"` is an ordinary character.
    QUOTING = False

    def interactions(self) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        tables: Dict[str, Union[interaction_pb2.Table, ReaderError]] = {}
        for record in self._tsv:
            if isinstance(record, ReaderError):
                yield record
                continue
            fields = record.fields
            self._count(record)
            context = fields["context"]
            if context not in tables:
                try:
                    tables[context] = read_wtq_table(self.input_dir, context)
                except ReaderError as e:
                    tables[context] = e
            table = tables[context]
            if isinstance(table, ReaderError):
                question_id = f"{fields['id']}_0"
                yield ReaderError(table.reason, f"{record.location}: question {question_id}: {table}",
                                  path=record.path, first_line=record.first_line, last_line=record.last_line,
                                  question_id=question_id)
                continue
            yield _interaction(fields["id"], fields["utterance"], table, fields["targetValue"].split("|"))


def read_wtq_interactions(tsv_path: str, input_dir: str
                          ) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
    """One interaction per question of a WTQ TSV file, errors inline (see `WtqFile`)."""
    return WtqFile(tsv_path, input_dir).interactions()


def _interaction(question_id: str, utterance: str, table: interaction_pb2.Table,
                 answers: List[str]) -> interaction_pb2.Interaction:
    interaction = interaction_pb2.Interaction(id=question_id)
    interaction.table.CopyFrom(table)
    question = interaction.questions.add(id=f"{question_id}_0", original_text=utterance, text=utterance)
    texts = [unescape(a) for a in answers]
    question.answer.answer_texts.extend(texts)
    if len(texts) == 1:
        number = parse_plain_number(texts[0])
        if number is not None:
            question.answer.float_value = number
    return interaction
