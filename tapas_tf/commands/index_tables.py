"""Command line: index a collection of tables for search and for answers over the collection.

    tapas-tf index --tables=my_tables/ --index_dir=my_index
    tapas-tf index --tables=sqlite:///shop.db --index_dir=shop_index
    tapas-tf index --tables=wtq --patterns='csv/*.csv' --titles=titles.tsv --index_dir=wtq_index
    tapas-tf index --tables=my_tables/ --dense_model=my_retriever --index_dir=my_index

`--tables` is a folder of CSV/TSV files (read recursively; ids are paths relative to it), a SQLite
file or `sqlite:///FILE` (every table), or any SQLAlchemy URL (`pip install 'tapas-tf[sql]'` and
its driver). `--titles` is a TSV with the columns `table_id` and `title`; without one a table's
title is its file or table name. The index is BM25 over each table's title, header and cells
(`tapas_tf.retrieval.table_index`). The tables are embedded too, and the index also offers `dense`
and `hybrid` (the default), with the bundled retriever (a MiniLM dual encoder fine-tuned on training
questions, `tapas_tf.checkpoints.bundled`) or `--dense_model` (a dual-encoder directory: `tapas-tf
init-from-bert --target=retriever`, `tapas-tf train-retriever` or an imported Google retriever);
`--dense_model=none` builds BM25 alone.

Files that cannot be read (unreadable, empty, binary, not CSV) are skipped, counted and named in
INDEX_DIR/report.json, and the index is still built; the last line printed sums it up (one JSON
line with --json).
"""

import json
import sys
from typing import List, Optional

from absl import flags

import tapas_tf.cli as cli

PROG = "index"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("tables", None, "The collection: a folder of CSV/TSV files, a SQLite file, "
                        "sqlite:///FILE or a SQLAlchemy URL.")
    flags.DEFINE_string("index_dir", None, "Where to write the index.")
    flags.DEFINE_string("titles", None, "A TSV with the columns table_id and title.")
    flags.DEFINE_list("patterns", None, "A folder only: shell patterns of the table ids (paths relative to the "
                      "folder) to index, e.g. '*.csv'. Default: every .csv and .tsv file.")
    flags.DEFINE_integer("max_rows", 1000, "Rows per table read for its index entry (a table cut there is "
                         "counted; answers read it again whole).", lower_bound=1)
    flags.DEFINE_integer("max_cells", 5000, "Body cells per table in its retrieval text (what is cut is counted).",
                         lower_bound=0)
    flags.DEFINE_string("dense_model", None, "A dual-encoder model directory: embed the tables too (methods "
                        "dense and hybrid). Default: the bundled retriever where the installation has it; "
                        "'none' for BM25 alone.")
    flags.DEFINE_enum("default_method", None, ["bm25", "dense", "hybrid"], "The method search and ask use "
                      "when none is given (default: hybrid with a dense model, else bm25).")
    flags.DEFINE_enum("vector_index", "auto", ["auto", "exact", "faiss", "scann"], "The dense index: exact "
                      "search up to 50,000 tables with auto, FAISS above.")
    flags.DEFINE_string("embeddings", None, "Embedding shards of the tables by --dense_model (`tapas-tf "
                        "encode-tables`): used instead of embedding here.")
    flags.DEFINE_integer("dense_batch_size", 32, "Tables per call of the dense model.", lower_bound=1)
    flags.DEFINE_float("hybrid_dense_weight", None, "The dense ranking's weight in the hybrid's reciprocal-rank "
                       "fusion, BM25's being 1 (default: table_index.HYBRID_DENSE_WEIGHT, chosen on WTQ dev and "
                       "TabFact val; see docs/RETRIEVAL.md).")
    flags.DEFINE_float("hybrid_rrf_k", None, "The hybrid fusion's damping constant k (default: "
                       "table_index.HYBRID_RRF_K).")
    flags.DEFINE_boolean("progress_bar", True, "A progress bar on stderr.")
    flags.DEFINE_boolean("json", False, "Print the report as one JSON line.")


def _summary(report) -> str:
    collection = report.collection
    skipped = collection["skipped_by_reason"]
    parts = [f"indexed {report.tables:,} tables into {report.index_dir} ({', '.join(report.methods)}; "
             f"default {report.default_method}) in {report.seconds:.1f} s"]
    if skipped:
        parts.append("skipped " + ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
                     + " (named in report.json)")
    if collection["rows_truncated"]:
        parts.append(f"{collection['rows_truncated']} tables indexed by their first {FLAGS.max_rows} rows")
    if report.cells_dropped:
        parts.append(f"{report.tables_with_cells_dropped} tables indexed by their first {FLAGS.max_cells} cells")
    return "; ".join(parts)


def _fusion_flags() -> dict:
    """The hybrid's fusion settings given on the command line (the rest keep build_index's defaults)."""
    given = {"hybrid_dense_weight": FLAGS.hybrid_dense_weight, "hybrid_rrf_k": FLAGS.hybrid_rrf_k}
    return {name: value for name, value in given.items() if value is not None}


def _dense_model_dir() -> Optional[str]:
    """--dense_model, else the bundled retriever (None where the installation lacks it); None for 'none'."""
    if FLAGS.dense_model is not None:
        return None if FLAGS.dense_model.lower() == "none" else FLAGS.dense_model
    from tapas_tf.checkpoints.bundled import bundled_retriever_dir

    return bundled_retriever_dir()


def main(argv: List[str]) -> None:
    if argv[1:]:
        cli.fail(PROG, f"unexpected arguments: {' '.join(argv[1:])}", cli.USAGE_EXIT_CODE)
    for name in ("tables", "index_dir"):
        if not getattr(FLAGS, name):
            cli.fail(PROG, f"--{name} is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    from tapas_tf.retrieval.collection import open_collection
    from tapas_tf.retrieval.table_index import build_index

    cli.warnings_only_unless_asked()
    try:
        dense = None
        dense_model = _dense_model_dir()
        if dense_model:
            from tapas_tf.retrieval.dense import DenseRetriever

            dense = DenseRetriever.from_model_dir(dense_model, batch_size=FLAGS.dense_batch_size)
        collection = open_collection(FLAGS.tables, FLAGS.titles, FLAGS.max_rows, FLAGS.patterns)
        report = build_index(collection, FLAGS.index_dir, max_cells=FLAGS.max_cells,
                             progress=FLAGS.progress_bar, dense=dense, default_method=FLAGS.default_method,
                             vector_index_kind=FLAGS.vector_index, embeddings_dir=FLAGS.embeddings,
                             **_fusion_flags())
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(json.dumps(report.as_dict() | {"collection": {k: v for k, v in report.collection.items()
                                                         if k != "skipped"}}) if FLAGS.json else _summary(report))


if __name__ == "__main__":
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
