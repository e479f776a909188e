"""QuestionBatcher (tapas_tf/serving/batching.py): batches of concurrent questions, bounded, and a
failing question failing alone; DirectAnswers, each question on its caller's thread, for a runner
that takes concurrent calls. No model: `answer_batch` is a stand-in that records its batches,
and events (not sleeps) decide what is queued when."""

import threading
import time

import pytest

from tapas_tf.serving.batching import DirectAnswers, QuestionBatcher, answerer_for


class GatedAnswers:
    """answer_batch that holds its first call until `release`, and answers "<question>!"."""

    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches = []

    def __call__(self, encoded):
        if not self.batches:
            self.entered.set()
            assert self.release.wait(30), "the test never released the first batch"
        self.batches.append(list(encoded))
        if "bad" in encoded:
            raise ValueError("a bad question")
        return [f"{question}!" for question in encoded]


def ask_in_threads(batcher, questions):
    """Threads asking `questions`; their results (or exceptions) land in the returned dict."""
    results = {}

    def ask(question):
        try:
            results[question] = batcher.answer(question)
        except Exception as e:  # noqa: BLE001 (the test looks at it)
            results[question] = e

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for thread in threads:
        thread.start()
    return threads, results


def wait_until(condition, what):
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def test_questions_that_queue_while_the_model_runs_go_in_bounded_batches():
    answers = GatedAnswers()
    batcher = QuestionBatcher(answers, max_batch=4, window_seconds=0)
    first, results = ask_in_threads(batcher, ["q0"])
    assert answers.entered.wait(30)
    rest, more = ask_in_threads(batcher, [f"q{i}" for i in range(1, 10)])
    wait_until(lambda: batcher.pending == 9, "9 questions queued behind the first batch")
    answers.release.set()
    for thread in first + rest:
        thread.join(30)
    assert [len(batch) for batch in answers.batches] == [1, 4, 4, 1]
    assert batcher.batch_sizes == [1, 4, 4, 1]
    assert {**results, **more} == {f"q{i}": f"q{i}!" for i in range(10)}
    batcher.close()


def test_a_failing_question_fails_alone():
    answers = GatedAnswers()
    batcher = QuestionBatcher(answers, window_seconds=0)
    first, results = ask_in_threads(batcher, ["q0"])
    assert answers.entered.wait(30)
    rest, more = ask_in_threads(batcher, ["q1", "bad", "q2"])
    wait_until(lambda: batcher.pending == 3, "3 questions queued")
    answers.release.set()
    for thread in first + rest:
        thread.join(30)
    # The batch of three failed, then each question ran alone: only "bad" gets the error.
    assert sorted(map(len, answers.batches)) == [1, 1, 1, 1, 3]
    assert (results["q0"], more["q1"], more["q2"]) == ("q0!", "q1!", "q2!")
    assert isinstance(more["bad"], ValueError) and str(more["bad"]) == "a bad question"
    batcher.close()


def test_close_answers_what_is_queued_then_refuses():
    answers = GatedAnswers()
    batcher = QuestionBatcher(answers, max_batch=2, window_seconds=0)
    threads, results = ask_in_threads(batcher, ["q0"])
    assert answers.entered.wait(30)
    more_threads, more = ask_in_threads(batcher, ["q1", "q2", "q3"])
    wait_until(lambda: batcher.pending == 3, "3 questions queued")
    closing = threading.Thread(target=batcher.close)
    closing.start()
    wait_until(lambda: batcher.pending == 4, "the stop mark queued behind them")
    answers.release.set()
    closing.join(30)
    for thread in threads + more_threads:
        thread.join(30)
    assert {**results, **more} == {"q0": "q0!", "q1": "q1!", "q2": "q2!", "q3": "q3!"}
    with pytest.raises(RuntimeError, match="shutting down"):
        batcher.answer("late")


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="max_batch must be at least 1"):
        QuestionBatcher(lambda e: e, max_batch=0)
    with pytest.raises(ValueError, match="window_seconds must not be negative"):
        QuestionBatcher(lambda e: e, window_seconds=-1)


def test_direct_answers_run_concurrent_questions_at_once_on_their_own_threads():
    both_inside, threads_seen = threading.Barrier(2, timeout=30), []

    def answer_batch(encoded):
        threads_seen.append(threading.current_thread().name)
        both_inside.wait()  # Only returns once the other question is inside too: no serialisation.
        if encoded == ["bad"]:
            raise ValueError("a bad question")
        return [f"{question}!" for question in encoded]

    direct = DirectAnswers(answer_batch)
    threads, results = ask_in_threads(direct, ["q0", "bad"])
    for thread in threads:
        thread.join(30)
    assert results["q0"] == "q0!" and isinstance(results["bad"], ValueError)
    assert sorted(threads_seen) == sorted(thread.name for thread in threads) and direct.pending == 0
    direct.close()
    with pytest.raises(RuntimeError, match="shutting down"):
        direct.answer("late")


class _Runner:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def test_a_runner_that_takes_concurrent_calls_is_called_directly_others_are_batched():
    direct = answerer_for(_Runner(concurrent_calls=2), lambda encoded: encoded)
    assert isinstance(direct, DirectAnswers) and direct.answer("q") == "q"
    batched = answerer_for(_Runner(), lambda encoded: encoded)  # TensorFlowRunner has no concurrent_calls.
    assert isinstance(batched, QuestionBatcher) and batched.answer("q") == "q"
    batched.close()
