"""Training data of one model for SQA and WTQ: both tasks' training examples in one shuffled file,
with a held-out slice of WTQ training tables for choosing checkpoints (never dev).

    python experiments/mix_tasks.py --sqa_data=SQA_OUT --wtq_data=WTQ_OUT --output_dir=MIX \
        [--holdout_tables=60] [--seed=1]

SQA_OUT and WTQ_OUT are `run_task.py --mode=create_data` output directories. Every example's
table goes through the training-data rule (`tapas_tf.data.training_tables`): SQA is a
decomposition of WikiTableQuestions questions, so SQA's training set holds sequences made from
WTQ dev questions (58 of its tables are WTQ dev tables) and from WTQ test tables (3): those are
left out, and so are the held-out tables, so that neither WTQ dev nor the held-out slice is seen
in training. With --sqa_dataset, questions about SQA dev tables are left out too, for one model
scored on both dev sets. Writes:

    MIX/tf_examples/train.tfrecord          the mixture, shuffled (seeded)
    MIX/tf_examples/train_sqa.tfrecord      its SQA examples alone, and train_wtq.tfrecord its WTQ
                                            ones, in the same order, for one-task models
    MIX/interactions/holdout.tfrecord       WTQ training interactions of the held-out tables
    MIX/interactions/holdout_sqa.tfrecord   SQA training interactions (sequences) of the same tables
    MIX/mix_report.json                     what went where, by task, and why
"""

import argparse
import collections
import gzip
import json
import os
import random
import re
import sys

import tensorflow as tf

# Table ids: SQA writes "table_csv/203_149.csv", WTQ "csv/203-csv/149.csv"; both name table 203_149.
_TABLE_KEY = re.compile(r"(\d+)[-_](?:csv/)?(\d+)\.csv$")


def table_key(table_id: str) -> str:
    match = _TABLE_KEY.search(table_id)
    if not match:
        raise ValueError(f"table id {table_id!r} is not a WikiTableQuestions table name")
    return f"{match.group(1)}_{match.group(2)}"


def _table_id_of(record: bytes) -> str:
    return tf.train.Example.FromString(record).features.feature["table_id"].bytes_list.value[0].decode()


def _table_of(record: bytes) -> str:
    return table_key(_table_id_of(record))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqa_data", required=True)
    parser.add_argument("--wtq_data", required=True)
    parser.add_argument("--wtq_dataset", default="../shared/datasets/wtq", help="The WTQ release (its dev split).")
    parser.add_argument("--sqa_dataset", default="",
                        help="The SQA release: its dev tables are left out too "
                             "(one model scored on both dev sets).")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--holdout_tables", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    # The training-data rule: only training tables, less the scored dev splits' (WTQ's, and SQA's
    # with --sqa_dataset); SQA train's tables that are WTQ test tables are left out too.
    from tapas_tf.data.training_tables import Releases, TrainingTableRule  # pylint: disable=import-outside-toplevel

    rule = TrainingTableRule.from_releases(Releases(wtq_dir=args.wtq_dataset, sqa_dir=args.sqa_dataset or None))
    wtq_records = [r.numpy() for r in tf.data.TFRecordDataset(os.path.join(args.wtq_data, "tf_examples/train.tfrecord"))]
    wtq_tables = sorted({_table_of(r) for r in wtq_records})
    holdout = set(rng.sample(wtq_tables, min(args.holdout_tables, len(wtq_tables))))

    counts = collections.Counter()
    kept = []
    manifest = collections.defaultdict(set)  # task -> manifest names of the tables it trains on
    for task, path in (("WTQ", args.wtq_data), ("SQA", args.sqa_data)):
        records = wtq_records if task == "WTQ" else tf.data.TFRecordDataset(os.path.join(path, "tf_examples/train.tfrecord"))
        for record in records:
            record = record if isinstance(record, bytes) else record.numpy()
            table = _table_of(record)
            decision = rule.decide(_table_id_of(record))
            if not decision.kept:
                counts[f"{task}_skipped_{decision.reason}"] += 1
            elif table in holdout:
                counts[f"{task}_skipped_holdout_table"] += 1
            else:
                counts[f"{task}_kept"] += 1
                kept.append((task, record))
                manifest[task].add(decision.manifest_name)
    rng.shuffle(kept)
    os.makedirs(os.path.join(args.output_dir, "tf_examples"), exist_ok=True)
    os.makedirs(os.path.join(args.output_dir, "interactions"), exist_ok=True)
    for suffix, tasks in (("", ("SQA", "WTQ")), ("_sqa", ("SQA",)), ("_wtq", ("WTQ",))):
        with tf.io.TFRecordWriter(os.path.join(args.output_dir, f"tf_examples/train{suffix}.tfrecord")) as writer:
            for task, record in kept:
                if task in tasks:
                    writer.write(record)

    # Interactions of the held-out questions, for run_task.py --mode=predict --interactions_file.
    from tapas_tf.data import interaction_io  # pylint: disable=import-outside-toplevel
    for task, data, name in (("WTQ", args.wtq_data, "holdout"), ("SQA", args.sqa_data, "holdout_sqa")):
        with tf.io.TFRecordWriter(os.path.join(args.output_dir, f"interactions/{name}.tfrecord")) as writer:
            for interaction in interaction_io.read_interactions(os.path.join(data, "interactions/train.tfrecord")):
                if table_key(interaction.table.table_id) in holdout:
                    counts[f"{task}_holdout_interactions"] += 1
                    writer.write(interaction.SerializeToString())
    # What each task's half trains on, as a bundled model's training_tables.txt.gz names it.
    for task, names in manifest.items():
        with gzip.open(os.path.join(args.output_dir, f"training_tables_{task.lower()}.txt.gz"), "wt",
                       encoding="utf-8") as f:
            f.writelines(f"{name}\n" for name in sorted(names))
    report = {"counts": dict(sorted(counts.items())), "examples_written": len(kept),
              "holdout_tables": sorted(holdout), "seed": args.seed,
              "tables_used": {task: sorted(names) for task, names in sorted(manifest.items())}}
    with open(os.path.join(args.output_dir, "mix_report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report["counts"]), f"-> {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
