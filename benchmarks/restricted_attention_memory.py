"""Peak memory of one forward pass, full attention against MATE's row and column heads, by length.

    python benchmarks/restricted_attention_memory.py [--lengths=1024,2048,4096,8192] [--size=tiny]

Each (mode, length) runs in its own process (`peak_memory.run_with_peak_rss`): a randomly
initialised QA model of `--size` with `attention_mode` "full" or "row_column" (block 64, question
of 16 tokens) answers one example of a table with 10 columns and as many rows as fill the length
(2 word pieces per cell), batch 1. Full attention holds heads x length^2 scores per layer; the row
and column heads about heads x length x (3 x 64 + 64).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine_line  # noqa: E402
from peak_memory import run_with_peak_rss  # noqa: E402


def one(mode: str, length: int, size: str) -> None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import numpy as np
    import tensorflow as tf

    from tapas_tf.models.config import TapasConfig
    from tapas_tf.models.qa_model import TapasForQuestionAnswering

    config = TapasConfig.from_preset(size, attention_mode=mode, max_position_embeddings=length,
                                     type_vocab_sizes=(3, 256, 2048, 2, 256, 256, 10))
    model = TapasForQuestionAnswering(config)
    question, columns, per_cell = 16, 10, 2
    rows = np.zeros(length, np.int32)
    cols = np.zeros(length, np.int32)
    body = np.arange(length - question)
    cols[question:] = body // per_cell % columns + 1
    rows[question:] = body // (per_cell * columns)
    features = {name: tf.zeros((1, length), tf.int32) for name in (
        "input_ids", "segment_ids", "prev_label_ids", "column_ranks", "inv_column_ranks", "numeric_relations")}
    features.update(row_ids=tf.constant(rows[None]), column_ids=tf.constant(cols[None]),
                    input_mask=tf.ones((1, length), tf.int32))
    model(features)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="1024,2048,4096,8192")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        mode, length = args.one.split(":")
        one(mode, int(length), args.size)
        return
    print(machine_line())
    print("| tokens | full attention: peak MB | row/column heads: peak MB |")
    print("|---|---|---|")
    for length in (int(x) for x in args.lengths.split(",")):
        peaks = []
        for mode in ("full", "row_column"):
            seconds, peak = run_with_peak_rss([sys.executable, __file__, f"--one={mode}:{length}", f"--size={args.size}"])
            peaks.append(f"{peak / 2 ** 20:,.0f} ({seconds:.1f} s)")
        print(f"| {length:,} | {peaks[0]} | {peaks[1]} |", flush=True)


if __name__ == "__main__":
    main()
