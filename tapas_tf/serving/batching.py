"""The model calls of concurrent requests, run together: one worker thread, short bounded batches.

    batcher = QuestionBatcher(qa.answer_encoded)
    result = batcher.answer(qa.encode(prepared, "which city?"))    # from any thread; blocks
    batcher.close()                                                        # answers what is queued

A server's request threads encode their questions themselves (tables and questions are converted
in parallel with the model) and hand the encoded questions over. The worker takes every question
waiting, at most `max_batch`, waits up to `window_seconds` for more while the batch is not full,
and answers them with one call of `answer_batch` (`TableQA.answer_encoded`: one model call per
sequence length). Under load, questions gather while the model runs, so a batch forms without
any waiting; alone, a question waits at most the window.

Only the worker runs the model, so TensorFlow's traced functions see one caller at a time. A batch
that fails is answered again question by question, so that one bad question fails alone.

A runner that gains nothing from batches (LiteRT answers one question per interpreter call, and
`LiteRunner` runs several interpreters at once) is better called by each request thread itself:
`DirectAnswers` does that behind the same two methods, with no hand-off to a worker and back.
"""

import concurrent.futures
import dataclasses
import queue
import threading
import time
from typing import Callable, List, Optional, Sequence

from tapas_tf.qa.ask_encoding import EncodedQuestion
from tapas_tf.qa.ask_results import AskResult

AnswerBatch = Callable[[Sequence[EncodedQuestion]], List[AskResult]]
DEFAULT_MAX_BATCH = 16
DEFAULT_WINDOW_SECONDS = 0.001


@dataclasses.dataclass
class _Item:
    encoded: EncodedQuestion
    future: "concurrent.futures.Future[AskResult]"


_STOP = object()


class QuestionBatcher:
    """Answers encoded questions from many threads with batched model calls; see the module docstring.

    Args:
      answer_batch: encoded questions -> their results, in order (`TableQA.answer_encoded`).
      max_batch: the most questions per call.
      window_seconds: how long a batch that is not full waits for more questions.
    """

    def __init__(self, answer_batch: AnswerBatch, max_batch: int = DEFAULT_MAX_BATCH,
                 window_seconds: float = DEFAULT_WINDOW_SECONDS):
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if window_seconds < 0:
            raise ValueError(f"window_seconds must not be negative, got {window_seconds}")
        self._answer_batch = answer_batch
        self.max_batch = max_batch
        self.window_seconds = window_seconds
        self._queue: "queue.Queue[object]" = queue.Queue()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self.batch_sizes: List[int] = []  # Of every call, for tests and benchmarks; bounded below.

    @property
    def pending(self) -> int:
        """Questions handed over and not yet taken into a batch."""
        return self._queue.qsize()

    def answer(self, encoded: EncodedQuestion) -> AskResult:
        """The result of one question, once its batch has run; raises what answering it raised.

        Raises:
          RuntimeError: the batcher is closed (the server is stopping).
        """
        item = _Item(encoded, concurrent.futures.Future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is shutting down; ask again once it is back")
            if self._thread is None:  # Started on first use: an app that never serves starts no thread.
                self._thread = threading.Thread(target=self._work, name="question-batcher", daemon=True)
                self._thread.start()
            self._queue.put(item)
        return item.future.result()

    def close(self, timeout: Optional[float] = None) -> None:
        """Answers the questions already handed over, then stops the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._queue.put(_STOP)
        if thread is not None:
            thread.join(timeout)

    # --- the worker -------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch, stop = self._gather(first)
            self._run(batch)
            if stop:
                return

    def _gather(self, first: _Item):
        """(a batch starting with `first`, whether the stop mark came after it)."""
        batch = [first]
        deadline = time.monotonic() + self.window_seconds
        while len(batch) < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

    def _run(self, batch: List[_Item]) -> None:
        self.batch_sizes.append(len(batch))
        del self.batch_sizes[:-1000]
        try:
            results = self._answer_batch([item.encoded for item in batch])
        except Exception as error:  # noqa: BLE001 (handed to the waiting request, which reports it)
            if len(batch) == 1:
                batch[0].future.set_exception(error)
                return
            for item in batch:  # One bad question must not fail the others of its batch.
                self._run([item])
            return
        for item, result in zip(batch, results):
            item.future.set_result(result)


class DirectAnswers:
    """Answers each question on the caller's thread, `answer_batch([encoded])`: QuestionBatcher's
    interface for a runner that takes concurrent calls itself (`LiteRunner`), where gathering
    questions into one call would only add two thread hand-offs per question."""

    def __init__(self, answer_batch: AnswerBatch):
        self._answer_batch = answer_batch
        self._closed = False

    @property
    def pending(self) -> int:
        return 0

    def answer(self, encoded: EncodedQuestion) -> AskResult:
        """The result of one question; raises what answering it raised.

        Raises:
          RuntimeError: closed (the server is stopping).
        """
        if self._closed:
            raise RuntimeError("the server is shutting down; ask again once it is back")
        return self._answer_batch([encoded])[0]

    def close(self, timeout: Optional[float] = None) -> None:
        """Refuses new questions; those already asked finish on their own threads."""
        self._closed = True


def answerer_for(runner, answer_batch: AnswerBatch):
    """`DirectAnswers` for a runner that takes concurrent calls (`concurrent_calls`, as
    `LiteRunner`), else a `QuestionBatcher` (TensorFlow: one call for many questions)."""
    if getattr(runner, "concurrent_calls", 0):
        return DirectAnswers(answer_batch)
    return QuestionBatcher(answer_batch)
