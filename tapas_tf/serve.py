"""Command line: the web page of the ask API (`tapas_tf.inference.web_app`); needs `pip install tapas-tf[web]`.

    python -m tapas_tf.serve                               # the bundled model, http://127.0.0.1:8000
    python -m tapas_tf.serve --model_dir=MODEL_DIR --port=8080

Upload a CSV file (or load an example table), ask, follow up, start a new conversation.
"""

import sys
from typing import List

from absl import app, flags

from tapas_tf import model_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("host", "127.0.0.1", "Address to listen on. The default is reachable from this machine "
                    "only; the page has no login, so expose it (0.0.0.0) only on a trusted network.")
flags.DEFINE_integer("port", 8000, "Port to listen on.")
flags.DEFINE_integer("max_sessions", 32, "Tables (with their conversations) kept at once; the least recently "
                     "used goes first.")
flags.DEFINE_integer("max_table_rows", 10_000, "The most body rows of an uploaded table.")
flags.DEFINE_integer("max_upload_mb", 5, "The largest CSV file accepted, in MiB.")
flags.DEFINE_bool("warm_up", True, "Trace the model at every sequence length before listening (seconds at "
                  "start-up, so that no question waits for it).")


def main(argv: List[str]) -> None:
    try:
        from tapas_tf.inference import web_app, web_sessions
    except ImportError as e:
        print(f"serve: error: {e.name} is missing; install the web extra: pip install 'tapas-tf[web]'",
              file=sys.stderr)
        sys.exit(1)
    from tapas_tf.inference.table_qa import TableQA

    try:
        limits = web_sessions.WebLimits(max_upload_bytes=FLAGS.max_upload_mb * 2**20,
                                        max_table_rows=FLAGS.max_table_rows, max_sessions=FLAGS.max_sessions)
        qa = TableQA.from_model_dir(**model_flags.table_qa_options())
        web = web_app.create_app(qa, limits, qa.name)
    except (FileNotFoundError, ValueError) as e:
        print(f"serve: error: {e}", file=sys.stderr)
        sys.exit(1)
    if FLAGS.warm_up:
        qa.warm_up()
    web_app.run_server(web, FLAGS.host, FLAGS.port)

if __name__ == "__main__":
    app.run(main)
