"""The tiny TapasConfig that model tests share, so that its sizes are written once.

`tiny_config()` is a 2-layer encoder of hidden size 32 (2 heads, intermediate 64) over
the test vocabulary (`vocab_fixture.vocab_tokens()`), with positions up to 256, tables
of up to 8 rows and 8 columns (larger ids share the last segment), and no dropout, so
that a seeded model computes the same outputs in training mode too.

A test that pins other sizes, e.g. a numpy re-computation of one layer or a hand-built
batch whose ids stay below 20, passes them as overrides: any TapasConfig field can be
given, and TapasConfig checks the result as it checks every config.

    config = tiny_config(num_aggregation_labels=4, use_answer_as_supervision=True)
"""

from typing import Any

from tapas_tf.models.config import TapasConfig
from tests.vocab_fixture import vocab_tokens


def tiny_config(**overrides: Any) -> TapasConfig:
    """A tiny TapasConfig (see the module docstring) with `overrides` applied."""
    values: dict = dict(
        vocab_size=len(vocab_tokens()),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        max_num_rows=8,
        max_num_columns=8,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return TapasConfig(**values)
