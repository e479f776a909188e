"""Tables in, synthetic questions out: the reader of the SYNTHETIC task.

A split's file is an interactions file (`.tfrecord`, or text format: `data.interaction_io`) whose
tables are used; its questions are ignored. Any interactions file will do: a task's
`interactions/train.tfrecord` from create_data, or the tables that the Wikipedia job extracted.
Each distinct table (by table id) gets up to `questions_per_table` conversations from
`data.synthetic_questions`, each its own interaction, with gold cells and operator.

Every record is accounted for (docs/DATA_CONTRACT.md): a record whose table is used counts as a
question line; a record that repeats a table already used (a task's interactions file has one
record per question) is a line error "duplicate_table", and a table on which no question can be
made (no named column, one row, ...) is a line error "no_synthetic_question". Both go to the
failures file with their record number.
"""

import hashlib
import random
from typing import Dict, Iterator, Union

from tapas_tf.data import interaction_io, synthetic_questions
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError

QUESTIONS_PER_TABLE = 40
RANDOM_SEED = 1
# Table ids longer than this (the Wikipedia job's are page addresses) are replaced by a hash in
# the interaction and question ids, which the examples carry in a fixed-size feature (the table
# keeps its id).
MAX_ID_CHARS = 40


def interaction_id(table_key: str, index: int) -> str:
    """"csv/203-csv/1.csv-synthetic-3", or "synthetic-<16 hex digits>-3" for a long table id."""
    if len(table_key) > MAX_ID_CHARS:
        return f"synthetic-{hashlib.sha256(table_key.encode('utf-8')).hexdigest()[:16]}-{index}"
    return f"{table_key}-synthetic-{index}"


class TablesFile:
    """One interactions file read as tables, each turned into synthetic questions."""

    header_lines = 0
    table_lines_read = 0
    table_lines_used = 0

    def __init__(self, path: str, input_dir: str = "", questions_per_table: int = QUESTIONS_PER_TABLE,
                 random_seed: int = RANDOM_SEED):
        if questions_per_table < 1:
            raise ValueError(f"questions_per_table must be at least 1, got {questions_per_table}")
        self.path = path
        self.input_dir = input_dir
        self.questions_per_table = questions_per_table
        self.random_seed = random_seed
        self.lines_read = 0
        self.question_lines = 0
        self.questions_read = 0
        self._kinds: Dict[str, int] = {}

    def check_header(self) -> None:
        """Raises ReaderError when the file is missing or not an interactions file."""
        try:
            interaction_io.check_known_suffix(self.path)
        except ValueError as e:
            raise ReaderError("bad_file", str(e), path=self.path) from e
        try:
            with open(self.path, "rb"):
                pass
        except OSError as e:
            raise ReaderError("missing_file", f"{self.path}: {e.strerror}", path=self.path) from e

    def reader_counts(self) -> Dict[str, int]:
        """Questions made, by kind (`synthetic_questions.KINDS`), as `reader_kind_<kind>`."""
        return {f"kind_{kind}": count for kind, count in sorted(self._kinds.items())}

    def interactions(self) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        seen: Dict[str, int] = {}
        for record_number, source in enumerate(interaction_io.read_interactions(self.path), start=1):
            self.lines_read += 1
            table = source.table
            key = table.table_id or source.id
            if key in seen:
                yield ReaderError("duplicate_table", f"{self.path}: record {record_number}: table {key!r} "
                                  f"was used at record {seen[key]}", path=self.path, first_line=record_number)
                continue
            seen[key] = record_number
            rng = random.Random(synthetic_questions.seed_of(key, self.random_seed))
            conversations = synthetic_questions.synthesize(table, rng, self.questions_per_table)
            if not conversations:
                yield ReaderError("no_synthetic_question", f"{self.path}: record {record_number}: no question "
                                  f"can be made on table {key!r} ({len(table.rows)} rows, {len(table.columns)} "
                                  "columns, none both named and usable)", path=self.path, first_line=record_number)
                continue
            self.question_lines += 1
            for index, conversation in enumerate(conversations):
                self.questions_read += len(conversation)
                for question in conversation:
                    self._kinds[question.kind] = self._kinds.get(question.kind, 0) + 1
                yield synthetic_questions.to_interaction(table, conversation, interaction_id(key, index))
