"""Progress of the data jobs while they run (tapas_tf/pipelines/progress.py).

The line and its timing are checked with a fake clock; then create_data and create_pretrain_data
run on the tiny sample inputs with the progress forced into a captured stream (as on a terminal)
or into log records (as in a log file, with a small period), and the counts shown must be those
of the job's own report. A step running in another process (multi_processing) reports nothing
and breaks nothing.
"""

import io
import logging
import threading
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tapas_tf.beam_jobs.create_task_data import run_create_data
from tapas_tf.data.interaction_io import read_interactions
from tapas_tf.data.sample_data import write_sample
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.pipelines import progress, runners
from tapas_tf.pipelines.progress import Progress, ProgressSettings
from tapas_tf.task_registry.presets import Task
from tests.vocab_fixture import write_test_vocab

LOGGER = "tapas_tf.pipelines.progress"
# The sample data set: 9 + 4 + 1 questions in 4 + 2 + 1 interactions (train, dev, test).
SAMPLE_QUESTIONS, SAMPLE_INTERACTIONS = 14, 7


class FakeClock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _quiet(tty: bool, stream=None, log_interval: float = 3600.0) -> ProgressSettings:
    """Settings whose own thread never fires during a short test."""
    return ProgressSettings(stream=stream, tty=tty, log_interval=log_interval, refresh_interval=3600.0)


# --- the line ----------------------------------------------------------------------------------


def test_the_terminal_line_ends_with_the_final_counts_and_the_rate():
    clock, stream = FakeClock(), io.StringIO()
    with Progress("create_data", ("questions", "interactions"), _quiet(True, stream), clock=clock) as meter:
        meter.add({"questions": 3, "interactions": 1})
        clock.now += 2.0
        meter.add({"questions": 1200, "interactions": 2})
        assert meter.line() == "create_data: 1,203 questions, 3 interactions [00:02, 601.5 questions/s]"
        clock.now += 3723.0
    assert stream.getvalue() == ("\rcreate_data done: 1,203 questions, 3 interactions "
                                 "[1:02:05, 0.3 questions/s]\n")


def test_a_shorter_line_blanks_what_the_longer_one_left():
    clock, stream = FakeClock(), io.StringIO()
    meter = Progress("job", ("pages",), _quiet(True, stream), clock=clock)
    meter._stream = stream
    meter._draw("job: 10,000 pages and more")
    meter._draw("job: 9 pages")
    assert stream.getvalue() == "\rjob: 10,000 pages and more" + "\rjob: 9 pages" + " " * 14


def test_before_any_time_passes_the_rate_is_unknown():
    meter = Progress("job", ("pages", "examples"), _quiet(False), clock=FakeClock())
    meter.add({"pages": 2, "tables": 1})  # A unit not named first is shown too.
    assert meter.line() == "job: 2 pages, 0 examples, 1 tables [00:00, ? pages/s]"


def test_counts_from_many_threads_all_arrive():
    meter = Progress("job", ("items",), _quiet(False))

    def add_many():
        for _ in range(2000):
            meter.add({"items": 1})

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert meter.counts == {"items": 8000}


def test_log_lines_every_period_then_the_final_one(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    meter = Progress("job", ("pages",), _quiet(False, log_interval=0.01))
    meter.add({"pages": 5})  # Before the thread starts: every line has it.
    with meter:
        deadline = time.monotonic() + 10
        while not any("so far" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
            time.sleep(0.01)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages[0].startswith("job so far: 5 pages [00:00, ")
    assert messages[-1].startswith("job done: 5 pages [00:00, ")
    assert all(m.startswith("job so far: 5 pages") for m in messages[:-1])


def test_an_error_ends_the_line_as_stopped():
    stream = io.StringIO()
    with pytest.raises(RuntimeError):
        with Progress("job", ("pages",), _quiet(True, stream), clock=FakeClock()) as meter:
            meter.add({"pages": 1})
            raise RuntimeError("the job failed")
    assert stream.getvalue() == "\rjob stopped: 1 pages [00:00, ? pages/s]\n"


def test_reports_reach_only_the_registered_progress():
    meter = Progress("job", ("pages",), _quiet(False))
    progress.report(meter.key, pages=1)  # Not registered yet: nothing.
    with meter:
        progress.report(meter.key, pages=2)
        progress.report(None, pages=10)
        progress.report("another process's key", pages=100)
    progress.report(meter.key, pages=1000)  # Unregistered at the end.
    assert meter.counts == {"pages": 2}


@pytest.mark.parametrize("args, elsewhere", [
    ([], None),
    (["--direct_num_workers=2", "--direct_running_mode=multi_threading"], None),
    (["--direct_num_workers=2", "--direct_running_mode=multi_processing"], "multi_processing"),
    (["--runner=DataflowRunner"], "--runner=DataflowRunner"),
])
def test_steps_run_in_this_process_only_on_the_default_runner_without_worker_processes(args, elsewhere):
    reason = runners.steps_run_elsewhere(PipelineOptions(args))
    assert reason is None if elsewhere is None else elsewhere in reason
    shown = progress.for_pipeline(ProgressSettings(), PipelineOptions(args), "job", ("pages",))
    assert (shown is None) == (elsewhere is not None)
    assert progress.for_pipeline(None, PipelineOptions(args), "job", ("pages",)) is None


# --- the jobs ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    write_sample(str(root / "data"))
    return root, ConversionConfig(vocab_file=write_test_vocab(str(root / "vocab.txt")), max_seq_length=128)


def _create_data(sample, out: str, args, settings):
    root, config = sample
    return run_create_data(Task.SQA, str(root / "data"), str(root / out), config, args,
                           progress_settings=settings)


def _interactions_written(out_dir) -> int:
    paths = (out_dir / "interactions").glob("*.tfrecord")
    return sum(len(list(read_interactions(str(path)))) for path in paths)


@pytest.mark.parametrize("args", [["--direct_num_workers=1"],
                                  ["--direct_num_workers=2", "--direct_running_mode=multi_threading"]])
def test_create_data_on_a_terminal_ends_with_every_question(sample, args):
    stream = io.StringIO()
    report = _create_data(sample, f"out_tty_{len(args)}", args,
                          ProgressSettings(stream=stream, tty=True, refresh_interval=0.05))
    questions = sum(split["questions_read"] for split in report["splits"].values())
    assert questions == SAMPLE_QUESTIONS
    assert _interactions_written(sample[0] / f"out_tty_{len(args)}") == SAMPLE_INTERACTIONS
    lines = stream.getvalue().split("\r")
    assert lines[-1].startswith(f"create_data done: {SAMPLE_QUESTIONS} questions, {SAMPLE_INTERACTIONS} "
                                "interactions [")
    assert lines[-1].endswith(" questions/s]\n")
    assert "\n" not in "".join(lines[:-1])  # One line, redrawn.


def test_create_data_in_a_log_file_writes_the_periodic_line(sample, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    stream = io.StringIO()
    _create_data(sample, "out_log", ["--direct_num_workers=1"],
                 ProgressSettings(stream=stream, tty=False, log_interval=0.05))
    assert stream.getvalue() == ""
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    so_far = [m for m in messages if m.startswith("create_data so far: ")]
    assert so_far, messages
    assert messages[-1].startswith(f"create_data done: {SAMPLE_QUESTIONS} questions, "
                                   f"{SAMPLE_INTERACTIONS} interactions [")
    counts = [int(m.split(": ")[1].split(" ")[0]) for m in so_far]
    assert counts == sorted(counts) and counts[-1] <= SAMPLE_QUESTIONS


def test_multi_processing_workers_report_nothing_and_the_job_is_right(sample, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger=LOGGER)
    args = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]
    stream = io.StringIO()
    report = _create_data(sample, "out_mp", args, ProgressSettings(stream=stream, tty=True))
    assert stream.getvalue() == ""  # No line stuck at 0.
    assert any("no progress shown: --direct_running_mode=multi_processing" in r.getMessage()
               for r in caplog.records)
    written = {name: split["examples_written"] for name, split in report["splits"].items()}
    assert {name: split["questions_read"] for name, split in report["splits"].items()} == {
        "train": 9, "dev": 4, "test": 1}

    # Even with the counting steps in the job (here forced), the workers, other processes, find
    # no progress of theirs: nothing is counted, and the job's output is the same.
    forced = Progress("create_data", ("questions", "interactions"), _quiet(True, io.StringIO()))
    monkeypatch.setattr(progress, "for_pipeline", lambda *a, **k: forced)
    report = _create_data(sample, "out_mp_forced", args, ProgressSettings())
    assert forced.counts == {"questions": 0, "interactions": 0}
    assert {name: split["examples_written"] for name, split in report["splits"].items()} == written
