"""The tables for synthetic questions (`--task=SYNTHETIC`): the distinct tables of a task's training
interactions, without the tables that any evaluation uses.

    python experiments/synthetic_tables.py --interactions=WTQ_OUT/interactions/train.tfrecord \
        --exclude_interactions=MIX/interactions/holdout.tfrecord --output=SYNTH_IN/train.tfrecord

Left out: the held-out slice's tables (`--exclude_interactions`, any number of files) and the
tables of SQA's and WTQ's dev sets (read from the releases), so that training on the synthetic
questions sees no table that a held-out or dev score is measured on. Prints what it kept and why
it left the rest out.

Tables whose ids are not WikiTableQuestions names (the Wikipedia job's: page addresses) are kept
under their own ids; leave the evaluation tables out of them in the Wikipedia job itself, with
`--exclude_tables` of the file `--excluded_out` writes (every left-out table's WTQ name):

    python experiments/synthetic_tables.py --interactions=WTQ_OUT/interactions/train.tfrecord \
        --exclude_interactions=MIX/interactions/holdout.tfrecord --output=TABLES.tfrecord --excluded_out=EXCLUDE.txt
"""

import argparse
import collections
import csv
import os
import sys


from mix_tasks import table_key, wtq_dev_tables  # noqa: E402  (experiments/ is not a package)
from tapas_tf.data import interaction_io  # noqa: E402


def dev_tables(datasets: str) -> set:
    """Keys of the tables of SQA's and WTQ's random-split-1 dev sets."""
    keys = wtq_dev_tables(os.path.join(datasets, "wtq"))
    with open(os.path.join(datasets, "sqa", "random-split-1-dev.tsv"), newline="") as f:
        keys.update(table_key(row["table_file"]) for row in csv.DictReader(f, delimiter="\t"))
    return keys


def _key(table_id: str) -> str:
    """A WTQ table's key ("204_590"); any other table's own id."""
    try:
        return table_key(table_id)
    except ValueError:
        return table_id


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interactions", required=True, action="append")
    parser.add_argument("--exclude_interactions", action="append", default=[])
    parser.add_argument("--datasets", default="../shared/datasets")
    parser.add_argument("--output", required=True)
    parser.add_argument("--excluded_out", default=None,
                        help="Also write the WTQ names (csv/2xx-csv/N.csv) of the tables left out, one per line.")
    args = parser.parse_args(argv)

    excluded = {key: "dev" for key in dev_tables(args.datasets)}
    for path in args.exclude_interactions:
        for interaction in interaction_io.read_interactions(path):
            excluded.setdefault(table_key(interaction.table.table_id), "held_out")
    counts, kept, seen = collections.Counter(), [], set()
    for path in args.interactions:
        for interaction in interaction_io.read_interactions(path):
            key = _key(interaction.table.table_id)
            if key in seen:
                continue
            seen.add(key)
            reason = excluded.get(key)
            counts[f"left_out_{reason}" if reason else "kept"] += 1
            if not reason:
                table_only = type(interaction)(id=key)
                table_only.table.CopyFrom(interaction.table)
                kept.append(table_only)
    interaction_io.write_interactions(args.output, kept)
    if args.excluded_out:
        with open(args.excluded_out, "w") as f:
            f.writelines(f"csv/{key.replace('_', '-csv/', 1)}.csv\n" for key in sorted(excluded))
    print(f"{len(seen)} distinct tables: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f" -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
