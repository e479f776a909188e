"""Ask a collection of tables: retrieve, read the best tables, keep the best answer.

    index = TableIndex.load("my_index")            # written by `tapas-tf index`
    cqa = CollectionQA(index, TableQA.from_model_dir())
    found = cqa.answer("what is the height of torre jaume i?")
    found.table_id, found.title, found.result.summary
    found.candidates_frame()                       # every table asked, best first, as a DataFrame

    chat = cqa.conversation()                      # follow-ups stay with the first answer's table
    chat.ask("which buildings are in spain?")
    chat.ask("which of them is the tallest?")

How an answer is chosen: the index's `k` best tables for the question are read and each is asked
(the encodings of all k go to the model together, batched by length). Each candidate gets

    combined = retrieval_weight * log p_retrieval + log confidence

where p_retrieval is the softmax of the retrieval scores of the k tables at `temperature` (how sure
the index is of this table among those k; each method's scores live on their own scale, so each has
its own default temperature, DEFAULT_TEMPERATURES), and confidence is the reader's (calibrated where the
model has a calibration) probability that its answer is right. The candidate with the highest
combined score answers, and the others are its runners-up. A table that cannot be read or
encoded is kept among the candidates with its error, never chosen.

This module imports no TensorFlow.
"""

import collections
import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import pandas as pd

from tapas_tf.qa.ask_encoding import EncodedQuestion, PreparedTable
from tapas_tf.qa.ask_results import AskResult
from tapas_tf.qa.table_qa import Conversation, TableQA
from tapas_tf.qa.table_sources import DATABASE_ROWS, ROWS_TOTAL
from tapas_tf.qa.tables import AskError
from tapas_tf.retrieval.table_index import TableIndex

DEFAULT_K = 5
# The softmax temperature of each method's scores. BM25 scores are unbounded (gaps of whole points);
# a dense score is a cosine, which the retriever was trained to separate at logit_scale 20 (1 / 0.05);
# a hybrid score is a reciprocal-rank sum, about 1 / (30 + rank), whose neighbours differ by ~0.001.
# At 1.0 the hybrid's probabilities were uniform, and a WTQ dev answer at k = 5 came from the right
# table 12% of the time instead of 52% (docs/RESULTS.md, "Answers from a collection").
DEFAULT_TEMPERATURES = {"bm25": 1.0, "dense": 0.05, "hybrid": 0.002}
DEFAULT_TEMPERATURE = DEFAULT_TEMPERATURES["bm25"]
DEFAULT_RETRIEVAL_WEIGHT = 1.0
# A confidence of exactly 0 (no cell selected, say) must still rank, below every real answer.
MIN_CONFIDENCE = 1e-6
CANDIDATE_COLUMNS = ["rank", "table_id", "title", "source", "retrieval_score", "retrieval_probability",
                     "answer", "confidence", "combined", "chosen", "error"]


class NoTableFound(AskError):
    """The index holds no table that matches the question (BM25: no word in common)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One retrieved table and what the reader answered on it.

    Attributes:
      rank: its retrieval rank (1 = best match).
      table_id, title, source: as the index lists it.
      retrieval_score: the index's score; retrieval_probability its softmax among the k tables.
      result: the reader's answer, or None when `error` says why the table was not asked.
      combined: the score the answer was chosen by (-inf with an error).
    """

    rank: int
    table_id: str
    title: str
    source: str
    retrieval_score: float
    retrieval_probability: float
    result: Optional[AskResult]
    combined: float
    error: Optional[str] = None

    def to_dict(self) -> dict:
        """The runner-up view: the table, the scores and the answer's summary."""
        return {
            "table_id": self.table_id,
            "title": self.title,
            "source": self.source,
            "retrieval_rank": self.rank,
            "retrieval_score": round(self.retrieval_score, 4),
            "retrieval_probability": round(self.retrieval_probability, 4),
            "answer": None if self.result is None else self.result.answer_text,
            "summary": None if self.result is None else self.result.summary,
            "confidence": None if self.result is None or self.result.confidence is None
            else round(self.result.confidence, 4),
            "combined_score": None if math.isinf(self.combined) else round(self.combined, 4),
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True)
class CollectionAnswer:
    """The answer to a question over a collection: the chosen table's answer and the runners-up.

    Attributes:
      question: as asked.
      chosen: the candidate that answers.
      runners_up: the other tables asked, by combined score (best first).
      method: the retrieval method (bm25, ...).
      prepared: the chosen table as the reader saw it (its `table` proto renders the answer).
    """

    question: str
    chosen: Candidate
    runners_up: Tuple[Candidate, ...]
    method: str
    prepared: Optional[PreparedTable] = None

    @property
    def result(self) -> AskResult:
        assert self.chosen.result is not None  # Chosen only among answered candidates.
        return self.chosen.result

    @property
    def table_id(self) -> str:
        return self.chosen.table_id

    @property
    def title(self) -> str:
        return self.chosen.title

    @property
    def source(self) -> str:
        return self.chosen.source

    @property
    def candidates(self) -> Tuple[Candidate, ...]:
        return (self.chosen,) + self.runners_up

    def candidates_frame(self) -> pd.DataFrame:
        """Every table asked, the chosen one first: a DataFrame of CANDIDATE_COLUMNS."""
        rows = []
        for candidate in self.candidates:
            result = candidate.result
            rows.append({"rank": candidate.rank, "table_id": candidate.table_id, "title": candidate.title,
                         "source": candidate.source, "retrieval_score": candidate.retrieval_score,
                         "retrieval_probability": candidate.retrieval_probability,
                         "answer": None if result is None else result.answer_text,
                         "confidence": None if result is None else result.confidence,
                         "combined": candidate.combined, "chosen": candidate is self.chosen,
                         "error": candidate.error})
        return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)

    def to_dict(self) -> dict:
        """The answer's own view (`AskResult.to_dict`) with the table that gave it and the runners-up."""
        return {
            **self.result.to_dict(),
            "table_id": self.table_id,
            "table_title": self.title,
            "table_source": self.source,
            "retrieval_method": self.method,
            "retrieval_rank": self.chosen.rank,
            "retrieval_score": round(self.chosen.retrieval_score, 4),
            "combined_score": round(self.chosen.combined, 4),
            "runners_up": [candidate.to_dict() for candidate in self.runners_up],
        }


def retrieval_probabilities(scores: Sequence[float], temperature: float) -> List[float]:
    """The softmax of `scores` / `temperature`: [k] -> [k], summing to 1."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not scores:
        return []
    top = max(scores)
    weights = [math.exp((score - top) / temperature) for score in scores]
    total = sum(weights)
    return [weight / total for weight in weights]


def combined_score(retrieval_probability: float, confidence: Optional[float], retrieval_weight: float) -> float:
    """retrieval_weight * log p_retrieval + log confidence (the module docstring)."""
    answer = MIN_CONFIDENCE if confidence is None else max(confidence, MIN_CONFIDENCE)
    return retrieval_weight * math.log(max(retrieval_probability, 1e-300)) + math.log(answer)


class CollectionQA:
    """A reader (`TableQA`) over the tables of an index (`TableIndex`)."""

    def __init__(self, index: TableIndex, qa: TableQA, k: int = DEFAULT_K, method: Optional[str] = None,
                 temperature: Optional[float] = None, retrieval_weight: float = DEFAULT_RETRIEVAL_WEIGHT,
                 cache_tables: int = 32):
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if temperature is not None and temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        if retrieval_weight < 0:
            raise ValueError(f"retrieval_weight must not be negative, got {retrieval_weight}")
        self.index = index
        self.qa = qa
        self.k = k
        self.method = index._method(method)  # pylint: disable=protected-access  # Fails now on a wrong one.
        # None: the default of the method's score scale.
        self.temperature = DEFAULT_TEMPERATURES[self.method] if temperature is None else temperature
        self.retrieval_weight = retrieval_weight
        self._cache: "collections.OrderedDict[str, PreparedTable]" = collections.OrderedDict()
        self._cache_size = max(cache_tables, 0)

    @classmethod
    def from_index_dir(cls, index_dir: str, spec: Optional[str] = None, model_dir: Optional[str] = None,
                       k: int = DEFAULT_K, method: Optional[str] = None, **table_qa_options) -> "CollectionQA":
        """Loads the index and the reader (`TableQA.from_model_dir`: the bundled model by default)."""
        index = TableIndex.load(index_dir, spec=spec)
        return cls(index, TableQA.from_model_dir(model_dir, **table_qa_options), k=k, method=method)

    def search(self, question: str, k: Optional[int] = None) -> pd.DataFrame:
        """The index's best tables for the question (`TableIndex.search`)."""
        return self.index.search(question, k or self.k, self.method)

    def prepared_table(self, table_id: str) -> PreparedTable:
        """An indexed table, read again (every row up to the reader's `max_rows`, default
        `table_sources.DATABASE_ROWS`, when it reads in windows; else the index's rows) and prepared
        for the reader (cached, least recently used out).

        Raises:
          AskError: the table cannot be read now, or is not a table the reader can ask.
        """
        if table_id in self._cache:
            self._cache.move_to_end(table_id)
            return self._cache[table_id]
        # The reader reads every row in windows: up to its row limit, not the index entry's few rows.
        rows = (getattr(self.qa, "max_rows", None) or DATABASE_ROWS) if getattr(self.qa, "windows", False) else None
        try:
            table = self.index.read_table(table_id, rows)
        except (KeyError, ValueError, OSError) as e:
            raise AskError(f"table {table_id} cannot be read: {e}") from None
        frame = table.frame
        if table.rows_truncated:
            frame = frame.copy()
            frame.attrs[ROWS_TOTAL] = table.rows_total if table.rows_total is not None else "more"
        prepared = self.qa.encoder.prepare(frame)
        if self._cache_size:
            self._cache[table_id] = prepared
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return prepared

    def answer(self, question: str, k: Optional[int] = None) -> CollectionAnswer:
        """Answers a question from the best of the index's top-k tables (the module docstring).

        Raises:
          NoTableFound: the index holds no table that matches the question.
          AskError: no retrieved table could be asked (each candidate's error is in the message).
        """
        return self.answer_many([question], k)[0]

    def answer_many(self, questions: Sequence[str], k: Optional[int] = None) -> List[CollectionAnswer]:
        """Answers independent questions; all their candidates go to the reader together.

        Raises:
          NoTableFound, AskError: as `answer`, for the first question that has no answer. Callers
          that must go on past such a question ask one at a time (the command line does).
        """
        k = k or self.k
        rankings = self.index.rankings(list(questions), k, self.method)
        plans = [self._plan(question, ranking) for question, ranking in zip(questions, rankings)]
        encoded = [item for plan in plans for item in plan.encoded]
        results = iter(self.qa.answer_encoded(encoded))
        return [self._finish(plan, [next(results) for _ in plan.encoded]) for plan in plans]

    def conversation(self) -> "CollectionConversation":
        """A conversation whose first answer chooses the table; follow-ups stay with that table."""
        return CollectionConversation(self)

    # --- one question ------------------------------------------------------------------------------

    def _plan(self, question: str, ranking: Sequence[Tuple[str, float]]) -> "_Plan":
        if not ranking:
            raise NoTableFound(f"no table of {self.index.index_dir} matches the question {question!r} "
                               f"(it shares no word with any table)")
        probabilities = retrieval_probabilities([score for _, score in ranking], self.temperature)
        plan = _Plan(question)
        for rank, ((table_id, score), probability) in enumerate(zip(ranking, probabilities), start=1):
            row = self.index.tables.loc[table_id]
            candidate = Candidate(rank, table_id, str(row["title"]), str(row["source"]), float(score),
                                  probability, None, -math.inf)
            try:
                prepared = self.prepared_table(table_id)
                plan.encoded.append(self.qa.encode(prepared, question))
            except AskError as e:
                plan.candidates.append(dataclasses.replace(candidate, error=str(e)))
                continue
            plan.candidates.append(candidate)
            plan.prepared[table_id] = prepared
            plan.asked.append(len(plan.candidates) - 1)
        return plan

    def _finish(self, plan: "_Plan", results: Sequence[AskResult]) -> CollectionAnswer:
        candidates = list(plan.candidates)
        for position, result in zip(plan.asked, results):
            candidate = candidates[position]
            combined = combined_score(candidate.retrieval_probability, result.confidence, self.retrieval_weight)
            candidates[position] = dataclasses.replace(candidate, result=result, combined=combined)
        answered = [candidate for candidate in candidates if candidate.result is not None]
        if not answered:
            errors = "; ".join(candidate.error or "" for candidate in candidates)
            raise AskError(f"none of the {len(candidates)} tables found for {plan.question!r} could be asked: {errors}")
        # Ties (equal combined scores) go to the better retrieval rank: sorted() is stable.
        ordered = sorted(answered, key=lambda candidate: -candidate.combined)
        failed = [candidate for candidate in candidates if candidate.result is None]
        chosen = ordered[0]
        return CollectionAnswer(plan.question, chosen, tuple(ordered[1:] + failed), self.method,
                                plan.prepared[chosen.table_id])


@dataclasses.dataclass
class _Plan:
    """One question's candidates, and the encodings of those that can be asked (in the same order)."""

    question: str
    candidates: List[Candidate] = dataclasses.field(default_factory=list)
    encoded: List[EncodedQuestion] = dataclasses.field(default_factory=list)
    asked: List[int] = dataclasses.field(default_factory=list)  # Positions in `candidates` of `encoded`.
    prepared: Dict[str, PreparedTable] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class CollectionConversation:
    """Questions over a collection in which follow-ups stay with the first answer's table.

    The first question (and the first after `reset`) searches the collection; the table that
    answers it becomes the conversation's table, and each later question is a follow-up on that
    table (it sees the previous answer, as in SQA).
    """

    cqa: CollectionQA
    history: List[AskResult] = dataclasses.field(default_factory=list)
    first: Optional[CollectionAnswer] = None
    _chat: Optional[Conversation] = None

    @property
    def table(self) -> Optional[PreparedTable]:
        """The conversation's table, once the first question has chosen it."""
        return None if self._chat is None else self._chat.table

    def ask(self, question: str) -> AskResult:
        if self._chat is None:
            found = self.cqa.answer(question)
            self.first = found
            self._chat = Conversation(self.cqa.qa, found.prepared)
            self._chat.history.append(found.result)
            self.history.append(found.result)
            return found.result
        result = self._chat.ask(question)
        self.history.append(result)
        return result

    def reset(self) -> None:
        """Starts over: the next question searches the collection again."""
        self._chat = None
        self.first = None
        self.history.clear()
