"""Conversion throughput: questions per second, SQA and WikiTableQuestions, one process.

    taskset -c 0 python benchmarks/convert_bench.py \
        --sqa_dir=../shared/datasets/sqa --wtq_dir=../shared/datasets/wtq

Reading the release files is timed separately; the timed part is what
create_data does per interaction: number annotation, tokenisation, fitting,
features and tf.Example serialisation. TensorFlow runs with one thread.
"""

import argparse
import collections
import json
import os
import platform
import time


import tensorflow as tf  # noqa: E402

from tapas_tf.data import number_annotation  # noqa: E402
from tapas_tf.data.readers import sqa, wtq  # noqa: E402
from tapas_tf.features.classifier_examples import ExampleConverter  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError  # noqa: E402
from tapas_tf.features.example_features import to_tf_example  # noqa: E402
from tapas_tf.pipelines import classifier_data  # noqa: E402


def _read(name, args):
    if name == "SQA":
        items = []
        for split in ("random-split-1-train.tsv", "random-split-1-dev.tsv"):
            items += sqa.read_sqa_interactions(os.path.join(args.sqa_dir, split), args.sqa_dir)
    else:
        items = list(wtq.read_wtq_interactions(os.path.join(args.wtq_dir, "training.tsv"), args.wtq_dir))
    interactions = [i for i in items if not isinstance(i, Exception)]
    if args.limit:
        interactions = interactions[:args.limit]
    return interactions


def annotate_by_table(interactions):
    """Annotated interactions, grouped by table, each table annotated once.

    This is the order the Beam job processes them in (grouped by table), so the
    per-table work is shared by every question about the table.
    """
    by_table = collections.defaultdict(list)
    for interaction in interactions:
        by_table[interaction.table.table_id].append(interaction)
    for group in by_table.values():
        table = classifier_data.annotate_interaction(group[0]).table
        for interaction in group:
            annotated = type(interaction)()
            annotated.CopyFrom(interaction)
            annotated.table.CopyFrom(table)
            for question in annotated.questions:
                number_annotation.add_numeric_values_to_question(question)
            yield annotated


def bench(name: str, args, config: ConversionConfig) -> dict:
    start = time.perf_counter()
    interactions = _read(name, args)
    read_seconds = time.perf_counter() - start
    converter = ExampleConverter(config)
    outcomes = collections.Counter()
    start = time.perf_counter()
    for annotated in annotate_by_table(interactions):
        for _, result in converter.convert_interaction(annotated):
            if isinstance(result, ConversionError):
                outcomes[result.reason.value] += 1
            else:
                to_tf_example(result.features).SerializeToString()
                outcomes["converted"] += 1
    seconds = time.perf_counter() - start
    questions = sum(outcomes.values())
    return {"data": name, "interactions": len(interactions), "questions": questions,
            "outcomes": dict(outcomes), "read_seconds": round(read_seconds, 2),
            "convert_seconds": round(seconds, 2), "questions_per_second": round(questions / seconds, 1),
            "max_seq_length": config.max_seq_length}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sqa_dir", default="../shared/datasets/sqa")
    parser.add_argument("--wtq_dir", default="../shared/datasets/wtq")
    parser.add_argument("--vocab_file", default=None)
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--limit", type=int, default=0, help="interactions per data set (0: all)")
    parser.add_argument("--json_out", default=None)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    config = ConversionConfig.from_options(args.vocab_file, max_seq_length=args.max_seq_length)
    results = [bench(name, args, config) for name in ("SQA", "WTQ")]
    machine = {"cpu": platform.processor() or platform.machine(), "cores_visible": len(os.sched_getaffinity(0)),
               "python": platform.python_version(), "tensorflow": tf.__version__}
    for r in results:
        print(json.dumps({**r, "machine": machine}))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"results": results, "machine": machine}, f, indent=2)


if __name__ == "__main__":
    main()
