"""Progress of a data job whose steps run in this process: a live line on a terminal, else log lines.

    with progress.Progress("create_data", ("questions", "interactions"), ProgressSettings()) as meter:
        ...  # build the pipeline with steps that carry meter.key, then run it
    # terminal:  create_data: 1,234 questions, 456 interactions [00:12, 98.8 questions/s]   (redrawn)
    # log file:  create_data so far: 1,234 questions, 456 interactions [00:12, 98.8 questions/s]  (every 30 s)
    # at the end, either way: create_data done: ...

Beam's counters cannot be read while an in-process pipeline runs (the runner hands over the job's
metrics when it ends), so the steps that take in items also report them here: `CountItems`, a
pass-through step, or `report(key, pages=1)` inside a DoFn. A report goes to the `Progress`
registered in this process under the key the step carries. Where none is (the worker processes of
`--direct_running_mode=multi_processing`, Dataflow's workers) a report does nothing, and the Beam
counters of the job's report remain the truth: `runners.steps_run_elsewhere` says when that is, and
`for_pipeline` then shows no progress at all rather than a count stuck at 0.

The counts are of items handed on by the counting step. Steps after it are fused with it on the
in-process runner, so an item counted is one taken through conversion, not just read.
"""

import dataclasses
import logging
import sys
import threading
import time
import uuid
from typing import Callable, Dict, Iterator, Mapping, Optional, Sequence, TextIO

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from tapas_tf.pipelines import runners

log = logging.getLogger(__name__)

# Progress objects of this process by key; steps find theirs here (they cannot carry it: it
# holds a thread and a stream, and is pickled with the step on every runner).
_ACTIVE: Dict[str, "Progress"] = {}


@dataclasses.dataclass(frozen=True)
class ProgressSettings:
    """How progress is shown.

    Attributes:
      stream: where the live line goes; default sys.stderr (when the job starts).
      tty: draw a live line (True) or write log lines (False); default: whether `stream` is a terminal.
      log_interval: seconds between log lines when not on a terminal.
      refresh_interval: seconds between redraws of the live line.
    """

    stream: Optional[TextIO] = None
    tty: Optional[bool] = None
    log_interval: float = 30.0
    refresh_interval: float = 0.5


def format_elapsed(seconds: float) -> str:
    """`00:07`, `12:34`, `1:02:03`."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    """Counts of items done in this process while a job runs, shown as the module says.

    Args:
      label: names the job in each line ("create_data").
      units: the counted items, the first one main (its rate is shown): ("questions", "interactions").
      settings: where and how often to show them.
      clock: seconds, for the elapsed time and the rate.

    `add` may be called from any thread (the multi_threading runner's workers); a thread of its
    own redraws the line or writes the log lines, so a stalled job still shows its time passing.
    """

    def __init__(self, label: str, units: Sequence[str], settings: ProgressSettings = ProgressSettings(),
                 clock: Callable[[], float] = time.monotonic):
        if not units:
            raise ValueError("Progress needs at least one unit")
        self.label = label
        self.units = tuple(units)
        self.settings = settings
        self.key = uuid.uuid4().hex
        self._clock = clock
        self._counts = {unit: 0 for unit in self.units}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._stream: Optional[TextIO] = None
        self._tty = False
        self._start = clock()  # Reset when shown.
        self._drawn = 0  # Length of the live line last drawn, to blank what a shorter one leaves.

    # --- counting -------------------------------------------------------------------------------

    def add(self, counts: Mapping[str, int]) -> None:
        """Adds `counts` (unit -> items); units not named at construction are added to the line."""
        with self._lock:
            for unit, value in counts.items():
                self._counts[unit] = self._counts.get(unit, 0) + value

    @property
    def counts(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def line(self, suffix: str = "") -> str:
        """`LABEL[ SUFFIX]: 1,234 questions, 456 interactions [00:12, 98.8 questions/s]`."""
        counts = self.counts
        elapsed = max(self._clock() - self._start, 0.0)
        main = self.units[0]
        rate = f"{counts[main] / elapsed:,.1f}" if elapsed > 0 else "?"
        items = ", ".join(f"{value:,} {unit}" for unit, value in counts.items())
        return f"{self.label}{suffix}: {items} [{format_elapsed(elapsed)}, {rate} {main}/s]"

    # --- showing --------------------------------------------------------------------------------

    def __enter__(self) -> "Progress":
        self._stream = self.settings.stream or sys.stderr
        tty = self.settings.tty
        self._tty = bool(self._stream.isatty()) if tty is None else tty
        self._start = self._clock()
        _ACTIVE[self.key] = self
        interval = self.settings.refresh_interval if self._tty else self.settings.log_interval
        self._thread = threading.Thread(target=self._tick, args=(interval,), name=f"progress-{self.label}",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        _ACTIVE.pop(self.key, None)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        suffix = " done" if exc_type is None else " stopped"
        if self._tty:
            self._draw(self.line(suffix), end="\n")
        else:
            log.info("%s", self.line(suffix))

    def _tick(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self._tty:
                self._draw(self.line())
            else:
                log.info("%s", self.line(" so far"))

    def _draw(self, text: str, end: str = "") -> None:
        """Redraws the live line: back to its start, the text, blanks over the rest of the old one."""
        padding = " " * max(self._drawn - len(text), 0)
        self._drawn = len(text)
        try:
            self._stream.write("\r" + text + padding + end)
            self._stream.flush()
        except (OSError, ValueError):  # A closed or broken stream must not stop the job.
            self._stop.set()


def report(key: Optional[str], **counts: int) -> None:
    """Adds `counts` to the progress registered under `key` in this process; else does nothing."""
    if key is None:
        return
    meter = _ACTIVE.get(key)
    if meter is not None:
        meter.add(counts)


def for_pipeline(settings: Optional[ProgressSettings], options: PipelineOptions, label: str,
                 units: Sequence[str]) -> Optional[Progress]:
    """A Progress for a job with `options`, or None: no `settings`, or steps that run elsewhere
    (then an INFO line says why the job shows no progress)."""
    if settings is None:
        return None
    elsewhere = runners.steps_run_elsewhere(options)
    if elsewhere:
        log.info("%s: no progress shown: %s; the job's report has the counts when it ends", label, elsewhere)
        return None
    return Progress(label, units, settings)


class _CountFn(beam.DoFn):
    def __init__(self, key: str, counts: Callable[[object], Mapping[str, int]]):
        self._key = key
        self._counts = counts

    def process(self, element) -> Iterator:
        report(self._key, **self._counts(element))
        yield element


class CountItems(beam.PTransform):
    """Passes every element on unchanged, reporting `counts(element)` to the progress of `key`.

    Args:
      key: a `Progress.key`.
      counts: element -> {unit: items}; a module-level function (it is pickled with the step).
    """

    def __init__(self, key: str, counts: Callable[[object], Mapping[str, int]]):
        super().__init__()
        self._key = key
        self._counts = counts

    def expand(self, elements):
        return elements | "Count" >> beam.ParDo(_CountFn(self._key, self._counts))
