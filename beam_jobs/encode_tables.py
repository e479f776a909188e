"""Beam job: a table collection -> embedding shards that a vector index is built from.

    source = collection_encoding.CollectionSource("my_tables/")         # or InteractionSource([...])
    encoder = collection_encoding.TableEncoder.from_model_dir("model_dirs/dual")
    report = run(EncodeJob(output_dir="out/embeddings"), source, encoder, ["--direct_num_workers=2"])

The job's command line is `tapas-tf encode-tables` (`tapas_tf.commands.encode_tables`), which
builds the source and the encoder from its flags (this room may not import retrieval, whose
objects they are) and hands what it does not define to Beam's `PipelineOptions`
(`--runner=DataflowRunner --project=...`, `--direct_num_workers=2`).

Writes into OUTPUT_DIR (a local path or gs://):
- `embeddings-SSSSS-of-NNNNN.tfrecord`: one tf.train.Example per table (`table_id`, `title`,
  `embedding`), `--num_shards` files (0: the runner chooses);
- `embeddings.json`, last, once every shard is written (`tapas_tf.retrieval.embedding_shards`);
- `failures.tsv`: every table not embedded, with its id, source, reason and message, and every
  file not read to its end (`lost` = `file`);
- `encode_report.json`: the counters, the tables by what became of them, whether they add up.
"""

import contextlib
import dataclasses
import json
import logging
import os
from typing import Any, Dict, List, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions, TestOptions

from tapas_tf.beam_jobs.create_pretrain_data import package_for_workers
from tapas_tf.data.paths import ensure_writable_dir
from tapas_tf.pipelines import encode_tables, progress, reports, runners

REPORT_FILE = "encode_report.json"
METADATA_FILE = "embeddings.json"  # embedding_shards.METADATA_FILE, which this room cannot import.


@dataclasses.dataclass(frozen=True)
class EncodeJob:
    """Where the shards go and how the tables are batched; the input is the source given to `run`."""

    output_dir: str
    batch_size: int = 32
    num_shards: int = 0

    def __post_init__(self):
        if self.batch_size < 1:
            raise ValueError(f"--batch_size must be at least 1, got {self.batch_size}")
        if self.num_shards < 0:
            raise ValueError(f"--num_shards must be 0 (the runner chooses) or more, got {self.num_shards}")


def _path(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}" if "://" in directory else os.path.join(directory, name)


def failures_path(job: EncodeJob, encoder: Any) -> str:
    return _path(job.output_dir, encoder.failures_file)


def build_pipeline(root, job: EncodeJob, source: Any, encoder: Any, progress_key: Optional[str] = None) -> None:
    """Adds read -> embed -> one per id -> shards and embeddings.json, and the failures file, to `root`."""
    read = root | "ReadTables" >> encode_tables.ReadTables(source, progress_key)
    embedded = read.tables | "EmbedTables" >> encode_tables.EmbedTables(encoder, job.batch_size, progress_key)
    kept = embedded.records | "OnePerTable" >> encode_tables.KeepOnePerTable()
    failed = (read.failed, embedded.failed, kept.failed) | "AllFailures" >> beam.Flatten()
    encode_tables.write_failures(failed, failures_path(job, encoder))
    _ = kept.records | "WriteEmbeddings" >> encode_tables.WriteEmbeddingShards(
        encoder, job.output_dir, failed, job.num_shards, extra={"inputs": source.describe()})


def _remove_stale_metadata(output_dir: str) -> None:
    """An embeddings.json of an earlier run would describe shards this run overwrites: remove it
    first, so a run that fails leaves a directory the reader refuses rather than one it misreads."""
    path = _path(output_dir, METADATA_FILE)
    if FileSystems.exists(path):
        FileSystems.delete([path])


def _read_json(path: str) -> Optional[Dict[str, Any]]:
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return json.loads(f.read().decode("utf-8"))


def _file_failures(path: str) -> List[Dict[str, str]]:
    """The rows of the failures file that are whole files not read to their end."""
    if not FileSystems.exists(path):
        return []
    with FileSystems.open(path, compression_type="uncompressed") as f:
        lines = f.read().decode("utf-8").splitlines()[1:]  # After the header.
    rows = [encode_tables.parse_failure_line(line) for line in lines if line.strip()]
    return [row for row in rows if row["lost"] == encode_tables.FILE]


def _by_prefix(counters: Dict[str, int], prefix: str) -> Dict[str, int]:
    return {name[len(prefix):]: value for name, value in sorted(counters.items()) if name.startswith(prefix) and value}


def tables_report(counters: Dict[str, int], metadata: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """What became of the input tables, from the counters; `adds_up` when every one is accounted for
    and embeddings.json counts what the job embedded."""
    skipped = _by_prefix(counters, "tables_skipped_")
    files_failed = _by_prefix(counters, "files_failed_")
    seen, embedded = counters.get("tables_seen", 0), counters.get("tables_embedded", 0)
    repeated = counters.get("tables_repeated", 0)
    adds_up = (seen == embedded + repeated + sum(skipped.values()) and not files_failed
               and metadata is not None and metadata.get("count") == embedded)
    return {"seen": seen, "read": counters.get("tables_read", 0), "embedded": embedded, "repeated": repeated,
            "skipped_by_reason": skipped, "skipped": sum(skipped.values()),
            "rows_truncated": counters.get("tables_rows_truncated", 0), "files_failed": files_failed,
            "adds_up": adds_up}


def summary_line(report: Dict[str, Any]) -> str:
    """`embedded 3 of 5 tables -> OUT (2 shards, model m, d 16); skipped {...} (named in failures.tsv)`."""
    tables = report["tables"]
    shards = len((report.get("metadata") or {}).get("shards") or [])
    line = (f"embedded {tables['embedded']:,} of {tables['seen']:,} tables -> {report['output_dir']} "
            f"({shards} shard{'' if shards == 1 else 's'}, model {report['model']['model_id']}, "
            f"d {report['model']['dimension']})")
    if tables["repeated"]:
        line += f"; {tables['repeated']:,} repeats of a table embedded once"
    if tables["skipped_by_reason"]:
        line += f"; skipped {json.dumps(tables['skipped_by_reason'])}"
    if tables["files_failed"]:
        line += f"; files not read to their end {json.dumps(tables['files_failed'])}"
    if tables["skipped_by_reason"] or tables["files_failed"]:
        line += f" (named in {os.path.basename(report['failures_file'])})"
    if not tables["adds_up"]:
        line += " (THE COUNTS DO NOT ADD UP: see encode_report.json)"
    return line


def run(job: EncodeJob, source: Any, encoder: Any, pipeline_args: Sequence[str] = (),
        progress_settings: Optional[progress.ProgressSettings] = None) -> Dict[str, Any]:
    """Runs the job and writes OUTPUT_DIR/encode_report.json; returns the report.

    `source` and `encoder`: see `tapas_tf.pipelines.encode_tables` (the objects of
    `tapas_tf.retrieval.collection_encoding`). The source is listed here first, so that a bad spec or a
    pattern matching nothing fails before the job starts. `progress_settings`: show the tables
    read and embedded while the job runs (when its steps run in this process); None shows nothing.
    """
    options = PipelineOptions(list(pipeline_args))
    package_for_workers(options)
    listed = len(source.list_keys())
    dry_run = options.view_as(TestOptions).dry_run  # Translates the job graph; touches no output.
    if not job.output_dir.startswith("gs://"):
        ensure_writable_dir(job.output_dir, "--output_dir")
    if not dry_run:
        _remove_stale_metadata(job.output_dir)
    meter = progress.for_pipeline(progress_settings, options, "encode_tables", encode_tables.PROGRESS_UNITS)
    pipeline = beam.Pipeline(runner=runners.default_runner(options), options=options)
    build_pipeline(pipeline, job, source, encoder, progress_key=meter.key if meter else None)
    with meter or contextlib.nullcontext():
        result = pipeline.run()
        result.wait_until_finish()
    if dry_run:
        return {"dry_run": True, "job": getattr(result, "job", None), "counters": {},
                "extra_packages": options.view_as(SetupOptions).extra_packages}
    counters = reports.counter_values(result)
    metadata = _read_json(_path(job.output_dir, METADATA_FILE))
    report = {"inputs": source.describe(), f"{source.key_unit}_listed_at_start": listed,
              "model": encoder.describe(), "output_dir": job.output_dir, "batch_size": job.batch_size,
              "num_shards": job.num_shards, "counters": counters, "tables": tables_report(counters, metadata),
              "failures_file": failures_path(job, encoder),
              "file_failures": _file_failures(failures_path(job, encoder)), "metadata": metadata}
    with FileSystems.create(_path(job.output_dir, REPORT_FILE)) as f:
        f.write(json.dumps(report, indent=2).encode("utf-8"))
    if report["tables"]["adds_up"]:
        logging.info("encode_tables: %s", summary_line(report))
    else:
        logging.warning("encode_tables: %s", summary_line(report))
    return report


if __name__ == "__main__":  # python beam_jobs/encode_tables.py: the job's command line, as `tapas-tf
    # encode-tables` runs it (the same flags; Beam's pipeline options pass through).
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run("encode-tables", sys.argv[1:], prog=os.path.basename(sys.argv[0])))
