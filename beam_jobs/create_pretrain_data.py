"""Beam job: Wikipedia pages -> Interactions -> masked-LM pre-training examples (paper, section 3).

    job = PretrainJob(output_dir="out/pretrain", input_dumps=("dumps/enwiki-*-pages-articles*.xml.bz2",))
    report = run(job, PretrainConfig(vocab_file=...), pipeline_args=["--direct_num_workers=2"])

The job's command line is `tapas-tf create-pretrain-data` (`tapas_tf.commands.create_pretrain_data`):
its flags are the fields of `PretrainJob` and `PretrainConfig`, and what it does not define goes to
Beam's `PipelineOptions` (`--runner=DataflowRunner --project=...`, `--direct_num_workers=2`).

Stages (`PretrainJob.stage`, default `all`, both in one pipeline):
- extract: dumps (`input_dumps`) and rendered pages (`input_pages`) -> Interactions written to
  OUTPUT_DIR/interactions/ as one-line text protos (`.txtpb.gz`, the format of Google's released
  corpus) or TFRecords (`interactions_format="tfrecord"`);
- examples: Interactions (those of extract, or `input_interactions`, e.g. Google's released
  `interactions.txtpb.gz`) -> OUTPUT_DIR/tf_examples/{train,test}-SSSSS-of-NNNNN.tfrecord.
Then OUTPUT_DIR/pretrain_report.json with every counter.

A file that cannot be read to its end (a truncated or damaged bz2 or gzip stream, broken XML, a
page that is not UTF-8, a TFRecord cut short) keeps what was read before the damage and is listed
in OUTPUT_DIR/failures/files.tsv and in the report's `file_failures`, with the byte or line where it
broke off; the command line then exits non-zero (`--allow_file_failures` to accept them).
"""

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
from typing import Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions, StandardOptions, TestOptions

from tapas_tf.config_fields import option
from tapas_tf.data.paths import ensure_writable_dir
from tapas_tf.data import table_manifest, training_tables
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.pretrain_config import PretrainConfig
from tapas_tf.pipelines import pretrain_data, progress, reports, runners, training_rule

REPORT_FILE = "pretrain_report.json"
FILE_FAILURES_FILE = os.path.join("failures", "files.tsv")
STAGES = ("all", "extract", "examples")
# What the progress line counts, by stage; the first is the one whose rate it shows.
PROGRESS_UNITS = {"all": ("pages", "interactions", "examples"), "extract": ("pages", "interactions"),
                  "examples": ("interactions", "examples")}


@dataclasses.dataclass(frozen=True)
class PretrainJob:
    """What the job reads and writes, and which stages run (the help texts are the flags')."""

    output_dir: str = option(help="Where interactions/, tf_examples/ and pretrain_report.json go "
                                        "(a local path or gs://).")
    stage: str = option("all", "all: extract, then examples; extract: pages -> interactions; "
                                     "examples: interactions -> examples.", choices=STAGES)
    input_dumps: Tuple[str, ...] = option((), "Glob of pages-articles dumps.")
    input_pages: Tuple[str, ...] = option((), "Glob of rendered pages (.html, .html.gz).")
    input_interactions: Tuple[str, ...] = option(
        (), "Glob of interaction files for --stage=examples (.txtpb[.gz] or TFRecord).")
    exclude_tables: Optional[str] = option(
        None, "File of table ids, WTQ (csv/2xx-csv/N.csv) or SQA (table_csv/2xx_N.csv) names, or 'title:Page "
              "title' lines, left out of the interactions.")
    streams_per_range: int = option(pretrain_data.STREAMS_PER_RANGE, "bz2 streams (about 100 pages each) "
                                                                            "of a multistream dump read by one worker.")
    interactions_format: str = option("txtpb", "How extract writes interactions.", choices=("txtpb", "tfrecord"))
    wtq_release: Optional[str] = option(
        None, "WikiTableQuestions release (training.tsv, csv/): with it, only its training tables and pages "
              "that hold no other WTQ table are used (the training-data rule).")
    sqa_release: Optional[str] = option(None, "SQA release (train.tsv, random-split-1-dev.tsv), for the rule.")
    tabfact_release: Optional[str] = option(
        None, "TabFact release (train_examples.json, val_examples.json, all_csv/): only its train tables, and "
              "no page whose title is the caption of one of its evaluation tables.")
    wtq_pages: Optional[str] = option(None, "WTQ's page files (2xx-page/N.json), naming each WTQ table's page.")
    allow_file_failures: bool = option(
        False, "Exit 0 even when an input file could not be read to its end (a truncated or damaged bz2 or "
               "gzip stream, broken XML, a page that is not UTF-8); it is listed in failures/files.tsv either way.")

    def __post_init__(self):
        if self.stage in ("all", "extract") and not (self.input_dumps or self.input_pages):
            raise ValueError(f"--stage={self.stage} needs --input_dumps or --input_pages")
        if self.stage == "examples" and not self.input_interactions:
            raise ValueError("--stage=examples needs --input_interactions")
        if self.stage != "examples" and self.input_interactions:
            raise ValueError("--input_interactions is read by --stage=examples only")
        if (self.sqa_release or self.wtq_pages) and not self.wtq_release:
            raise ValueError("--sqa_release and --wtq_pages are read with --wtq_release (the rule decides SQA's "
                             "and the pages' tables by WikiTableQuestions' training.tsv)")
        for name in ("wtq_release", "sqa_release", "tabfact_release", "wtq_pages"):
            path = getattr(self, name)
            if path and not os.path.isdir(path):
                raise FileNotFoundError(f"--{name}={path}: no such directory")
        if self.exclude_tables and not os.path.exists(self.exclude_tables) and "://" not in self.exclude_tables:
            raise FileNotFoundError(f"--exclude_tables={self.exclude_tables}: no such file")

    @property
    def releases(self) -> Optional[training_tables.Releases]:
        """The releases the training-data rule is built from; None when none is given."""
        if not (self.wtq_release or self.sqa_release or self.tabfact_release or self.wtq_pages):
            return None
        return training_tables.Releases(wtq_dir=self.wtq_release, sqa_dir=self.sqa_release,
                                        tabfact_dir=self.tabfact_release, wtq_pages_dir=self.wtq_pages)


def build_pipeline(root, job: PretrainJob, config: Optional[PretrainConfig],
                   progress_key: Optional[str] = None,
                   rule: Optional[training_tables.TrainingTableRule] = None) -> None:
    """Adds the stages of `job.stage` to `root`; with `progress_key` (a `progress.Progress.key`),
    the pages read, the interactions made or read and the examples written are reported to it.
    With `rule`, only the tables it keeps are written or made into examples, and their manifest
    is OUTPUT_DIR/training_tables.txt.gz."""
    output_dir = job.output_dir
    failures_path = os.path.join(output_dir, FILE_FAILURES_FILE)
    extracting = job.stage in ("all", "extract")
    if extracting:
        interactions = root | "Extract" >> pretrain_data.ExtractTables(
            job.input_dumps, job.input_pages, job.exclude_tables, job.streams_per_range, progress_key,
            failures_path=failures_path)
    else:
        interactions = root | "ReadInteractions" >> pretrain_data.ReadInteractionFiles(
            job.input_interactions, failures_path=failures_path)
    interactions = _apply_rule(interactions, rule, output_dir)
    if extracting:
        prefix = os.path.join(output_dir, "interactions", "interactions")
        if job.interactions_format == "txtpb":
            pretrain_data.write_text_protos(interactions, prefix)
        else:
            _ = interactions | "WriteInteractions" >> beam.io.WriteToTFRecord(
                prefix, file_name_suffix=".tfrecord", coder=beam.coders.ProtoCoder(interaction_pb2.Interaction))
    if progress_key is not None:
        interactions = interactions | "Progress" >> progress.CountItems(progress_key,
                                                                        pretrain_data.progress_counts)
    if job.stage in ("all", "examples"):
        examples = interactions | "Examples" >> pretrain_data.ToPretrainExamples(config, progress_key)
        for split in pretrain_data.SPLITS:
            _ = getattr(examples, split) | f"Write/{split}" >> beam.io.WriteToTFRecord(
                os.path.join(output_dir, "tf_examples", split), file_name_suffix=".tfrecord")


def _apply_rule(interactions, rule: Optional[training_tables.TrainingTableRule], output_dir: str):
    if rule is None:
        return interactions
    prefix = os.path.join(output_dir, table_manifest.MANIFEST_FILE[:-len(".txt.gz")])
    return interactions | "TrainingRule" >> training_rule.KeepTrainingTables(rule, manifest_prefix=prefix)


def training_rule_for(job: PretrainJob) -> Optional[training_tables.TrainingTableRule]:
    """The rule over the job's releases, or None (with a warning) when none is given: then no table
    can be shown to be a training table, and evaluation tables may be in the data."""
    releases = job.releases
    if releases is None:
        logging.warning("No release given (--wtq_release, --sqa_release, --tabfact_release, --wtq_pages): the "
                        "training-data rule is not applied, and tables of evaluation splits may be in the data")
        return None
    return training_tables.TrainingTableRule.from_releases(releases)


def package_for_workers(options: PipelineOptions) -> Optional[str]:
    """For a remote runner with nothing staged, builds this project's wheel and stages it.

    Dataflow workers import tapas_tf to run the transforms; `--extra_package` or `--setup_file`
    given by the user wins. Returns the wheel's path, or None when nothing was done.
    """
    runner = (options.view_as(StandardOptions).runner or "").lower()
    setup = options.view_as(SetupOptions)
    if "dataflow" not in runner or setup.extra_packages or setup.setup_file:
        return None
    project_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.exists(os.path.join(project_root, "pyproject.toml")):
        logging.warning("Not in a source checkout: pass --extra_package=<tapas_tf wheel> for the workers")
        return None
    wheel_dir = tempfile.mkdtemp(prefix="tapas_tf_wheel_")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", wheel_dir, project_root], check=True)
    (wheel,) = [os.path.join(wheel_dir, name) for name in os.listdir(wheel_dir) if name.endswith(".whl")]
    setup.extra_packages = [wheel]
    return wheel


def run(job: PretrainJob, config: Optional[PretrainConfig], pipeline_args: Sequence[str],
        progress_settings: Optional[progress.ProgressSettings] = None) -> dict:
    """Runs the job and writes OUTPUT_DIR/pretrain_report.json; returns the report.

    `config`: how examples are made (None for --stage=extract, which makes none).
    `progress_settings`: show the items done while the job runs (when its steps run in this
    process; see `tapas_tf.pipelines.progress`); None shows nothing."""
    if job.stage in ("all", "examples") and config is None:
        raise ValueError(f"--stage={job.stage} makes examples and needs a PretrainConfig")
    options = PipelineOptions(list(pipeline_args))
    package_for_workers(options)
    if not job.output_dir.startswith("gs://"):
        ensure_writable_dir(job.output_dir, "--output_dir")
    meter = progress.for_pipeline(progress_settings, options, "create_pretrain_data",
                                  PROGRESS_UNITS[job.stage])
    pipeline = beam.Pipeline(runner=runners.default_runner(options), options=options)
    rule = training_rule_for(job)
    build_pipeline(pipeline, job, config, progress_key=meter.key if meter else None, rule=rule)
    with meter or contextlib.nullcontext():
        result = pipeline.run()
        result.wait_until_finish()
    if options.view_as(TestOptions).dry_run:
        # The runner translated the pipeline (for Dataflow: the job graph) and submitted nothing.
        return {"stage": job.stage, "dry_run": True, "job": getattr(result, "job", None), "counters": {},
                "extra_packages": options.view_as(SetupOptions).extra_packages}
    counters = reports.counter_values(result)
    report = {"stage": job.stage, "inputs": {"dumps": job.input_dumps, "pages": job.input_pages,
                                              "interactions": job.input_interactions},
              "config": None if config is None else config.__dict__, "counters": counters,
              "file_failures": read_file_failures(job.output_dir),
              "training_rule": _rule_report(job, rule, counters)}
    with open(os.path.join(job.output_dir, REPORT_FILE), "w") as f:
        json.dump(report, f, indent=2)
    return report


def _rule_report(job: PretrainJob, rule, counters: dict) -> dict:
    """Whether the rule was applied, over which releases, what it kept and left out by reason."""
    if rule is None:
        return {"applied": False}
    prefix = "tables_rule_excluded_"
    return {"applied": True, "releases": dataclasses.asdict(job.releases),
            "kept": counters.get("tables_rule_kept", 0),
            "excluded_by_reason": {k[len(prefix):]: v for k, v in sorted(counters.items()) if k.startswith(prefix)},
            "manifest": table_manifest.MANIFEST_FILE}


def read_file_failures(output_dir: str) -> list:
    """The files of the run that could not be read to their end: [{path, reason, message}]."""
    path = os.path.join(output_dir, FILE_FAILURES_FILE)
    if not FileSystems.exists(path):
        return []
    with FileSystems.open(path, compression_type="uncompressed") as f:
        lines = f.read().decode("utf-8").splitlines()
    return [pretrain_data.parse_failure_line(line) for line in lines if line.strip()]


if __name__ == "__main__":  # python beam_jobs/create_pretrain_data.py: the job's command line, as
    # `tapas-tf create-pretrain-data` runs it (the same flags; Beam's pipeline options pass through).
    from tapas_tf.cli import runner

    sys.exit(runner.run("create-pretrain-data", sys.argv[1:], prog=os.path.basename(sys.argv[0])))
