"""Command line: the tables of an index that best match a question.

    tapas-tf search --index_dir=my_index "what is the height of torre jaume i?"
    tapas-tf search --index_dir=my_index --k=3 --method=bm25 --json "..." 
    tapas-tf search --index_dir=my_index --questions_file=questions.tsv --json

Prints the top --k tables with their scores (rank, score, table id, title); with --json one line
per question: {"id", "question", "method", "tables": [{"rank", "table_id", "title", "source",
"score"}]}. Questions come from the command line, else --questions_file (a TSV with the columns
`id` and `question`), else stdin (one per line).
"""

import json
import sys
from typing import List

from absl import flags

import tapas_tf.cli as cli

PROG = "search"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("index_dir", None, "An index written by `tapas-tf index`.")
    flags.DEFINE_integer("k", 10, "How many tables to list.", lower_bound=1)
    flags.DEFINE_string("method", None, "A method of the index (bm25); default the index's default.")
    flags.DEFINE_string("questions_file", None, "A TSV with the columns id and question.")
    flags.DEFINE_boolean("json", False, "One JSON line per question.")


def _print(question_id: str, question: str, found) -> None:
    if FLAGS.json:
        tables = found.drop(columns="method").to_dict(orient="records")
        method = found["method"].iloc[0] if len(found) else FLAGS.method
        print(json.dumps({"id": question_id, "question": question, "method": method, "tables": tables},
                         ensure_ascii=False), flush=True)
        return
    print(question)
    if not len(found):
        print("  no table shares a word with the question")
    for row in found.itertuples(index=False):
        print(f"  {row.rank:>3}  {row.score:9.4f}  {row.table_id}  {row.title}")
    sys.stdout.flush()


def main(argv: List[str]) -> None:
    if not FLAGS.index_dir:
        cli.fail(PROG, f"--index_dir is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    from tapas_tf.data.question_files import questions_to_ask
    from tapas_tf.retrieval.table_index import TableIndex

    cli.quiet_logs_unless_asked()
    try:
        index = TableIndex.load(FLAGS.index_dir)
        for question_id, question in questions_to_ask(argv[1:], FLAGS.questions_file, sys.stdin):
            _print(question_id, question, index.search(question, FLAGS.k, FLAGS.method))
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    except BrokenPipeError:
        cli.quiet_closed_stdout()


if __name__ == "__main__":
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
