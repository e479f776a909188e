"""A deeper model started from a trained shallow one (`tapas_tf.checkpoints.stacking`).

    python experiments/stack_layers.py --source=tapas_tf/checkpoints/bundled/wtq_tiny \
        --output=$WORK/wtq_l4_init --layer_order=0,1,0,1

then train with `--init_checkpoint=$WORK/wtq_l4_init --init_heads`.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from tapas_tf.checkpoints.stacking import stack_layers  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="A trained (or compact) model directory.")
    parser.add_argument("--output", required=True, help="The new model directory (must not hold a model).")
    parser.add_argument("--layer_order", default="0,1,0,1",
                        help="Which source layer each new layer copies, bottom first.")
    args = parser.parse_args(argv)
    order = stack_layers(args.source, args.output, args.layer_order)
    print(f"{args.output}: {len(order)} layers, copies of layers {order} of {args.source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
