"""WikiTableQuestions (Pasupat & Liang, 2015): questions with answer texts only.

TSV columns: `id utterance context targetValue`. `context` names
`csv/2xx-csv/N.csv`; the table is read from the `.tsv` file beside it, which
escapes newlines as `\\n`, pipes as `\\p` and backslashes as `\\\\`. Several
answers in `targetValue` are separated by `|` (escaped the same way).

Each question becomes its own interaction with `answer_texts` set and, when
the answer is a single number, `float_value`. Answer coordinates are found
later, by weak supervision (not part of this reader).
"""

import csv
import os
from typing import Dict, Iterator, List, Union

from tapas_tf.data.number_parsing import parse_plain_number
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, make_table, resolve_inside

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
        with open(path, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
    except FileNotFoundError:
        raise ReaderError("missing_table", f"{path}: table file not found") from None
    except UnicodeDecodeError as e:
        raise ReaderError("table_not_utf8", f"{path}: byte {e.start} is not valid UTF-8") from None
    if len(rows) < 2:
        raise ReaderError("empty_table", f"{path}: table has no header or no rows")
    for line_number, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            raise ReaderError("ragged_table", f"{path}:{line_number}: row has {len(row)} cells, "
                              f"the header has {len(rows[0])}")
    return make_table(context, [unescape(c) for c in rows[0]],
                      [[unescape(c) for c in row] for row in rows[1:]])


def read_wtq_interactions(tsv_path: str, input_dir: str
                          ) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
    """One interaction per question of a WTQ TSV file, errors inline."""
    tables: Dict[str, Union[interaction_pb2.Table, ReaderError]] = {}
    with open(tsv_path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            raise ReaderError("bad_header", f"{tsv_path}:1: header {header} is not {list(COLUMNS)}")
        for fields in reader:
            location = f"{tsv_path}:{reader.line_num}"
            if len(fields) != len(COLUMNS):
                yield ReaderError("malformed_line", f"{location}: expected 4 fields, found {len(fields)}")
                continue
            question_id, utterance, context, target = fields
            if context not in tables:
                try:
                    tables[context] = read_wtq_table(input_dir, context)
                except ReaderError as e:
                    tables[context] = e
            table = tables[context]
            if isinstance(table, ReaderError):
                yield ReaderError(table.reason, f"{location}: {table}")
                continue
            yield _interaction(question_id, utterance, table, target.split("|"))


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
