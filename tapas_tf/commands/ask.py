"""Command line: ask a table, or a collection of tables, a question (`tapas_tf.qa.table_qa`,
`tapas_tf.qa.collection_qa`).

    tapas-tf ask --table=t.csv "which city is the largest?"   # the bundled tiny SQA model
    tapas-tf ask --model=google/tapas-base-finetuned-wtq --table=t.csv "..."  # a released model
    tapas-tf ask --model_dir=MODEL_DIR --table=t.csv          # a conversation on stdin
    tapas-tf ask ... --html=answer.html "..."                  # also a self-contained page
    tapas-tf ask --table=orders.csv --time_budget=10 "how many orders were shipped in may?"  # every row
    tapas-tf ask --table=shop.db --table_name=orders --max_rows=200000 "..."  # a SQLite table, in chunks
    tapas-tf ask --index_dir=my_index "..."                    # the best of the index's top --k tables
    tapas-tf ask --index_dir=my_index --questions_file=q.tsv --json   # many questions, one line each
    tapas-tf ask --table=t.csv --questions_file=q.tsv --json

Prints the answer (with the executed value of SUM, AVERAGE or COUNT) and the table with the selected
cells as *text*, or with --json one JSON line per answer and nothing else on stdout (prompts and
messages go to stderr). In a conversation each question sees the previous answer; `:new` starts
over, `:quit` or the end of input stops. Over an index (`tapas-tf index`) the answer names its table
(`table_id`, `table_title`, `table_source`) and lists the runners-up; a conversation stays with the
table of its first answer. A questions file is a TSV with the columns `id` and `question`; each
answer's JSON line starts with its `id`, and a question without an answer prints a line with its
`error` while the others go on. A model directory with a current model.tflite answers with LiteRT,
without loading TensorFlow (--backend). Errors are one line, `tapas-tf ask: error: ...`, exit 2 for
a wrong command line, else 1 (a bad table, index or questions file fails before the model loads).
-v debug: C++ logs too.
"""

import os
import sys
from typing import List

from absl import flags

import tapas_tf.cli as cli
import tapas_tf.commands.model_flags as model_flags
import tapas_tf.commands.table_flags as table_flags

PROG = "ask"
FLAGS = flags.FLAGS


def define_flags() -> None:
    table_flags.define_flags(__name__)  # --table, --json, --backend, ...
    model_flags.define_flags(__name__)  # --model_dir, --model, --threshold, ...
    flags.DEFINE_string("html", None, "Also write every answer and the table as a self-contained HTML page.")
    flags.DEFINE_bool("windows", True, "Read a table too big for one example in windows of rows, so that a "
                      "count, total or average covers every row (else --prune decides).")
    flags.DEFINE_integer("max_rows", None, "Read at most this many rows (the first) of a table read in windows; "
                         "an answer that hit the limit says so.", lower_bound=1)
    flags.DEFINE_float("time_budget", None, "Stop reading a table's windows after this many seconds; an answer "
                       "that hit the limit says how many rows it covers.", lower_bound=0.001)
    flags.DEFINE_bool("progress_bar", True, "While a table is read in windows, a bar of the windows read on "
                      "stderr, when stderr is a terminal.")
    flags.DEFINE_string("table_name", None, "With --table a database (a SQLite file, sqlite:///PATH or another "
                        "SQLAlchemy URL): the table to ask; default its only table. Read in chunks, at most "
                        "--max_rows rows (default 100,000).")
    flags.DEFINE_float("max_table_mb", 512, "Refuse a CSV file larger than this many MB, unless --max_rows is "
                       "given: then only its first rows are read.", lower_bound=0.001)
    flags.DEFINE_bool("prune", True, "With --nowindows: prune a table too big for the model to the rows and "
                      "columns most related to the question (else refuse it).")
    flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"], "bfloat16: faster matrix products on "
                      "CPUs with AVX512_BF16 or AMX; probabilities move by about 1e-2.")
    flags.DEFINE_string("index_dir", None, "Ask the tables of this index (`tapas-tf index`) instead of --table.")
    flags.DEFINE_integer("k", 5, "With --index_dir: how many of the best-matching tables the model reads.",
                         lower_bound=1)
    flags.DEFINE_string("retrieval_method", None, "With --index_dir: a method of the index; default its default.")
    flags.DEFINE_string("questions_file", None, "A TSV with the columns id and question: every question is "
                        "answered in this process, each printed with its id.")


def _check_command_line(question: str, argv: List[str]) -> None:
    if bool(FLAGS.table) == bool(FLAGS.index_dir):
        cli.fail(PROG, "give --table or --index_dir, not both" if FLAGS.table
                 else f"--table or --index_dir is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    if argv[1:] and not question:
        cli.fail(PROG, "the question is empty; ask one, or none for a conversation on stdin", cli.USAGE_EXIT_CODE)
    if question and FLAGS.questions_file:
        cli.fail(PROG, "give a question or --questions_file, not both", cli.USAGE_EXIT_CODE)
    if FLAGS.html and FLAGS.questions_file:
        cli.fail(PROG, "--html shows one conversation; it does not go with --questions_file", cli.USAGE_EXIT_CODE)


def main(argv: List[str]) -> None:
    from tapas_tf.data.question_files import read_questions
    from tapas_tf.qa.console import AskError, Console, ask_one_table, read_table_file

    cli.quiet_logs_unless_asked()
    question = " ".join(argv[1:]).strip()
    _check_command_line(question, argv)
    try:
        # Before the model loads: a wrong path fails at once.
        questions = read_questions(FLAGS.questions_file) if FLAGS.questions_file else None
        if FLAGS.index_dir:
            from tapas_tf.retrieval.table_index import TableIndex

            index = TableIndex.load(FLAGS.index_dir)
            table, title = None, os.path.basename(os.path.normpath(FLAGS.index_dir))
        else:
            table = read_table_file(FLAGS.table, FLAGS.delimiter, FLAGS.max_table_mb, FLAGS.max_rows, FLAGS.table_name)
            title = FLAGS.table_name or os.path.basename(FLAGS.table)
        qa = model_flags.load_table_qa(prune=FLAGS.prune, precision=FLAGS.precision, backend=FLAGS.backend,
                                       windows=FLAGS.windows, max_rows=FLAGS.max_rows, time_budget=FLAGS.time_budget,
                                       progress=None if FLAGS.progress_bar else False)
        qa.show_backend = True  # answered by: bundled sqa_tiny (LiteRT)
        console = Console(FLAGS.json, FLAGS.html, FLAGS.max_rows_shown, title)
        if FLAGS.index_dir:
            from tapas_tf.qa.collection_qa import CollectionQA

            cqa = CollectionQA(index, qa, k=FLAGS.k, method=FLAGS.retrieval_method)
            answer, chat = cqa.answer, cqa.conversation()
        else:
            answer, chat = ask_one_table(qa, table), qa.conversation(table)
        if questions is None:
            console.run(chat, question, sys.stdin)
            return
        answered, failed = console.answer_file(((row["id"], row["question"]) for row in questions), answer)
        if failed:
            print(f"{PROG}: {failed} of {answered + failed} questions of {FLAGS.questions_file} have no answer "
                  f"(their lines hold the error)", file=sys.stderr)
    except (AskError, FileNotFoundError, ValueError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    except BrokenPipeError:  # A reader that stops early (`| head -1`) is no error.
        cli.quiet_closed_stdout()


if __name__ == "__main__":  # python -m tapas_tf.commands.ask: the same as `tapas-tf ask`.
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
