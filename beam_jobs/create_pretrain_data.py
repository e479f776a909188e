"""Beam job: Wikipedia pages -> Interactions -> masked-LM pre-training examples (paper, section 3).

    python beam_jobs/create_pretrain_data.py --output_dir=out/pretrain \\
        --input_dumps='dumps/enwiki-*-pages-articles*.xml.bz2' \\
        --input_pages='wtq_pages/*/*.html.gz' [--exclude_tables=eval_tables.txt] \\
        [--stage=all|extract|examples] [--input_interactions='interactions.txtpb.gz'] \\
        [--runner=DataflowRunner --project=... --region=... --temp_location=gs://... \\
         --setup_file=./setup.py] [--direct_num_workers=2 --direct_running_mode=multi_processing]

Stages (`--stage`, default `all`, both in one pipeline):
- extract: dumps (`--input_dumps`) and rendered pages (`--input_pages`) -> Interactions written to
  OUTPUT_DIR/interactions/ as one-line text protos (`.txtpb.gz`, the format of Google's released
  corpus) or TFRecords (`--interactions_format=tfrecord`);
- examples: Interactions (those of extract, or `--input_interactions`, e.g. Google's released
  `interactions.txtpb.gz`) -> OUTPUT_DIR/tf_examples/{train,test}-SSSSS-of-NNNNN.tfrecord.
Then OUTPUT_DIR/pretrain_report.json with every counter. While it runs, the pages, interactions and
examples done so far are shown on stderr: a live line on a terminal, else a log line every 30 s
(--noprogress_bar: neither); only when the steps run in this process, not with --runner=... or
--direct_running_mode=multi_processing. Flags that this job does not define go to
Beam, if Beam's pipeline options know them. TensorFlow's C++ start-up lines are hidden unless
--verbosity=debug (`tapas_tf.cli`).
"""

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from typing import List, Optional, Sequence

from tapas_tf.cli import ArgumentParser, add_verbosity_flag, log_to_stderr, quiet_tensorflow

if __name__ == "__main__":
    quiet_tensorflow()  # First: TensorFlow reads TF_CPP_MIN_LOG_LEVEL once, when it loads.

import apache_beam as beam  # noqa: E402
from apache_beam.options.pipeline_options import (  # noqa: E402
    PipelineOptions, SetupOptions, StandardOptions, TestOptions)

from tapas_tf.data.paths import ensure_writable_dir  # noqa: E402
from tapas_tf.data.protos import interaction_pb2  # noqa: E402
from tapas_tf.features.pretrain_config import PretrainConfig  # noqa: E402
from tapas_tf.pipelines import beam_options, pretrain_data, progress, reports, runners  # noqa: E402

REPORT_FILE = "pretrain_report.json"
STAGES = ("all", "extract", "examples")
# What the progress line counts, by stage; the first is the one whose rate it shows.
PROGRESS_UNITS = {"all": ("pages", "interactions", "examples"), "extract": ("pages", "interactions"),
                  "examples": ("interactions", "examples")}


def build_pipeline(root, args: argparse.Namespace, config: Optional[PretrainConfig],
                   progress_key: Optional[str] = None) -> None:
    """Adds the stages of `args.stage` to `root`; with `progress_key` (a `progress.Progress.key`),
    the pages read, the interactions made or read and the examples written are reported to it."""
    output_dir = args.output_dir
    if args.stage in ("all", "extract"):
        interactions = root | "Extract" >> pretrain_data.ExtractTables(
            args.input_dumps, args.input_pages, args.exclude_tables, args.streams_per_range, progress_key)
        prefix = os.path.join(output_dir, "interactions", "interactions")
        if args.interactions_format == "txtpb":
            pretrain_data.write_text_protos(interactions, prefix)
        else:
            _ = interactions | "WriteInteractions" >> beam.io.WriteToTFRecord(
                prefix, file_name_suffix=".tfrecord", coder=beam.coders.ProtoCoder(interaction_pb2.Interaction))
    else:
        interactions = root | "ReadInteractions" >> pretrain_data.ReadInteractionFiles(args.input_interactions)
    if progress_key is not None:
        interactions = interactions | "Progress" >> progress.CountItems(progress_key,
                                                                        pretrain_data.progress_counts)
    if args.stage in ("all", "examples"):
        examples = interactions | "Examples" >> pretrain_data.ToPretrainExamples(config, progress_key)
        for split in pretrain_data.SPLITS:
            _ = getattr(examples, split) | f"Write/{split}" >> beam.io.WriteToTFRecord(
                os.path.join(output_dir, "tf_examples", split), file_name_suffix=".tfrecord")


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


def run(args: argparse.Namespace, pipeline_args: Sequence[str],
        progress_settings: Optional[progress.ProgressSettings] = None) -> dict:
    """Runs the job and writes OUTPUT_DIR/pretrain_report.json; returns the report.

    `progress_settings`: show the items done while the job runs (when its steps run in this
    process; see `tapas_tf.pipelines.progress`); None shows nothing."""
    _check_args(args)
    config = pretrain_config(args) if args.stage in ("all", "examples") else None
    options = PipelineOptions(list(pipeline_args))
    package_for_workers(options)
    if not args.output_dir.startswith("gs://"):
        ensure_writable_dir(args.output_dir, "--output_dir")
    meter = progress.for_pipeline(progress_settings, options, "create_pretrain_data",
                                  PROGRESS_UNITS[args.stage])
    pipeline = beam.Pipeline(runner=runners.default_runner(options), options=options)
    build_pipeline(pipeline, args, config, progress_key=meter.key if meter else None)
    with meter or contextlib.nullcontext():
        result = pipeline.run()
        result.wait_until_finish()
    if options.view_as(TestOptions).dry_run:
        # The runner translated the pipeline (for Dataflow: the job graph) and submitted nothing.
        return {"stage": args.stage, "dry_run": True, "job": getattr(result, "job", None), "counters": {},
                "extra_packages": options.view_as(SetupOptions).extra_packages}
    report = {"stage": args.stage, "inputs": {"dumps": args.input_dumps, "pages": args.input_pages,
                                              "interactions": args.input_interactions},
              "config": None if config is None else config.__dict__, "counters": reports.counter_values(result)}
    with open(os.path.join(args.output_dir, REPORT_FILE), "w") as f:
        json.dump(report, f, indent=2)
    return report


def pretrain_config(args: argparse.Namespace) -> PretrainConfig:
    from tapas_tf.features.vocab import resolve_vocab_file

    return PretrainConfig(
        vocab_file=resolve_vocab_file(args.vocab_file), max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq, masked_lm_prob=args.masked_lm_prob,
        min_snippet_pieces=args.min_snippet_pieces, max_snippet_pieces=args.max_snippet_pieces,
        dupe_factor=args.dupe_factor, random_seed=args.random_seed, test_fraction=args.test_fraction)


def _check_args(args: argparse.Namespace) -> None:
    if args.stage in ("all", "extract") and not (args.input_dumps or args.input_pages):
        raise ValueError(f"--stage={args.stage} needs --input_dumps or --input_pages")
    if args.stage == "examples" and not args.input_interactions:
        raise ValueError("--stage=examples needs --input_interactions")
    if args.stage != "examples" and args.input_interactions:
        raise ValueError("--input_interactions is read by --stage=examples only")
    if args.exclude_tables and not os.path.exists(args.exclude_tables) and "://" not in args.exclude_tables:
        raise FileNotFoundError(f"--exclude_tables={args.exclude_tables}: no such file")


def parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The job's flags; what it leaves are Beam's (`parse_known_args`). `prog`: the program's name
    (default this script's; `tapas-tf create-pretrain-data` for the installed command)."""
    description = __doc__.replace("python beam_jobs/create_pretrain_data.py", prog) if prog else __doc__
    p = ArgumentParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter,
                       other_flags=beam_options.known_beam_flags)  # A mistyped flag: one line, the nearest.
    p.add_argument("--output_dir", required=True)
    p.add_argument("--stage", choices=STAGES, default="all")
    p.add_argument("--input_dumps", action="append", default=[], help="Glob of pages-articles dumps (repeatable).")
    p.add_argument("--input_pages", action="append", default=[], help="Glob of rendered pages (repeatable).")
    p.add_argument("--input_interactions", action="append", default=[],
                   help="Glob of interaction files for --stage=examples (.txtpb[.gz] or TFRecord).")
    p.add_argument("--exclude_tables", default=None,
                   help="File of table ids, WTQ (csv/2xx-csv/N.csv) or SQA (table_csv/2xx_N.csv) names, "
                        "or 'title:Page title' lines, left out of the interactions.")
    p.add_argument("--streams_per_range", type=int, default=pretrain_data.STREAMS_PER_RANGE,
                   help="bz2 streams (about 100 pages each) of a multistream dump read by one worker.")
    p.add_argument("--interactions_format", choices=("txtpb", "tfrecord"), default="txtpb")
    p.add_argument("--vocab_file", default=None, help="WordPiece vocabulary with [EMPTY]; default BERT's.")
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--masked_lm_prob", type=float, default=0.15)
    p.add_argument("--min_snippet_pieces", type=int, default=8)
    p.add_argument("--max_snippet_pieces", type=int, default=16)
    p.add_argument("--dupe_factor", type=int, default=10)
    p.add_argument("--random_seed", type=int, default=12345)
    p.add_argument("--test_fraction", type=float, default=0.01)
    progress.add_progress_flags(p, "pages, interactions and examples")
    add_verbosity_flag(p)
    return p


def main(argv: Optional[List[str]] = None, prog: Optional[str] = None) -> None:
    job_parser = parser(prog)
    args, pipeline_args = job_parser.parse_known_args(argv)
    try:
        beam_options.check_pipeline_args(pipeline_args, job_parser._option_string_actions)
    except beam_options.PipelineArgsError as e:
        job_parser.error(str(e))
    log_to_stderr(args.verbosity)
    try:
        report = run(args, pipeline_args,
                     progress_settings=progress.ProgressSettings() if args.progress_bar else None)
    except (ValueError, OSError) as e:
        job_parser.exit(1, f"{job_parser.prog}: error: {e}\n")
    print(json.dumps(report["counters"], indent=2))


if __name__ == "__main__":
    main()
