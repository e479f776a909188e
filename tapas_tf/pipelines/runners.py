"""Choosing the Beam runner of a data job."""

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions


def default_runner(options: PipelineOptions):
    """The runner named by --runner, else Beam's in-process FnApiRunner.

    Beam's DirectRunner would first try to download the Prism runner binary,
    which fails on machines without internet; FnApiRunner is what it falls back
    to, and honours --direct_num_workers / --direct_running_mode.
    """
    if options.view_as(StandardOptions).runner:
        return None
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner()
