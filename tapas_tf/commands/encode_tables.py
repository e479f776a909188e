"""Command line: embed every table of a collection with a model, into shards a vector index is built from (a Beam job).

    tapas-tf encode-tables --tables=my_tables/ --model_dir=model_dirs/dual --output_dir=out/embeddings
    tapas-tf encode-tables --tables=sqlite:///shop.db --titles=titles.tsv --model_dir=... --output_dir=...
    tapas-tf encode-tables --interactions='out/pretrain/interactions/*.tfrecord' \\
        --model_dir=model_dirs/dual --output_dir=gs://bucket/embeddings --num_shards=256 \\
        [--runner=DataflowRunner --project=... --region=... --temp_location=gs://...] \\
        [--direct_num_workers=2 --direct_running_mode=multi_processing]

The input is a collection (--tables: a folder of CSV/TSV files, a SQLite file or sqlite:///FILE, a
SQLAlchemy URL; with --titles and --patterns as `tapas-tf index` takes them) or interaction files
(--interactions: TFRecords of Interactions, or .txtpb[.gz], as the Wikipedia job and create-data
write them; a table's id is its table_id, its title the document title). --model_dir holds
embedder.json, which names the embedder's kind (`tapas_tf.retrieval.embedder`); each worker loads
the model once and embeds --batch_size tables per call. A batch that fails is embedded again table
by table, so only the tables that fail alone are skipped (`embedding_failed`).

Writes to --output_dir: embeddings-SSSSS-of-NNNNN.tfrecord (one tf.train.Example per table:
table_id, title, embedding), embeddings.json (model id, dimension, count, shards, skips by reason),
failures.tsv (each table not embedded, or file not read to its end, with its reason) and
encode_report.json; the last line printed sums it up (the report as JSON with --json). Build the
index with `tapas_tf.retrieval.embedding_shards.build_vector_index_from_shards`.

Exits 1 when an input file could not be read to its end (--allow_file_failures: 0; it is in
failures.tsv either way) or the counts do not add up. Flags that this job does not define go to
Beam, if Beam's pipeline options know them. The job itself: `tapas_tf.beam_jobs.encode_tables`.
"""

import json
from typing import List

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.pipelines import beam_options, progress

PROG = "encode-tables"
FLAGS = flags.FLAGS


def define_flags() -> None:
    flags.DEFINE_string("tables", None, "The collection: a folder of CSV/TSV files, a SQLite file, "
                        "sqlite:///FILE or a SQLAlchemy URL (or give --interactions).")
    flags.DEFINE_string("titles", None, "With --tables: a TSV with the columns table_id and title.")
    flags.DEFINE_list("patterns", None, "With --tables, a folder only: shell patterns of the table ids (paths "
                      "relative to the folder) to encode, e.g. '*.csv'. Default: every .csv and .tsv file.")
    flags.DEFINE_multi_string("interactions", None, "Instead of --tables: a glob of interaction files (TFRecords "
                              "of Interactions, or .txtpb[.gz]; repeatable), e.g. the Wikipedia job's shards.")
    flags.DEFINE_string("model_dir", None, "The model: a directory holding embedder.json.")
    flags.DEFINE_string("output_dir", None, "Where the shards, embeddings.json, failures.tsv and "
                        "encode_report.json go (a local path or gs://).")
    flags.DEFINE_integer("batch_size", 32, "Tables per call of the model.", lower_bound=1)
    flags.DEFINE_integer("num_shards", 0, "Shard files written; 0: the runner chooses.", lower_bound=0)
    flags.DEFINE_integer("max_rows", 1000, "Rows per table read for its embedding (a table cut there is "
                         "counted).", lower_bound=1)
    flags.DEFINE_bool("allow_file_failures", False, "Exit 0 even when an input file could not be read to its "
                      "end (it is in failures.tsv either way).")
    flags.DEFINE_bool("progress_bar", True, "Show the tables read and embedded while the job runs: a live line "
                      "on a terminal, else a log line every 30 s.")
    flags.DEFINE_bool("json", False, "Print the report as JSON instead of the summary line.")
    for name in ("model_dir", "output_dir"):
        flags.mark_flag_as_required(name)


def _source():
    from tapas_tf.retrieval import collection_encoding

    if bool(FLAGS.tables) == bool(FLAGS.interactions):
        cli.fail(PROG, "give one input: --tables=DIR|sqlite:///FILE|URL or --interactions=GLOB", cli.USAGE_EXIT_CODE)
    if FLAGS.interactions:
        if FLAGS.titles or FLAGS.patterns:
            cli.fail(PROG, "--titles and --patterns go with --tables (an interaction's table has its title)",
                     cli.USAGE_EXIT_CODE)
        return collection_encoding.InteractionSource(FLAGS.interactions, FLAGS.max_rows)
    return collection_encoding.CollectionSource(FLAGS.tables, FLAGS.titles, FLAGS.max_rows, FLAGS.patterns)


def main(argv: List[str]) -> None:
    pipeline_args = argv[1:]  # What our flags did not take: Beam's.
    try:
        beam_options.check_pipeline_args(pipeline_args, other_flags=cli.absl_flag_names())
    except beam_options.PipelineArgsError as e:
        cli.fail(PROG, str(e), cli.USAGE_EXIT_CODE)
    from tapas_tf.beam_jobs import encode_tables as job
    from tapas_tf.retrieval import collection_encoding

    source = _source()
    try:
        encoder = collection_encoding.TableEncoder.from_model_dir(FLAGS.model_dir)
        encode_job = job.EncodeJob(FLAGS.output_dir, FLAGS.batch_size, FLAGS.num_shards)
        report = job.run(encode_job, source, encoder, pipeline_args,
                         progress_settings=progress.ProgressSettings() if FLAGS.progress_bar else None)
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    if report.get("dry_run"):
        print(f"Dry run: the job graph was translated and nothing was submitted or written; staged for the "
              f"workers: {', '.join(report.get('extra_packages') or []) or 'nothing'}")
        return
    print(json.dumps(report, indent=2) if FLAGS.json else job.summary_line(report))
    failures = report["file_failures"]
    if failures and not FLAGS.allow_file_failures:
        listed = "; ".join(f["message"] for f in failures[:3]) + ("; ..." if len(failures) > 3 else "")
        cli.fail(PROG, f"{len(failures)} input file(s) could not be read to the end (their tables before the damage "
                 f"were encoded; all are in {report['failures_file']}; --allow_file_failures to accept them): "
                 f"{listed}", cli.ERROR_EXIT_CODE)
    if not report["tables"]["adds_up"] and not failures:
        cli.fail(PROG, f"the counts do not add up: {json.dumps(report['tables'])} (see "
                 f"{job.REPORT_FILE} in --output_dir)", cli.ERROR_EXIT_CODE)


if __name__ == "__main__":  # python -m tapas_tf.commands.encode_tables: the same as `tapas-tf encode-tables`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
