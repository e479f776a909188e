"""Beam transforms of the create_data job: release files -> interactions -> classifier examples.

Each stage is a named PTransform; the per-element work is a plain function of another module
(readers, number_annotation, classifier_examples), tested without Beam. Every input line and
every question is counted in the `tapas_tf` counter namespace (docs/DATA_CONTRACT.md):

- `lines_read`, `lines_header`, `lines_in_questions`, `lines_skipped_<reason>`: physical lines;
- `questions_read`, `examples_written`, `skipped_<reason>` (read but unusable: its table is
  missing, say), `dropped_<reason>` (failed conversion): questions.

Whatever is skipped goes, with its file, lines, question id, reason and message, to a `failed`
output. No single input stops the job: an unexpected exception on one element is counted as
`unexpected_error` and the job goes on.
"""

import copy
import logging
from typing import Callable, Dict, Iterator, NamedTuple

import apache_beam as beam
from apache_beam import pvalue

from tapas_tf.data import number_annotation
from tapas_tf.data.interaction_io import InteractionFileError
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers import sqa
from tapas_tf.data.readers.common import ReaderError
from tapas_tf.data.readers.release_reader import ReleaseReader
from tapas_tf.features.classifier_examples import ExampleConverter
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError

COUNTER_NAMESPACE = "tapas_tf"
FAILED = "failed"
UNEXPECTED = "unexpected_error"
FAILURE_COLUMNS = ("file", "lines", "question_id", "reason", "message")

# (path, input_dir) -> a reader: a task's opener (`TaskSpec.reader`) with the split's is_training
# bound, or a reader class such as `sqa.SqaFile`.
ReleaseFile = Callable[[str, str], ReleaseReader]


class Failure(NamedTuple):
    """One row of the failures file. `lines` ("7" or "7-9") and `question_id` may be empty."""

    file: str
    lines: str
    question_id: str
    reason: str
    message: str


def counter(name: str) -> beam.metrics.metric.Metrics.DelegatingCounter:
    return beam.metrics.Metrics.counter(COUNTER_NAMESPACE, name)


def reader_failure(error: ReaderError, file: str) -> Failure:
    return Failure(error.path or file, error.lines, error.question_id or "", error.reason, str(error))


class _ReadFileFn(beam.DoFn):
    """Release file path -> interactions; every line (of a WikiSQL split, its tables file's too)
    is counted and every unusable one is a failure."""

    def __init__(self, input_dir: str, release_file: ReleaseFile):
        self._input_dir = input_dir
        self._release_file = release_file

    def process(self, tsv_path: str) -> Iterator:
        reader = self._release_file(tsv_path, self._input_dir)
        try:
            for item in reader.interactions():
                if isinstance(item, ReaderError):
                    yield pvalue.TaggedOutput(FAILED, reader_failure(item, tsv_path))
                    if item.question_id:
                        counter(f"skipped_{item.reason}").inc()
                    else:
                        counter(f"lines_skipped_{item.reason}").inc(item.num_lines)
                else:
                    counter("interactions_read").inc()
                    yield item
        except (InteractionFileError, ReaderError) as e:
            # The file cannot be read to its end (truncated, not valid JSON, ...): what came before is
            # kept, and the report's `files_failed` makes the job's command fail.
            reason = getattr(e, "reason", "unreadable_file")
            logging.warning("%s", e)
            counter(f"files_failed_{reason}").inc()
            yield pvalue.TaggedOutput(FAILED, Failure(getattr(e, "path", None) or tsv_path, "", "", reason, str(e)))
        except Exception as e:  # pylint: disable=broad-except
            # A reader bug must not stop the other files; the report shows the file as unaccounted.
            logging.exception("Reading %s failed", tsv_path)
            counter(f"read_{UNEXPECTED}").inc()
            yield pvalue.TaggedOutput(FAILED, Failure(tsv_path, "", "", UNEXPECTED, f"{type(e).__name__}: {e}"))
        counter("lines_read").inc(reader.lines_read + reader.table_lines_read)
        counter("lines_header").inc(reader.header_lines)
        counter("lines_in_questions").inc(reader.question_lines)
        counter("lines_in_tables").inc(reader.table_lines_used)
        for name, value in reader.reader_counts().items():
            counter(f"reader_{name}").inc(value)
        counter("questions_read").inc(reader.questions_read)


class ReadReleaseFile(beam.PTransform):
    """Reads one release TSV file (relative table paths resolved in `input_dir`).

    Args:
      tsv_path: the file.
      input_dir: the release folder that table paths are relative to.
      release_file: opens the file's reader (`ReleaseFile`; `tapas_tf.data.readers.release_reader`).

    Output: a DoOutputsTuple with the main output `interactions` and `failed`.
    """

    def __init__(self, tsv_path: str, input_dir: str, release_file: ReleaseFile = sqa.SqaFile):
        super().__init__()
        self._tsv_path = tsv_path
        self._input_dir = input_dir
        self._release_file = release_file

    def expand(self, root):
        return (root
                | "TsvPath" >> beam.Create([self._tsv_path])
                | "ReadTsv" >> beam.ParDo(_ReadFileFn(self._input_dir, self._release_file)).with_outputs(
                    FAILED, main="interactions"))


def progress_counts(interaction: interaction_pb2.Interaction) -> Dict[str, int]:
    """What one interaction adds to the job's progress (`progress.CountItems`): its questions, itself."""
    return {"questions": len(interaction.questions), "interactions": 1}


PROGRESS_UNITS = ("questions", "interactions")


def annotate_interaction(interaction: interaction_pb2.Interaction) -> interaction_pb2.Interaction:
    """A copy of the interaction with numbers and dates of the table and questions annotated."""
    annotated = copy.deepcopy(interaction)
    number_annotation.add_numeric_values(annotated)
    return annotated


def _question_failures(interaction: interaction_pb2.Interaction, file: str, reason: str,
                       message: str) -> Iterator[Failure]:
    for question in interaction.questions:
        yield Failure(file, "", question.id, reason, message)


class _AnnotateFn(beam.DoFn):
    def __init__(self, source: str):
        self._source = source

    def process(self, interaction):
        try:
            yield annotate_interaction(interaction)
        except Exception as e:  # pylint: disable=broad-except
            reason = "annotation_error" if isinstance(e, ValueError) else UNEXPECTED
            counter(f"skipped_{reason}").inc(len(interaction.questions))
            for failure in _question_failures(interaction, self._source, reason, f"{interaction.id}: {e}"):
                yield pvalue.TaggedOutput(FAILED, failure)


class AnnotateNumbers(beam.PTransform):
    """Interactions -> interactions with numeric values (plus `failed`, one row per question)."""

    def __init__(self, source: str = ""):
        super().__init__()
        self._source = source

    def expand(self, interactions):
        return interactions | "Annotate" >> beam.ParDo(_AnnotateFn(self._source)).with_outputs(
            FAILED, main="interactions")


class _ToExamplesFn(beam.DoFn):
    """Interaction -> serialised tf.Examples, one per convertible question."""

    def __init__(self, config: ConversionConfig, source: str):
        self._config = config
        self._source = source
        self._converter = None
        self._written = counter("examples_written")

    def setup(self):
        # Loading the vocabulary once per worker, not once per element.
        self._converter = ExampleConverter(self._config)

    def process(self, interaction) -> Iterator:
        from tapas_tf.features.example_features import to_tf_example

        for index, question in enumerate(interaction.questions):
            try:
                result = self._converter.convert(interaction, index)
                serialized = to_tf_example(result.features).SerializeToString()
            except Exception as e:  # pylint: disable=broad-except
                reason = e.reason.value if isinstance(e, ConversionError) else UNEXPECTED
                if reason == UNEXPECTED:
                    logging.exception("Converting %s failed", question.id)
                counter(f"dropped_{reason}").inc()
                yield pvalue.TaggedOutput(FAILED, Failure(self._source, "", question.id, reason, str(e)))
                continue
            for name, value in result.stats.items():
                if value:
                    counter(f"limit_{name}").inc(value)
                    counter(f"examples_with_{name}").inc()
            self._written.inc()
            yield serialized


class ToClassifierExamples(beam.PTransform):
    """Annotated interactions -> serialised classifier tf.Examples (plus `failed`).

    `source` names the release file in failure rows.
    """

    def __init__(self, config: ConversionConfig, source: str = ""):
        super().__init__()
        self._config = config
        self._source = source

    def expand(self, interactions):
        return interactions | "Convert" >> beam.ParDo(_ToExamplesFn(self._config, self._source)).with_outputs(
            FAILED, main="examples")


def format_failure(failure: Failure) -> str:
    """One line of the failures TSV (`FAILURE_COLUMNS`); tabs and newlines become spaces."""
    return "\t".join(str(s).replace("\t", " ").replace("\r", " ").replace("\n", " ") for s in failure)
