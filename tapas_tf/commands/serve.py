"""Command line: the web page of the ask API (`tapas_tf.serving.web_app`); needs `pip install tapas-tf[web]`.

    tapas-tf serve                               # the bundled model, http://127.0.0.1:8000
    tapas-tf serve --model_dir=MODEL_DIR --port=8080
    tapas-tf serve --model=google/tapas-base-finetuned-wtq   # a released model, imported once
    tapas-tf serve --index_dir=my_index                        # collection mode: an index (`tapas-tf index`)
    tapas-tf serve --tables=my_tables/ --titles=titles.tsv     # collection mode: indexed at start
    tapas-tf serve --tables=sqlite:///shop.db

Upload a CSV file (or load an example table), ask, follow up, start a new conversation, or check a
statement (--tabfact_model_dir, docs/TABFACT.md). Upload several files at once to ask them as a
collection. With --index_dir or --tables the page starts in collection mode: each first question is
answered from the best of the --k best-matching tables, the answer names its table, and follow-ups
stay with that table. --tables is indexed (BM25) into a temporary directory before the server
listens. Ctrl-C or SIGTERM stops it after the requests in flight (exit 0). Errors are one line,
`tapas-tf serve: error: ...` (exit 2 for a wrong command line; a missing index or an unreadable
collection fails before the model loads); --verbosity=debug also shows TensorFlow's C++ lines.
"""

from absl import flags

import tapas_tf.cli as cli
import tapas_tf.commands.model_flags as model_flags

PROG = "serve"
FLAGS = flags.FLAGS


def define_flags() -> None:
    model_flags.define_flags(__name__)  # --model_dir, --model, --threshold, ...
    flags.DEFINE_string("host", "127.0.0.1", "Address to listen on. The default is reachable from this machine "
                        "only; the page has no login, so expose it (0.0.0.0) only on a trusted network.")
    flags.DEFINE_integer("port", 8000, "Port to listen on.")
    flags.DEFINE_integer("max_sessions", 32, "Tables (with their conversations) kept at once; the least recently "
                         "used goes first.")
    flags.DEFINE_integer("max_table_rows", 10_000, "The most body rows of an uploaded table.")
    flags.DEFINE_integer("max_table_columns", 1_000, "The most columns of an uploaded table.")
    flags.DEFINE_integer("max_upload_mb", 5, "The largest CSV file accepted, in MiB.")
    flags.DEFINE_bool("access_log", True, "Log a line per request (uvicorn's); start-up and errors are logged either way.")
    flags.DEFINE_bool("warm_up", True, "Trace the model at every sequence length before listening (no question waits).")
    flags.DEFINE_string("tabfact_model_dir", None, "The TabFact model of the page's \"check a statement\" mode; "
                        "default the bundled one, if installed; 'none': no such mode.")
    # Collection mode; the names and meanings of `tapas-tf ask` (--index_dir, --k, --retrieval_method)
    # and `tapas-tf index` (--tables, --titles).
    flags.DEFINE_string("index_dir", None, "Collection mode: ask the tables of this index (`tapas-tf index`).")
    flags.DEFINE_string("tables", None, "Collection mode: a folder of CSV/TSV files, a SQLite file, sqlite:///FILE "
                        "or a SQLAlchemy URL, indexed (BM25) into a temporary directory at start.")
    flags.DEFINE_string("titles", None, "With --tables: a TSV with the columns table_id and title.")
    flags.DEFINE_integer("k", 5, "In a collection: how many of the best-matching tables the model reads for a "
                         "first question.", lower_bound=1)
    flags.DEFINE_string("retrieval_method", None, "In a collection: a retrieval method of its index; default the index's default "
                        "(bm25).")
    flags.DEFINE_integer("max_collection_files", 20, "The most files uploaded together as a collection.",
                         lower_bound=1)
    flags.DEFINE_integer("max_collection_mb", 20, "The most MiB of the files uploaded together.", lower_bound=1)


def _check_command_line() -> None:
    if FLAGS.index_dir and FLAGS.tables:
        cli.fail(PROG, "give --index_dir or --tables, not both", cli.USAGE_EXIT_CODE)
    if FLAGS.titles and not FLAGS.tables:
        cli.fail(PROG, "--titles goes with --tables (an index has its titles already)", cli.USAGE_EXIT_CODE)
    if FLAGS.retrieval_method and not (FLAGS.index_dir or FLAGS.tables):
        cli.fail(PROG, "--retrieval_method goes with --index_dir or --tables", cli.USAGE_EXIT_CODE)


def _served_collection(web_collections):
    """The collection of --index_dir or --tables (None without either), before the model loads:
    a missing index or an unreadable collection fails at once."""
    if not (FLAGS.index_dir or FLAGS.tables):
        return None
    return web_collections.load_served_collection(FLAGS.index_dir, FLAGS.tables, FLAGS.titles, FLAGS.k,
                                                  FLAGS.retrieval_method)


def main(argv: list[str]) -> None:
    _check_command_line()
    try:
        from tapas_tf.serving import web_app, web_collections, web_sessions
    except ImportError as e:
        cli.fail(PROG, f"{e.name} is missing; install the web extra: pip install 'tapas-tf[web]'", cli.ERROR_EXIT_CODE)
    try:
        limits = web_sessions.WebLimits(max_upload_bytes=FLAGS.max_upload_mb * 2**20, max_table_rows=FLAGS.max_table_rows,
                                        max_table_columns=FLAGS.max_table_columns, max_sessions=FLAGS.max_sessions,
                                        max_collection_files=FLAGS.max_collection_files,
                                        max_collection_bytes=FLAGS.max_collection_mb * 2**20)
        collection = _served_collection(web_collections)  # IndexError_, CollectionError: ValueErrors.
        qa = model_flags.load_table_qa()
        web = web_app.create_app(qa, limits, qa.name,
                                 fact_checker=web_app.fact_checker_loader(FLAGS.tabfact_model_dir, FLAGS.vocab_file),
                                 collection=collection)
        if FLAGS.warm_up:
            qa.warm_up()
    except (ValueError, OSError) as e:  # FileNotFoundError among them.
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    except KeyboardInterrupt:
        cli.fail(PROG, "interrupted before the server started", 130)
    web_app.run_server(web, FLAGS.host, FLAGS.port, FLAGS.access_log)


if __name__ == "__main__":  # python -m tapas_tf.commands.serve: the same as `tapas-tf serve`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
