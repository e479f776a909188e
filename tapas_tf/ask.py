"""Command line: ask a table a question (`tapas_tf.inference.table_qa`).

    python -m tapas_tf.ask --table=t.csv "which city is the largest?"   # the bundled tiny SQA model
    python -m tapas_tf.ask --model_dir=MODEL_DIR --table=t.csv "which city is the largest?"
    python -m tapas_tf.ask --model_dir=MODEL_DIR --table=t.csv          # a conversation on stdin
    python -m tapas_tf.ask ... --html=answer.html "..."                  # also a self-contained page

Prints the answer (with the executed value of SUM, AVERAGE or COUNT) and the table with the
selected cells as *text*. In a conversation each question sees the previous answer; `:new`
starts over, `:quit` or the end of input stops. The model and decoding flags are
`tapas_tf.model_flags`'s.
"""

import os
import sys
from typing import List

from absl import app, flags

from tapas_tf import model_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("table", None, "The table: a CSV file with a header row.")
flags.DEFINE_string("html", None, "Also write the answers and the table as a self-contained HTML page.")
flags.DEFINE_bool("prune", True, "Prune a table too big for the model to the rows and columns most "
                  "related to the question (else refuse it).")
flags.DEFINE_integer("max_rows_shown", 20, "Rows of the table printed (rows with answers are always shown).")
flags.DEFINE_enum("precision", "float32", ["float32", "bfloat16"], "bfloat16: faster matrix products on CPUs "
                  "with AVX512_BF16 or AMX; probabilities move by about 1e-2.")
flags.DEFINE_bool("json", False, "Print each answer as one JSON line instead of the marked table.")


def main(argv: List[str]) -> None:
    if not FLAGS.table:
        print("ask: error: --table is required", file=sys.stderr)
        sys.exit(2)
    from tapas_tf.inference.console import Console
    from tapas_tf.inference.table_qa import AskError, TableQA

    console = Console(FLAGS.json, FLAGS.html, FLAGS.max_rows_shown, os.path.basename(FLAGS.table))
    try:
        qa = TableQA.from_model_dir(prune=FLAGS.prune, precision=FLAGS.precision, **model_flags.table_qa_options())
        chat = qa.conversation(FLAGS.table)
        question = " ".join(argv[1:]).strip()
        if question:
            chat.ask(question)
            console.show(chat.table.table, chat.history)
        else:
            console.converse(chat, sys.stdin, prompt=sys.stdin.isatty())
    except (AskError, FileNotFoundError, ValueError) as e:
        print(f"ask: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
