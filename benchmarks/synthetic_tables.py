"""Random TAPAS features shaped like real fine-tuning examples, for speed benchmarks.

NumPy only, so that the PyTorch peer benchmark and a TensorFlow benchmark can build the very
same batches from the same seed.

Each example is `[CLS] question [SEP]`, a header row and `num_rows` body rows of `num_columns`
cells (1 to 6 word pieces each, a few `[EMPTY]`), truncated to `seq_len` if it overflows and
padded otherwise. Two columns are numeric (values, ranks, relations). Half of the examples have a
scalar answer (half of those also label cells: the ambiguous case), the others label one to
three cells of one column; one in eight has no answer at all.
"""

from __future__ import annotations

import numpy as np

EMPTY_ID, CLS_ID, SEP_ID = 1, 101, 102
FIRST_WORD_ID = 1000
NUMERIC_COLUMNS = (2, 5)

INT_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "column_ids",
    "row_ids",
    "prev_label_ids",
    "column_ranks",
    "inv_column_ranks",
    "numeric_relations",
    "label_ids",
)


def _empty_example(seq_len: int) -> dict[str, np.ndarray]:
    example = {name: np.zeros([seq_len], np.int32) for name in INT_FEATURES}
    example["numeric_values"] = np.full([seq_len], np.nan, np.float32)
    example["numeric_values_scale"] = np.ones([seq_len], np.float32)
    return example


def _draw_labels(rng: np.random.Generator, num_rows: int, num_columns: int) -> set[tuple[int, int]]:
    column = int(rng.integers(1, num_columns + 1))
    rows = rng.choice(np.arange(1, num_rows + 1), size=int(rng.integers(1, 4)), replace=False)
    return {(int(row), column) for row in rows}


def make_example(
    rng: np.random.Generator, seq_len: int, num_rows: int, num_columns: int, vocab_size: int
) -> dict[str, np.ndarray]:
    """One example: `<int32>[seq_len]` / `<float32>[seq_len]` features, scalar `answer` and
    `aggregation_function_id`."""
    example = _empty_example(seq_len)
    kind = rng.random()
    labelled = set() if kind < 0.125 or 0.5 <= kind < 0.75 else _draw_labels(rng, num_rows, num_columns)
    answer = float(np.round(rng.uniform(0, 1000), 1)) if kind >= 0.5 else np.nan

    tokens = [CLS_ID] + list(rng.integers(FIRST_WORD_ID, vocab_size, size=int(rng.integers(8, 20)))) + [SEP_ID]
    example["input_ids"][: len(tokens)] = tokens
    position = len(tokens)
    for row in range(num_rows + 1):
        values = rng.uniform(-100, 10_000, size=num_columns + 1)
        for column in range(1, num_columns + 1):
            empty = row > 0 and rng.random() < 0.05
            length = 1 if empty else int(rng.integers(1, 7))
            end = min(position + length, seq_len)
            if end <= position:
                break
            span = slice(position, end)
            position = end
            if empty:
                example["input_ids"][span] = EMPTY_ID
            else:
                example["input_ids"][span] = rng.integers(FIRST_WORD_ID, vocab_size, size=length)[: end - span.start]
            example["segment_ids"][span] = 1
            example["column_ids"][span] = column
            example["row_ids"][span] = row
            example["numeric_values_scale"][span] = length
            if row > 0 and column in NUMERIC_COLUMNS and not empty:
                example["numeric_values"][span] = values[column]
                example["column_ranks"][span] = rng.integers(1, num_rows + 1)
                example["inv_column_ranks"][span] = num_rows + 1 - example["column_ranks"][span.start]
                example["numeric_relations"][span] = rng.integers(0, 8)
            if (row, column) in labelled:
                example["label_ids"][span] = 1
    example["input_mask"][:position] = 1
    example["answer"] = np.float32(answer)
    example["aggregation_function_id"] = np.int32(rng.integers(1, 4) if kind >= 0.5 else 0)
    return example


def make_batch(
    batch_size: int,
    seq_len: int = 512,
    num_rows: int = 20,
    num_columns: int = 6,
    vocab_size: int = 30522,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """A batch in the project's feature names: `<int32>[batch, seq_len]` ids and labels,
    `<float32>[batch, seq_len]` numeric_values / numeric_values_scale, `<float32>[batch]` answer,
    `<int32>[batch]` aggregation_function_id."""
    if batch_size < 1 or seq_len < 8:
        raise ValueError(f"batch_size must be >= 1 and seq_len >= 8, got {batch_size} and {seq_len}")
    rng = np.random.default_rng(seed)
    examples = [make_example(rng, seq_len, num_rows, num_columns, vocab_size) for _ in range(batch_size)]
    return {name: np.stack([example[name] for example in examples]) for name in examples[0]}
