"""Options, skip reasons and the train/test split of masked-LM pre-training examples.

The defaults are those of the original TAPAS pre-training data (and of the paper): sequences of
128 word pieces, snippets of 8 to 16 pieces, 20 predictions per sequence, 15% of the tokens
masked, 10 snippets (duplicates) per table.
"""

import dataclasses
import enum
import hashlib

from tapas_tf.config_fields import option
from tapas_tf.features.conversion_config import TYPE_VOCAB_SIZES

# Largest column and row id the token-type embeddings can hold (ids start at 1).
MAX_COLUMN_ID = TYPE_VOCAB_SIZES[1] - 1
MAX_ROW_ID = TYPE_VOCAB_SIZES[2] - 1
# [CLS] and [SEP] around the snippet.
NUM_SPECIAL_TOKENS = 2


class SkipReason(enum.Enum):
    """Why a duplicate of a table produced no example. The value is the counter name."""

    # The table has no id (nor has the interaction): its seeds and split would not be stable.
    MISSING_TABLE_ID = "missing_table_id"
    # No question of the interaction has a text with at least one word piece.
    NO_TEXT = "no_text"
    # The table has no columns or no body rows.
    EMPTY_TABLE = "empty_table"
    # A body row has more or fewer cells than the header.
    RAGGED_TABLE = "ragged_table"
    # More columns than the column-id embeddings hold (MAX_COLUMN_ID).
    TOO_MANY_COLUMNS = "too_many_columns"
    # The first word of every column name does not fit beside this duplicate's snippet.
    HEADER_TOO_LONG = "header_too_long"
    # The header fits beside the snippet, but not with the first words of any single body row.
    NO_ROW_FITS = "no_row_fits"


@dataclasses.dataclass(frozen=True)
class PretrainSkip:
    """A duplicate of a table that made no example: `reason` is the counter, `message` the why.

    A problem of the whole interaction (no text, an empty table, ...) costs every duplicate,
    so `make` always yields `dupe_factor` results per interaction and the job's counts add up:
    examples + skips == dupe_factor * interactions.
    """

    reason: SkipReason
    message: str
    table_id: str = ""
    duplicate_index: int = 0


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """How interactions become masked-LM pre-training examples.

    Attributes:
      vocab_file: WordPiece vocabulary with an `[EMPTY]` entry (TAPAS's BERT vocabulary).
      max_seq_length: tokens per example: `[CLS] snippet [SEP]` and the table.
      max_predictions_per_seq: masked positions per example at most; the masked_lm_* features
        have this length.
      masked_lm_prob: fraction of the real tokens (with [CLS] and [SEP], as in BERT) to mask:
        max(1, round(masked_lm_prob * tokens)) pieces, capped by max_predictions_per_seq.
      min_snippet_pieces, max_snippet_pieces: a snippet is a span of whole words of one text of
        the interaction with this many word pieces. Texts with at least `min_snippet_pieces`
        pieces are preferred; a shorter text is used whole only when no text is long enough.
      dupe_factor: examples (snippets, maskings, row blocks) made from each table.
      random_seed: part of every example's seed, with the table id and the duplicate index.
      always_continue_cells: mask whole cells in the table (all pieces of a cell together), as
        TAPAS does; False masks whole words inside cells instead.
      test_fraction: fraction of the tables (by a stable hash of the table id, see `split_of`)
        whose examples go to the test split.
    """

    # The help texts are those of the command line's flags (`tapas-tf create-pretrain-data`).
    vocab_file: str = option(None, "WordPiece vocabulary with [EMPTY]; default BERT's.")
    max_seq_length: int = option(128, "Tokens per example: [CLS] snippet [SEP] and the table.")
    max_predictions_per_seq: int = option(20, "Masked positions per example at most.")
    masked_lm_prob: float = option(0.15, "Fraction of the real tokens to mask.")
    min_snippet_pieces: int = option(8, "Word pieces of a snippet at least (a shorter text is used whole only "
                                         "when no text is long enough).")
    max_snippet_pieces: int = option(16, "Word pieces of a snippet at most.")
    dupe_factor: int = option(10, "Examples (snippets, maskings, row blocks) made from each table.")
    random_seed: int = option(12345, "Part of every example's seed, with the table id and the duplicate index.")
    always_continue_cells: bool = option(True, "Mask whole cells of the table (all pieces of a cell together), "
                                                "as TAPAS does; false masks whole words inside cells.")
    test_fraction: float = option(0.01, "Fraction of the tables (by a stable hash of the table id) whose "
                                         "examples go to the test split.")

    def __post_init__(self):
        if not self.vocab_file:
            raise ValueError("a vocabulary file is required (vocab_file)")
        if not 1 <= self.min_snippet_pieces <= self.max_snippet_pieces:
            raise ValueError(
                f"need 1 <= min_snippet_pieces <= max_snippet_pieces, got "
                f"{self.min_snippet_pieces} and {self.max_snippet_pieces}")
        # The snippet, [CLS], [SEP] and at least one table token.
        if self.max_seq_length < self.max_snippet_pieces + NUM_SPECIAL_TOKENS + 1:
            raise ValueError(
                f"max_seq_length {self.max_seq_length} leaves no room for a table after a snippet "
                f"of {self.max_snippet_pieces} pieces, [CLS] and [SEP]")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
        if not 0.0 < self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
        if not 0.0 <= self.test_fraction <= 1.0:
            raise ValueError(f"test_fraction must be in [0, 1], got {self.test_fraction}")
        if not isinstance(self.always_continue_cells, bool):
            raise TypeError(f"always_continue_cells must be a bool, got {self.always_continue_cells!r}")
        if not isinstance(self.random_seed, int) or isinstance(self.random_seed, bool):
            raise TypeError(f"random_seed must be an int, got {self.random_seed!r}")


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def example_seed(table_id: str, duplicate_index: int, random_seed: int) -> int:
    """The seed of one example: a SHA-256 fingerprint, the same in every process and runner."""
    return _hash64(f"pretrain\t{table_id}\t{duplicate_index}\t{random_seed}")


def split_of(table_id: str, test_fraction: float) -> str:
    """"train" or "test" for a table, by a stable hash of its id (independent of the seed).

    Every duplicate of a table lands in the same split, so no test table is seen in training.
    """
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"test_fraction must be in [0, 1], got {test_fraction}")
    return "test" if _hash64(f"split\t{table_id}") < test_fraction * 2.0**64 else "train"
