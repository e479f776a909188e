"""Command line: how well an index finds each question's table.

    tapas-tf evaluate-retrieval --index_dir=wtq_index --queries=wtq_dev_queries.tsv

`--queries` is a TSV with the columns `id`, `question` and `table_id` (the gold table). Prints one
JSON line: {"default": METHOD, "methods": {METHOD: {"recall@1", "recall@10", "recall@50", "mrr",
"queries"}}} for every method the index has (today bm25), and
"gold_not_indexed", the number of queries whose gold table the index does not hold (they count as
misses). `--output` also writes it to a file.
"""

import json
import sys
from typing import List

from absl import flags

import tapas_tf.cli as cli

PROG = "evaluate-retrieval"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("index_dir", None, "An index written by `tapas-tf index`.")
    flags.DEFINE_string("queries", None, "A TSV with the columns id, question and table_id.")
    flags.DEFINE_list("methods", None, "Methods to score; default every method of the index.")
    flags.DEFINE_list("ks", ["1", "10", "50"], "The k of recall@k.")
    flags.DEFINE_string("output", None, "Also write the JSON here.")


def main(argv: List[str]) -> None:
    if argv[1:]:
        cli.fail(PROG, f"unexpected arguments: {' '.join(argv[1:])}", cli.USAGE_EXIT_CODE)
    for name in ("index_dir", "queries"):
        if not getattr(FLAGS, name):
            cli.fail(PROG, f"--{name} is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    try:
        ks = [int(k) for k in FLAGS.ks]
    except ValueError:
        cli.fail(PROG, f"--ks are whole numbers, not {','.join(FLAGS.ks)}", cli.USAGE_EXIT_CODE)
    from tapas_tf.retrieval.evaluation import evaluate_index, read_queries
    from tapas_tf.retrieval.table_index import TableIndex

    cli.quiet_logs_unless_asked()
    try:
        index = TableIndex.load(FLAGS.index_dir)
        queries = read_queries(FLAGS.queries)
        result = evaluate_index(index, queries, FLAGS.methods, ks)
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    line = json.dumps(result)
    if FLAGS.output:
        with open(FLAGS.output, "w", encoding="utf-8") as f:
            f.write(line + "\n")
    print(line)


if __name__ == "__main__":
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
