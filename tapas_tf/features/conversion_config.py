"""Options and failure reasons of interaction -> tf.Example conversion."""

import dataclasses
import enum
from typing import Any, Optional

from tapas_tf.features.vocab import resolve_vocab_file

# Sizes of the seven token-type embedding tables (the original TAPAS release); ids and ranks
# must stay below them.
TYPE_VOCAB_SIZES = (3, 256, 256, 2, 256, 256, 10)
_COLUMN_VOCAB, _ROW_VOCAB, _RANK_VOCAB = TYPE_VOCAB_SIZES[1], TYPE_VOCAB_SIZES[2], TYPE_VOCAB_SIZES[4]


class Reason(enum.Enum):
    """Why a question produced no example. The value is the counter name."""

    EMPTY_TABLE = "empty_table"
    RAGGED_TABLE = "ragged_table"
    TOO_MANY_COLUMNS = "too_many_columns"
    TOO_MANY_ROWS = "too_many_rows"
    QUESTION_TOO_LONG = "question_too_long"
    SEQUENCE_TOO_LONG = "sequence_too_long"
    INVALID_ANSWER = "invalid_answer"
    ANSWER_OUTSIDE_TABLE = "answer_outside_table"
    ANSWER_DROPPED_TO_FIT = "answer_dropped_to_fit"
    QUESTION_ID_TOO_LONG = "question_id_too_long"


class ConversionError(ValueError):
    """A question could not be converted; `reason` is one of `Reason`."""

    def __init__(self, reason: Reason, detail: str):
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclasses.dataclass(frozen=True)
class ConversionConfig:
    """How interactions become classifier examples.

    Build one with `ConversionConfig.from_options`, the one place a ConversionConfig is made: a
    task's data (`task_registry.conversion_config`), a model's table limits for asking and serving
    (`qa.ask_encoding.TableEncoder.for_model`) and the table part of pre-training examples all go
    through it.

    Attributes:
      vocab_file: WordPiece vocabulary with an `[EMPTY]` entry.
      max_seq_length: tokens per example, question and table together.
      max_column_id: a table needs fewer columns than this (ids 1..max_column_id-1).
      max_row_id: a table needs fewer body rows than this (ids 1..max_row_id-1),
        unless `drop_rows_to_fit` drops the trailing ones.
      strip_column_names: encode every header cell as `[EMPTY]`.
      cell_trim_length: if >= 0, the fixed per-cell token cap; otherwise the
        largest cap that fits is chosen per question.
      drop_rows_to_fit: drop trailing rows when one token per cell does not fit
        (or when there are too many rows) instead of failing the question. None
        means "by split", resolved by `for_split` before any conversion: on for
        evaluation splits (every dev and test question is converted), off for
        training (what the command lines default to); a converter refuses None.
      fail_on_dropped_answers: a question whose answer cells were dropped to fit
        fails with ANSWER_DROPPED_TO_FIT (right for training data, where such an
        example would teach a wrong label); otherwise it is kept and counted.
      min_consolidation_fraction: see number_annotation.consolidate_column.
    """

    vocab_file: str
    max_seq_length: int = 512
    max_column_id: int = 32
    max_row_id: int = 64
    strip_column_names: bool = False
    cell_trim_length: int = -1
    drop_rows_to_fit: Optional[bool] = False
    fail_on_dropped_answers: bool = True

    def __post_init__(self):
        if self.max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3, got {self.max_seq_length}")
        if not 1 < self.max_column_id <= _COLUMN_VOCAB:
            raise ValueError(
                f"max_column_id must be in [2, {_COLUMN_VOCAB}] (the column embedding "
                f"vocabulary), got {self.max_column_id}")
        if not 1 < self.max_row_id <= _ROW_VOCAB:
            raise ValueError(
                f"max_row_id must be in [2, {_ROW_VOCAB}] (the row embedding vocabulary), "
                f"got {self.max_row_id}")
        if self.cell_trim_length == 0:
            raise ValueError("cell_trim_length 0 would drop every cell; use -1 for no fixed cap")

    def for_split(self, is_training: bool) -> "ConversionConfig":
        """The options for converting a training or an evaluation split.

        drop_rows_to_fit None becomes `not is_training` (True or False stay as they are), and
        fail_on_dropped_answers is `is_training`: a training example whose answer cells were
        dropped would teach a wrong label, an evaluation question is kept and counted.
        """
        drop = (not is_training) if self.drop_rows_to_fit is None else self.drop_rows_to_fit
        return dataclasses.replace(self, drop_rows_to_fit=drop, fail_on_dropped_answers=is_training)

    @property
    def max_rank(self) -> int:
        """Largest rank the rank embeddings can hold; larger ranks are clamped and counted."""
        return _RANK_VOCAB - 1

    @classmethod
    def from_options(cls, vocab_file: Optional[str] = None, **options: Any) -> "ConversionConfig":
        """The one place a ConversionConfig is built.

        Args:
          vocab_file: the WordPiece vocabulary; None: BERT's uncased one with `[EMPTY]`
            (`features.vocab.resolve_vocab_file`).
          **options: any other field, with its value (None is a value: drop_rows_to_fit None is
            "by split").

        Raises:
          ValueError: an option that is not a field (named, with the fields there are), or a value
            `__post_init__` refuses.
          FileNotFoundError: `vocab_file` does not exist.
        """
        fields = [f.name for f in dataclasses.fields(cls) if f.name != "vocab_file"]
        unknown = sorted(set(options) - set(fields))
        if unknown:
            raise ValueError(f"unknown conversion options {unknown}; the options are {', '.join(fields)}")
        return cls(vocab_file=resolve_vocab_file(vocab_file), **options)
