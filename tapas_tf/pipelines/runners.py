"""Choosing the Beam runner of a data job, and telling whether its steps run in this process."""

import logging
from typing import Optional

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions


# Beam's file sinks log every bundle at INFO ("*** WriteImpl min_shards undef ...", "Renamed 1
# shards ...", "Starting finalize_write ..."): nine lines a split that say nothing to a user.
FILE_SINK_LOGGERS = ("apache_beam.io.iobase", "apache_beam.io.filebasedsink")


def quiet_file_sinks() -> None:
    """Beam's file-sink chatter only at debug verbosity (a level the user chose is kept)."""
    for name in FILE_SINK_LOGGERS:
        sink_logger = logging.getLogger(name)
        if sink_logger.level == logging.NOTSET and logging.getLogger().level > logging.DEBUG:
            sink_logger.setLevel(logging.WARNING)


def default_runner(options: PipelineOptions):
    """The runner named by --runner, else Beam's in-process FnApiRunner.

    Beam's DirectRunner would first try to download the Prism runner binary,
    which fails on machines without internet; FnApiRunner is what it falls back
    to, and honours --direct_num_workers / --direct_running_mode.
    """
    quiet_file_sinks()
    if options.view_as(StandardOptions).runner:
        return None
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner()


def steps_run_elsewhere(options: PipelineOptions) -> Optional[str]:
    """Why the job's steps would run outside this process (what `--runner`, or
    `--direct_running_mode=multi_processing`, says), or None when they run in it.

    In it: `default_runner`'s FnApiRunner, in memory or on threads (multi_threading). A runner named
    by --runner may start other processes (DirectRunner may hand the job to Prism), so it counts as
    elsewhere.
    """
    runner = options.view_as(StandardOptions).runner
    if runner:
        return f"--runner={runner} may run the steps in other processes"
    if options.view_as(DirectOptions).direct_running_mode == "multi_processing":
        return "--direct_running_mode=multi_processing runs the steps in worker processes"
    return None
