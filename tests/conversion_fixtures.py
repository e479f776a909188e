"""Small interactions and converters shared by the conversion tests."""

import os
from typing import Sequence

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import make_table
from tapas_tf.features.classifier_examples import ExampleConverter
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.features.tokenization import TapasTokenizer
from tests.vocab_fixture import write_test_vocab


def make_interaction(header: Sequence[str], rows: Sequence[Sequence[str]],
                     questions: Sequence[tuple], table_id: str = "t") -> interaction_pb2.Interaction:
    """questions: (text, answer coordinates[, aggregation, float answer]) tuples; annotated."""
    interaction = interaction_pb2.Interaction(id="i")
    interaction.table.CopyFrom(make_table(table_id, list(header), [list(r) for r in rows]))
    for index, (text, coordinates, *rest) in enumerate(questions):
        question = interaction.questions.add(id=f"i_{index}", original_text=text)
        for r, c in coordinates:
            question.answer.answer_coordinates.add(row_index=r, column_index=c)
        if rest:
            question.answer.aggregation_function = rest[0]
        if len(rest) > 1:
            question.answer.float_value = rest[1]
    number_annotation.add_numeric_values(interaction)
    return interaction


def make_converter(tmp_path, extra_words: Sequence[str] = (), **config) -> ExampleConverter:
    vocab = write_test_vocab(os.path.join(tmp_path, "vocab.txt"), extra_words)
    return ExampleConverter(ConversionConfig(vocab_file=vocab, **config), TapasTokenizer(vocab))
