"""Command line: is a statement about a table true? (TabFact)

    tapas-tf verify --table=cities.csv "paris has more people than rome"
    tapas-tf verify --table=cities.csv --json "statement one" < more_statements.txt
    tapas-tf verify --table=cities.csv --model=google/tapas-base-finetuned-tabfact "..."

Prints the verdict (entailed or refuted), P(entailed) and the table the model read; with --json,
one line per statement: {"statement", "entailed", "verdict", "probability", "model",
"diagnostics"}. Without a statement on the command line, statements are read from stdin, one per
line. The model is --model_dir (a TabFact model trained with `run_task.py --task=TABFACT`, or
imported), --model (a released TabFact model by name, downloaded once and cached), else the
bundled TabFact model.

Errors are one line, `tapas-tf verify: error: ...`, naming the file or flag.
"""

import json
import sys
from typing import List

from absl import flags

import tapas_tf.cli as cli  # Not `from tapas_tf import ...`: rooms do not import the package (test_layout).
import tapas_tf.commands.model_flags as model_flags
import tapas_tf.commands.table_flags as table_flags

PROG = "verify"
FLAGS = flags.FLAGS


def define_flags() -> None:
    table_flags.define_flags(__name__)  # --table, --json, --backend, ... as ask has them.
    model_flags.define_flags(__name__, aggregation=False)  # --model_dir, --model, --model_revision, --vocab_file
    flags.DEFINE_float("entailed_threshold", 0.5, "P(entailed) at or above which a statement is judged entailed.")


def _load_checker():
    from tapas_tf.qa.fact_checker import TableFactChecker

    options = dict(vocab_file=FLAGS.vocab_file, backend=FLAGS.backend, threshold=FLAGS.entailed_threshold)
    if FLAGS.model:
        return TableFactChecker.from_pretrained(FLAGS.model, revision=FLAGS.model_revision, **options)
    return TableFactChecker.from_model_dir(FLAGS.model_dir, **options)


def _print(result) -> None:
    from tapas_tf.qa.rendering import render_verdict_text

    text = json.dumps(result.to_dict()) if FLAGS.json else render_verdict_text(result, FLAGS.max_rows_shown) + "\n"
    print(text, flush=True)


def main(argv: List[str]) -> None:
    from tapas_tf.qa.console import read_table_file
    from tapas_tf.qa.tables import AskError

    cli.quiet_logs_unless_asked()
    statement = " ".join(argv[1:]).strip()
    if not FLAGS.table or (argv[1:] and not statement):
        cli.fail(PROG, "the statement is empty; give one, or none to read statements from stdin" if FLAGS.table
                 else f"--table is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    try:
        table = read_table_file(FLAGS.table, FLAGS.delimiter)  # Before the model loads: a wrong path fails at once.
        checker = _load_checker()
        statements = [statement] if statement else (line.strip() for line in sys.stdin)
        for text in statements:
            if text:
                _print(checker.verify(table, text))
    except (AskError, FileNotFoundError, ValueError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    except BrokenPipeError:  # A reader that stops early (`| head -1`) is no error.
        cli.quiet_closed_stdout()


if __name__ == "__main__":  # python -m tapas_tf.commands.verify: the same as `tapas-tf verify`.
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
