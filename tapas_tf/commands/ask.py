"""Command line: ask a table a question (`tapas_tf.qa.table_qa`).

    tapas-tf ask --table=t.csv "which city is the largest?"   # the bundled tiny SQA model
    tapas-tf ask --model=google/tapas-base-finetuned-wtq --table=t.csv "..."  # a released model
    tapas-tf ask --model_dir=MODEL_DIR --table=t.csv          # a conversation on stdin
    tapas-tf ask ... --html=answer.html "..."                  # also a self-contained page

Prints the answer (with the executed value of SUM, AVERAGE or COUNT) and the table with the selected
cells as *text*, or with --json one JSON line per answer and nothing else on stdout (prompts and
messages go to stderr). In a conversation each question sees the previous answer; `:new` starts
over, `:quit` or the end of input stops. A model directory with a current model.tflite answers with
LiteRT, without loading TensorFlow (--backend). Errors are one line, `tapas-tf ask: error: ...`, exit 2 for a
wrong command line, else 1 (a bad table fails before the model loads). -v debug: C++ logs too.
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
    flags.DEFINE_bool("prune", True, "Prune a table too big for the model to the rows and columns most "
                      "related to the question (else refuse it).")
    flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"], "bfloat16: faster matrix products on "
                      "CPUs with AVX512_BF16 or AMX; probabilities move by about 1e-2.")

def main(argv: List[str]) -> None:
    from tapas_tf.qa.console import AskError, Console, read_table_file

    cli.quiet_logs_unless_asked()
    question = " ".join(argv[1:]).strip()
    if not FLAGS.table or (argv[1:] and not question):
        cli.fail(PROG, "the question is empty; ask one, or none for a conversation on stdin" if FLAGS.table
                 else f"--table is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    try:
        table = read_table_file(FLAGS.table, FLAGS.delimiter)  # Before the model loads: a wrong path fails at once.
        qa = model_flags.load_table_qa(prune=FLAGS.prune, precision=FLAGS.precision, backend=FLAGS.backend)
        qa.show_backend = True  # answered by: bundled sqa_tiny (LiteRT)
        console = Console(FLAGS.json, FLAGS.html, FLAGS.max_rows_shown, os.path.basename(FLAGS.table))
        console.run(qa.conversation(table), question, sys.stdin)
    except (AskError, FileNotFoundError, ValueError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    except BrokenPipeError:  # A reader that stops early (`| head -1`) is no error.
        cli.quiet_closed_stdout()


if __name__ == "__main__":  # python -m tapas_tf.commands.ask: the same as `tapas-tf ask`.
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
