"""Command line: write the small SQA-format sample data set (`tapas_tf.data.sample_data`).

    python -m tapas_tf.sample_data --output_dir=out/sqa_sample
"""

import argparse
import os
from typing import Optional, Sequence

from tapas_tf import cli
from tapas_tf.data.sample_data import write_sample


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> None:
    parser = cli.ArgumentParser(prog=prog, description=__doc__.replace("python -m tapas_tf.sample_data", prog)
                                if prog else __doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", required=True, help="Where to write the sample (made if missing).")
    args = parser.parse_args(argv)
    for name, count in write_sample(args.output_dir).items():
        print(f"{os.path.join(args.output_dir, name)}: {count} questions")


if __name__ == "__main__":
    main()
