"""Command line: write the small SQA-format sample data set (`tapas_tf.data.sample_data`).

    python -m tapas_tf.sample_data --output_dir=out/sqa_sample
"""

import argparse
import os

from tapas_tf.data.sample_data import write_sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", required=True)
    args = parser.parse_args()
    for name, count in write_sample(args.output_dir).items():
        print(f"{os.path.join(args.output_dir, name)}: {count} questions")


if __name__ == "__main__":
    main()
