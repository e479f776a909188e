"""Apache Beam transforms of the data jobs.

Each stage is a named PTransform; the per-element work is a plain function of
another module (readers, number_annotation, classifier_examples), tested
without Beam. Every record that is skipped is counted under its reason in the
`tapas_tf` counter namespace and sent, with its message, to a `failed` output.
"""

import copy
from typing import Iterator, Tuple

import apache_beam as beam
from apache_beam import pvalue

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers import sqa
from tapas_tf.data.readers.common import ReaderError
from tapas_tf.features.classifier_examples import ExampleConverter
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError

COUNTER_NAMESPACE = "tapas_tf"
FAILED = "failed"

# A failure record: (where: question id or file:line, reason, message).
Failure = Tuple[str, str, str]


def counter(name: str) -> beam.metrics.metric.Metrics.DelegatingCounter:
    return beam.metrics.Metrics.counter(COUNTER_NAMESPACE, name)


class _ReadSqaFn(beam.DoFn):
    """TSV path -> interactions, with unreadable lines and sequences as failures."""

    def __init__(self, input_dir: str):
        self._input_dir = input_dir
        self._interactions = counter("interactions_read")
        self._questions = counter("questions_read")

    def process(self, tsv_path: str) -> Iterator:
        for item in sqa.read_sqa_interactions(tsv_path, self._input_dir):
            if isinstance(item, ReaderError):
                counter(f"skipped_{item.reason}").inc()
                yield pvalue.TaggedOutput(FAILED, (tsv_path, item.reason, str(item)))
            else:
                self._interactions.inc()
                self._questions.inc(len(item.questions))
                yield item


class ReadSqaInteractions(beam.PTransform):
    """Reads one SQA TSV file (relative table paths resolved in `input_dir`).

    Output: a DoOutputsTuple with the main output of Interactions and `failed`.
    """

    def __init__(self, tsv_path: str, input_dir: str):
        super().__init__()
        self._tsv_path = tsv_path
        self._input_dir = input_dir

    def expand(self, root):
        return (root
                | "TsvPath" >> beam.Create([self._tsv_path])
                | "ReadTsv" >> beam.ParDo(_ReadSqaFn(self._input_dir)).with_outputs(FAILED, main="interactions"))


def annotate_interaction(interaction: interaction_pb2.Interaction) -> interaction_pb2.Interaction:
    """A copy of the interaction with numbers and dates of the table and questions annotated."""
    annotated = copy.deepcopy(interaction)
    number_annotation.add_numeric_values(annotated)
    return annotated


class _AnnotateFn(beam.DoFn):
    def process(self, interaction):
        try:
            yield annotate_interaction(interaction)
        except ValueError as e:
            counter("skipped_annotation_error").inc()
            yield pvalue.TaggedOutput(FAILED, (interaction.id, "annotation_error", str(e)))


class AnnotateNumbers(beam.PTransform):
    """Interactions -> interactions with numeric values (plus `failed`)."""

    def expand(self, interactions):
        return interactions | "Annotate" >> beam.ParDo(_AnnotateFn()).with_outputs(FAILED, main="interactions")


class _ToExamplesFn(beam.DoFn):
    """Interaction -> serialised tf.Examples, one per convertible question."""

    def __init__(self, config: ConversionConfig):
        self._config = config
        self._converter = None
        self._written = counter("examples_written")

    def setup(self):
        # Loading the vocabulary once per worker, not once per element.
        self._converter = ExampleConverter(self._config)

    def process(self, interaction) -> Iterator:
        from tapas_tf.features.example_features import to_tf_example

        for index, result in self._converter.convert_interaction(interaction):
            if isinstance(result, ConversionError):
                counter(f"dropped_{result.reason.value}").inc()
                question_id = interaction.questions[index].id
                yield pvalue.TaggedOutput(FAILED, (question_id, result.reason.value, str(result)))
                continue
            for name, value in result.stats.items():
                if value:
                    counter(f"limit_{name}").inc(value)
                    counter(f"examples_with_{name}").inc()
            self._written.inc()
            yield to_tf_example(result.features).SerializeToString()


class ToClassifierExamples(beam.PTransform):
    """Annotated interactions -> serialised classifier tf.Examples (plus `failed`)."""

    def __init__(self, config: ConversionConfig):
        super().__init__()
        self._config = config

    def expand(self, interactions):
        return interactions | "Convert" >> beam.ParDo(_ToExamplesFn(self._config)).with_outputs(
            FAILED, main="examples")


def format_failure(failure: Failure) -> str:
    where, reason, message = failure
    return "\t".join(s.replace("\t", " ").replace("\n", " ") for s in (where, reason, message))
