"""WikiTableQuestions (Pasupat & Liang, 2015): questions with answer texts only.

TSV columns: `id utterance context targetValue`. `context` names
`csv/2xx-csv/N.csv`; the table is read from the `.tsv` file beside it, which
escapes newlines as `\\n`, pipes as `\\p` and backslashes as `\\\\`. Several
answers in `targetValue` are separated by `|` (escaped the same way).

Each question becomes its own interaction with `answer_texts` set and, when
the answer is a single number, `float_value`. Answer coordinates are found
by weak supervision (`tapas_tf.data.answer_matching`), which `WtqFile` applies
when given `supervision="train"` or `"eval"`; by default it is not applied.
"""

import io
import os
from typing import Dict, Iterator, List, Optional, Union

from tapas_tf.data import answer_matching
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, make_table, read_table_bytes, resolve_inside
from tapas_tf.data.readers.tsv import ReleaseFile

COLUMNS = ("id", "utterance", "context", "targetValue")
# Reader error reasons of the questions that weak supervision drops in train mode.
SUPERVISION_DROP_REASONS = {
    answer_matching.DROP_NO_MATCH: "answer_no_match",
    answer_matching.DROP_AMBIGUOUS: "answer_ambiguous",
}


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

    With `supervision` "train" or "eval", answer coordinates are filled by
    `answer_matching.apply_weak_supervision`, and `match_counts` counts the outcomes. In train
    mode a question it drops is yielded as a `ReaderError` ("answer_no_match" or
    "answer_ambiguous") naming its file, line and question id; its lines count as question lines.
    """

    COLUMNS = COLUMNS
    # WTQ escapes tabs and newlines instead of quoting: a `"` is an ordinary character.
    QUOTING = False

    def __init__(self, tsv_path: str, input_dir: str, supervision: Optional[str] = None):
        if supervision is not None and supervision not in answer_matching.MODES:
            raise ValueError(f"supervision must be None or one of {answer_matching.MODES}, "
                             f"got {supervision!r}")
        super().__init__(tsv_path, input_dir)
        self.supervision = supervision
        self.match_counts = answer_matching.MatchCounts()

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
            interaction = _interaction(fields["id"], fields["utterance"], table, fields["targetValue"].split("|"))
            drop = None
            if self.supervision is not None:
                drop = answer_matching.apply_weak_supervision(interaction, self.supervision, self.match_counts)
            yield interaction if drop is None else _drop_error(drop, record, interaction)


def read_wtq_interactions(tsv_path: str, input_dir: str, supervision: Optional[str] = None
                          ) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
    """One interaction per question of a WTQ TSV file, errors inline (see `WtqFile`)."""
    return WtqFile(tsv_path, input_dir, supervision=supervision).interactions()


def _drop_error(drop: str, record, interaction: interaction_pb2.Interaction) -> ReaderError:
    """The ReaderError of a question that weak supervision dropped, naming file, line and id."""
    question = interaction.questions[0]
    answers = " | ".join(repr(t) for t in question.answer.answer_texts) or "(none)"
    problem = ("matches no distinct cells" if drop == answer_matching.DROP_NO_MATCH
               else "matches several cell sets equally well")
    return ReaderError(SUPERVISION_DROP_REASONS[drop],
                       f"{record.location}: question {question.id}: answer {answers} {problem} "
                       f"in table {interaction.table.table_id}", path=record.path,
                       first_line=record.first_line, last_line=record.last_line, question_id=question.id)


def _interaction(question_id: str, utterance: str, table: interaction_pb2.Table,
                 answers: List[str]) -> interaction_pb2.Interaction:
    interaction = interaction_pb2.Interaction(id=question_id)
    interaction.table.CopyFrom(table)
    question = interaction.questions.add(id=f"{question_id}_0", original_text=utterance, text=utterance)
    texts = [unescape(a) for a in answers]
    question.answer.answer_texts.extend(texts)
    number = answer_matching.float_answer(texts)
    if number is not None:
        question.answer.float_value = number
    return interaction
