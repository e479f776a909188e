"""Checking the command-line arguments meant for a Beam pipeline, before the pipeline starts.

    check_pipeline_args(["--direct_num_workers=2"], other_flags=["--max_seq_length"])  # fine
    check_pipeline_args(["--max_seq_lenght=128"], other_flags=["--max_seq_length"])
    # UnknownPipelineArgError: unknown flag --max_seq_lenght=128; did you mean --max_seq_length?

Beam's PipelineOptions keeps what it knows and only logs "Discarding unparseable args" for the
rest, so a mistyped flag runs the job with the default value and exits 0. Here the arguments are
parsed by Beam's own option parser, built as `PipelineOptions.get_all_options` builds it, and
anything it does not know is an error naming the nearest known flag, ours or Beam's.

The parser knows the options of every PipelineOptions subclass imported by then: importing
`apache_beam` registers all of Beam's standard ones (runners, Dataflow, portability, ...).
"""

import argparse
from typing import Iterable, List, Optional, Sequence

import apache_beam  # noqa: F401  Registers Beam's PipelineOptions subclasses, as a pipeline run would.
from apache_beam.options import pipeline_options

# The nearest-flag suggestion and its wording are every command line's (`tapas_tf.cli`).
from tapas_tf.cli import nearest_flag, unknown_flag_message


class PipelineArgsError(ValueError):
    """An argument meant for the Beam pipeline is unknown or has a bad value."""


class UnknownPipelineArgError(PipelineArgsError):
    """An argument that neither our flags nor Beam's options know.

    Attributes:
      argument: the argument as given, e.g. "--max_seq_lenght=128".
      suggestion: the nearest known flag, e.g. "--max_seq_length", or None.
    """

    def __init__(self, argument: str, suggestion: Optional[str]):
        self.argument = argument
        self.suggestion = suggestion
        super().__init__(unknown_flag_message(argument, suggestion))


class _RaisingBeamParser(pipeline_options._BeamArgumentParser):
    """Beam's option parser, raising PipelineArgsError where argparse would print usage and exit."""

    def error(self, message: str) -> None:
        # Beam's own parser ignores these; with allow_abbrev=False they only arise for options
        # that Beam itself defines twice.
        if message.startswith("ambiguous option: "):
            return
        raise PipelineArgsError(f"Beam pipeline option: {message}")


def beam_parser() -> argparse.ArgumentParser:
    """An argument parser holding every Beam pipeline option (see `PipelineOptions.get_all_options`)."""
    # add_help=False: "-h" is an unknown argument here, not a reason to print help and exit.
    parser = _RaisingBeamParser(allow_abbrev=False, add_help=False)
    # A subclass may be seen twice (e.g. defined in a re-imported main module); Beam keeps one per name.
    subclasses = {}
    for cls in pipeline_options.PipelineOptions.__subclasses__():
        subclasses.setdefault(str(cls), cls)
    for cls in subclasses.values():
        cls._add_argparse_args(parser)  # The hook every PipelineOptions subclass implements.
    return parser


def known_beam_flags(parser: Optional[argparse.ArgumentParser] = None) -> List[str]:
    """Every option string of Beam's parser ("--runner", "--direct_num_workers", ...), sorted."""
    parser = parser or beam_parser()
    # argparse has no public list of its options; Beam's own suggestions read _actions too.
    return sorted({option for action in parser._actions for option in action.option_strings})


def check_pipeline_args(args: Sequence[str], other_flags: Iterable[str] = ()) -> None:
    """Raises unless Beam's pipeline options know every argument in `args` and accept its value.

    Args:
      args: the arguments left for Beam, e.g. ["--runner=DirectRunner", "--direct_num_workers", "2"].
      other_flags: the caller's own flags ("--max_seq_length", ...), offered as suggestions too:
        a mistyped flag of ours also lands among the arguments left for Beam.

    Raises:
      UnknownPipelineArgError: the first argument Beam does not know, with the nearest known flag.
      PipelineArgsError: a Beam option has a bad value (e.g. --direct_num_workers=two).
    """
    parser = beam_parser()
    _, unknown = parser.parse_known_args(list(args))
    if unknown:
        candidates = set(known_beam_flags(parser)) | set(other_flags)
        raise UnknownPipelineArgError(unknown[0], nearest_flag(unknown[0], candidates))
