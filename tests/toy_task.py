"""A task of a user's own, in one module: what docs/ADDING_A_TASK.md shows, used by its tests.

    python run_task.py --task_module=tests/toy_task.py --task=TOY --mode=create_data ...

The release: `train.tsv`, `dev.tsv` (and optionally `test.tsv`) with the columns `id`,
`question`, `table_file` (a CSV file in the release folder, its first row the header) and
`answer_cell` ("row,column" of the answer's body cell, from 0).
"""

from typing import Iterator, Union

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import ReaderError, read_csv_table, resolve_inside
from tapas_tf.data.readers.tsv import ReleaseFile, TsvRecord
from tapas_tf.task_registry import TaskSpec, register
from tapas_tf.task_registry.presets import Split, TaskPreset


class ToyFile(ReleaseFile):
    """One split's TSV file; `ReleaseFile` counts its lines, the job counts what it yields."""

    COLUMNS = ("id", "question", "table_file", "answer_cell")

    def interactions(self) -> Iterator[Union[interaction_pb2.Interaction, ReaderError]]:
        for record in self._tsv:
            if isinstance(record, ReaderError):  # A line that is no record: counted, and skipped.
                yield record
                continue
            self._count(record)
            try:
                yield _interaction(record, self.input_dir)
            except ReaderError as e:  # A question read but unusable: counted by its reason.
                yield ReaderError(e.reason, f"{record.location}: {e}", path=record.path,
                                  first_line=record.first_line, last_line=record.last_line,
                                  question_id=f"{record.fields['id']}_0")


def _interaction(record: TsvRecord, input_dir: str) -> interaction_pb2.Interaction:
    fields = record.fields
    table = read_csv_table(resolve_inside(input_dir, fields["table_file"], "table"), fields["table_file"])
    row, _, column = fields["answer_cell"].partition(",")
    if not (row.strip().isdigit() and column.strip().isdigit()
            and int(row) < len(table.rows) and int(column) < len(table.columns)):
        raise ReaderError("bad_answer_cell", f"answer_cell {fields['answer_cell']!r} is not 'row,column' "
                          f"of a body cell of the {len(table.rows)}x{len(table.columns)} table")
    interaction = interaction_pb2.Interaction(id=fields["id"])
    interaction.table.CopyFrom(table)
    question = interaction.questions.add(id=f"{fields['id']}_0", original_text=fields["question"],
                                         text=fields["question"])
    question.answer.is_valid = True
    question.answer.answer_coordinates.add(row_index=int(row), column_index=int(column))
    question.answer.answer_texts.append(table.rows[int(row)].cells[int(column)].text)
    return interaction


def open_toy(path: str, input_dir: str, is_training: bool) -> ToyFile:
    del is_training  # The answers are cells in every split.
    return ToyFile(path, input_dir)


TOY = register(TaskSpec(
    name="TOY",
    preset=TaskPreset(
        splits=(Split("train", "train.tsv", is_training=True), Split("dev", "dev.tsv", is_training=False),
                Split("test", "test.tsv", is_training=False, required=False)),
        train_steps=1000, learning_rate=5e-5, warmup_ratio=0.1, train_batch_size=32, temperature=0.5,
        max_seq_length=64),
    reader=open_toy,
    evaluation="denotation",
    conversion={"max_row_id": 16},
))
