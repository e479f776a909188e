"""How close one model call of the server comes to the core's float32 peak.

    python benchmarks/model_call_rate.py [--model_dir=DIR] [--lengths=128,224,320] [--calls=200]

Runs a model directory's LiteRT copy (default: the bundled SQA model) on one single-threaded
interpreter, as the web server does, and reports for each sequence length the median CPU time of a
call (`time.thread_time`, so other processes on the machine change it less than wall time) and the
rate of the encoder's dense and attention products, `2 x layers x (12 T H^2 + 2 T^2 H)` floating-point
operations (heads, layer norms, softmax and embeddings not counted). The reference is NumPy's float32
matrix product on one thread at the feed-forward's shape (T x H by H x 4H) and at 1024^3: what this
core does at best without lower precision. Run it alone on the machine (pause other work).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# One thread for the reference product, set before NumPy loads its BLAS.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import numpy as np  # noqa: E402

from machine import machine_line  # noqa: E402
from synthetic_tables import make_example  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", default=os.path.join(ROOT, "tapas_tf", "checkpoints", "bundled", "sqa_tiny"))
    parser.add_argument("--lengths", default="128,224,320")
    parser.add_argument("--calls", type=int, default=200)
    return parser.parse_args(argv)


def median_cpu_ms(fn, calls: int, warm_up: int = 20) -> float:
    for _ in range(warm_up):
        fn()
    times = []
    for _ in range(calls):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return float(np.median(times)) * 1000


def encoder_flops(length: int, hidden: int, layers: int) -> int:
    return 2 * layers * (12 * length * hidden * hidden + 2 * length * length * hidden)


def numpy_rate(rows: int, inner: int, columns: int, calls: int) -> float:
    """GFLOP/s of a float32 product on this thread."""
    a = np.random.rand(rows, inner).astype(np.float32)
    b = np.random.rand(inner, columns).astype(np.float32)
    return 2 * rows * inner * columns / median_cpu_ms(lambda: a @ b, calls) / 1e6


def main(argv=None) -> None:
    args = parse_args(argv if argv is not None else sys.argv[1:])
    from tapas_tf.qa.lite_model import LiteRunner, read_current_lite_model

    lite = read_current_lite_model(args.model_dir)
    config = lite.model_config
    runner = LiteRunner(lite, interpreters=1)
    rng = np.random.default_rng(0)
    print(machine_line())
    print(f"{args.model_dir}: L{config.num_hidden_layers}/H{config.hidden_size}, one interpreter, one thread")
    print("| tokens | CPU ms per call | encoder GFLOP | GFLOP/s |")
    print("|---|---|---|---|")
    for length in (int(x) for x in args.lengths.split(",")):
        # A table longer than the sequence, cut to it; at most 40 rows, so the small heads serve it.
        row = make_example(rng, length, num_rows=40, num_columns=6, vocab_size=config.vocab_size)
        ms = median_cpu_ms(lambda: runner(length, [row]), args.calls)
        flops = encoder_flops(length, config.hidden_size, config.num_hidden_layers)
        print(f"| {length} | {ms:.2f} | {flops / 1e9:.3f} | {flops / ms / 1e6:.1f} |")
    hidden = config.hidden_size
    print(f"NumPy float32, one thread: {numpy_rate(224, hidden, 4 * hidden, args.calls):.1f} GFLOP/s at "
          f"224x{hidden} by {hidden}x{4 * hidden}, {numpy_rate(1024, 1024, 1024, 20):.1f} at 1024^3")


if __name__ == "__main__":
    main()
