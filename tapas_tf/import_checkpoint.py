"""Command line: import a Hugging Face or original (TF1) TAPAS checkpoint as a model directory.

    python -m tapas_tf.import_checkpoint --format=hf --source=HF_DIR --model_dir=OUT
    python -m tapas_tf.import_checkpoint --format=tf1 --source=RELEASE_DIR_OR_ZIP --model_dir=OUT \\
        --task=SQA --model_options='{"reset_position_index_per_cell": true}'

What is imported, and how strictly: `tapas_tf.checkpoints.importer`. -v debug: TensorFlow's C++ logs too.
"""

import argparse
import sys
from typing import Optional, Sequence

from tapas_tf import cli

if __name__ == "__main__":  # First: the importer loads TensorFlow, which reads TF_CPP_MIN_LOG_LEVEL once.
    cli.quiet_tensorflow()
    cli.log_to_stderr(cli.requested_verbosity(sys.argv) or 0)  # Plain log lines; argparse checks -v.

from tapas_tf.checkpoints import importer  # noqa: E402

PROG = "python -m tapas_tf.import_checkpoint"  # `tapas-tf import` passes its own.


def _parse_args(argv: Sequence[str], prog: str) -> argparse.Namespace:
    parser = cli.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", required=True, choices=importer.FORMATS,
                        help="hf: config.json + model.safetensors; tf1: the original release's "
                             "bert_config.json + model.ckpt*.")
    parser.add_argument("--source", required=True, help="Model directory, TF1 checkpoint prefix, or release zip.")
    parser.add_argument("--model_dir", required=True, help="The new tapas-tf model directory.")
    parser.add_argument("--skip_heads", action="store_true",
                        help="Leave heads and pooler missing from the checkpoint fresh; drop unused source heads.")
    parser.add_argument("--task", default=None, help="tf1 only: task preset of the options (SQA, WTQ, WIKISQL).")
    parser.add_argument("--model_options", default=None, help="JSON object of TapasConfig fields, applied last.")
    parser.add_argument("--target", default="auto", choices=importer.TARGETS,
                        help="Model class to build (default: auto).")
    cli.add_verbosity_flag(parser)
    return parser.parse_args(list(argv))


def main(argv: Optional[Sequence[str]] = None, prog: str = PROG) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv, prog)
    try:
        report = importer.import_checkpoint(
            args.format, args.source, args.model_dir, skip_heads=args.skip_heads, task=args.task,
            model_options=importer.parse_model_options(args.model_options), target=args.target)
    except (ValueError, FileNotFoundError) as e:
        print(f"{prog}: error: {cli.one_line(e)}", file=sys.stderr)
        return 1
    print(f"Wrote {args.model_dir}: {report['model_class']}, {report['mapped']} weights mapped, "
          f"{len(report['fresh'])} fresh, {len(report['dropped'])} dropped (see {importer.REPORT_FILE}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
