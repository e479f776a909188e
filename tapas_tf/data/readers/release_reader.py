"""The one interface through which the create_data job reads a task's release.

A task registers an opener (`tapas_tf.task_registry.TaskSpec.reader`):

    open_reader(path, input_dir, is_training) -> ReleaseReader

`path` is one split's file (`input_dir/Split.file_name`), `input_dir` the release folder that
relative table paths resolve in, and `is_training` whether the split trains (WTQ matches answers
to cells differently for training and evaluation). The job calls `check_header()` on every split
before it starts, then iterates `interactions()` once and reads the counts, which account for
every line (docs/DATA_CONTRACT.md):

    lines_read + table_lines_read == header_lines + question_lines + table_lines_used
                                     + the lines of the line errors yielded

and `questions_read` questions were read, some of them yielded as question errors (a
`ReaderError` with `question_id` set: read, but unusable). For a TSV release, subclass
`tapas_tf.data.readers.tsv.ReleaseFile`, which keeps these counts: set `COLUMNS`, iterate
`self._tsv` in `interactions()` and call `self._count(record)` for each question read (the SQA
and WTQ readers do). WikiSQL's `wikisql.WikiSqlFile` is a reader of JSON lines with a tables
file of its own.
"""

from typing import TYPE_CHECKING, Callable, Dict, Iterator, Protocol, Union

if TYPE_CHECKING:  # Only named: the task registry imports this module, and `--help` need not load protobuf.
    from tapas_tf.data.protos import interaction_pb2
    from tapas_tf.data.readers.common import ReaderError


class ReleaseReader(Protocol):
    """One split's release file(s), read into interactions with every line accounted for."""

    lines_read: int  # Physical lines of the split's file.
    header_lines: int
    question_lines: int  # Lines that became questions (including questions yielded as errors).
    questions_read: int
    table_lines_read: int  # Lines of a separate tables file (WikiSQL's); 0 for CSV tables.
    table_lines_used: int

    def check_header(self) -> None:
        """Raises ReaderError naming the file and what is wrong (missing, no required column)."""

    def interactions(self) -> Iterator[Union["interaction_pb2.Interaction", "ReaderError"]]:
        """The interactions in file order, with a ReaderError in place of each unusable line or question."""

    def reader_counts(self) -> Dict[str, int]:
        """Counts of the reader's own, reported as `reader_<name>` (may be empty)."""


# (path of the split's file, input_dir, is_training) -> its reader.
OpenReader = Callable[[str, str, bool], ReleaseReader]
