"""Prediction and evaluation of a model directory on an interactions file (SQA protocol).

    outcome = predict_model_dir(model_dir, "data/interactions/dev.tfrecord", "dev",
                                conversion_config, evaluate=True)
    outcome.predictions_path   # model_dir/predictions/dev.tsv
    outcome.metrics            # {"ALL": ..., "SEQ": ..., "Q1": ..., ...}

SQA is evaluated as in the paper: the questions of a sequence are answered in
order, and the `prev_label_ids` of question i mark the cells the model itself
selected for question i-1 (`use_gold_previous_answer` feeds the gold cells
instead). To batch, the loop runs in steps: step k answers question k of every
sequence that has one, in fixed-shape batches (the last one padded with copies
of its last row, whose outputs are dropped), so the model is traced once.

A question that cannot be converted still gets a row: an empty prediction,
counted as wrong; the next question of its sequence then sees no previous
answer. Failures are logged and counted by reason.
"""

import collections
import dataclasses
import logging
import os
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tqdm import tqdm  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.checkpoints.model_dir import checkpoint_step  # noqa: E402,F401 (predict's public name)
from tapas_tf.data.interaction_io import read_interactions  # noqa: E402
from tapas_tf.data.protos import interaction_pb2  # noqa: E402
from tapas_tf.features.classifier_examples import ConvertedExample, ExampleConverter  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError  # noqa: E402
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES, MODEL_OUTPUTS  # noqa: E402
from tapas_tf.inference import metrics as metrics_lib  # noqa: E402
from tapas_tf.inference.decoding import NONE, Coordinate, DecodingRule, Prediction  # noqa: E402
from tapas_tf.inference.prediction_files import write_official_tsv, write_predictions_tsv  # noqa: E402

# The SQA metrics written to TensorBoard.
SCALAR_METRICS = ("ALL", "SEQ", "Q1", "Q2", "Q3", "Q4+", "denotation_accuracy", "accuracy")
PREDICTIONS_DIR = "predictions"

# <[batch_size, seq_len]> features in, <[batch_size, ...]> MODEL_OUTPUTS out.
ModelFn = Callable[[Dict[str, np.ndarray]], Mapping[str, np.ndarray]]


# --- running the model on fixed-shape batches -------------------------------------------


def compiled_model_fn(model, batch_size: int, seq_length: int, jit_compile: bool = False) -> ModelFn:
    """Wraps a TapasForQuestionAnswering in a tf.function with one fixed input signature.

    Args:
      model: called as `model(features, training=False)`.
      batch_size, seq_length: the only input shape; `BatchPredictor` pads to it.
      jit_compile: compile with XLA.

    Returns:
      A function from a dict of <int>[batch_size, seq_length] MODEL_INPUT_FEATURES
      (NumPy) to NumPy "probabilities" <float32>[batch_size, seq_length] and, with
      an aggregation head, "aggregation_logits" <float32>[batch_size, num_agg]. Its
      `traced` attribute is the tf.function (for its tracing count).
    """
    signature = {name: tf.TensorSpec([batch_size, seq_length], tf.int32, name=name)
                 for name in MODEL_INPUT_FEATURES}

    @tf.function(input_signature=[signature], jit_compile=jit_compile)
    def traced(features):
        outputs = model(features, training=False)
        return {key: outputs[key] for key in MODEL_OUTPUTS if key in outputs}

    def run(features: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        inputs = {name: tf.constant(features[name], tf.int32) for name in MODEL_INPUT_FEATURES}
        return {key: value.numpy() for key, value in traced(inputs).items()}

    run.traced = traced
    return run


class BatchPredictor:
    """Runs a model function on lists of examples, in batches of exactly `batch_size` rows.

    Args:
      model_fn: see `ModelFn`; always receives `batch_size` rows.
      batch_size: rows per call; a shorter list is padded with copies of its last
        example (real inputs, so the padding cannot produce NaNs), whose outputs
        are dropped.
    """

    def __init__(self, model_fn: ModelFn, batch_size: int):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model_fn = model_fn
        self.batch_size = batch_size

    def __call__(self, examples: Sequence[Mapping[str, np.ndarray]]) -> List[Dict[str, np.ndarray]]:
        """Per-example outputs (<float32>[seq_len] probabilities, ...) of up to batch_size examples."""
        if not 0 < len(examples) <= self.batch_size:
            raise ValueError(f"expected 1 to {self.batch_size} examples, got {len(examples)}")
        rows = list(examples) + [examples[-1]] * (self.batch_size - len(examples))
        batch = {name: np.stack([np.asarray(row[name]) for row in rows]) for name in MODEL_INPUT_FEATURES}
        outputs = self.model_fn(batch)
        return [{key: np.asarray(value)[i] for key, value in outputs.items()} for i in range(len(examples))]


# --- the sequential loop ------------------------------------------------------------------


@dataclasses.dataclass
class PredictionRun:
    """The predictions of a file, in file order, and what could not be converted.

    Attributes:
      predictions: one per question, in interaction then question order.
      failures: question id -> the ConversionError that left its prediction empty.
    """

    predictions: List[Prediction]
    failures: Dict[str, ConversionError]

    @property
    def failure_counts(self) -> Dict[str, int]:
        """Reason (Reason.value) -> number of questions, sorted by reason."""
        counts = collections.Counter(error.reason.value for error in self.failures.values())
        return dict(sorted(counts.items()))


def empty_prediction(question_id: str) -> Prediction:
    """The row of a question that was not converted: no cells, NONE, no answer."""
    return Prediction(question_id=question_id, coordinates=(), aggregation=NONE,
                      aggregation_probabilities=(), cell_probabilities={}, answer=None)


def gold_coordinates(question: interaction_pb2.Question) -> Tuple[Coordinate, ...]:
    return tuple((c.row_index, c.column_index) for c in question.answer.answer_coordinates)


def predict_interactions(
    interactions: Sequence[interaction_pb2.Interaction],
    converter: ExampleConverter,
    predictor: BatchPredictor,
    use_gold_previous_answer: bool = False,
    rule: DecodingRule = DecodingRule(),
    show_progress: bool = True,
) -> PredictionRun:
    """Answers every question of `interactions`, sequence by sequence in question order.

    Args:
      interactions: annotated interactions (as create_data writes them).
      converter: turns (interaction, question index, previous answer) into features.
      predictor: runs the model on batches.
      use_gold_previous_answer: mark the previous question's gold cells in
        `prev_label_ids` instead of the cells the model selected.
      rule: the threshold (a cell is selected when its mean token probability is
        above it) and the optional rules, e.g. the fallback to the best cell, which then
        becomes the next question's previous answer too.
      show_progress: a tqdm bar over questions.
    """
    previous: List[Tuple[Coordinate, ...]] = [() for _ in interactions]
    predictions: Dict[Tuple[int, int], Prediction] = {}
    failures: Dict[str, ConversionError] = {}
    num_questions = sum(len(i.questions) for i in interactions)
    num_steps = max((len(i.questions) for i in interactions), default=0)
    with tqdm(total=num_questions, unit="question", disable=not show_progress) as progress:
        for step in range(num_steps):
            pending: List[Tuple[int, ConvertedExample]] = []
            for index in (i for i, interaction in enumerate(interactions) if step < len(interaction.questions)):
                interaction = interactions[index]
                if use_gold_previous_answer:
                    prev = gold_coordinates(interaction.questions[step - 1]) if step else ()
                else:
                    prev = previous[index]
                question_id = interaction.questions[step].id
                try:
                    pending.append((index, converter.convert(interaction, step, prev_answer_coordinates=prev)))
                except ConversionError as error:
                    logging.warning("Question %s not converted, predicted empty: %s", question_id, error)
                    failures[question_id] = error
                    predictions[index, step] = empty_prediction(question_id)
                    previous[index] = ()
                    progress.update(1)
                if len(pending) == predictor.batch_size:
                    _predict_batch(pending, interactions, step, predictor, rule, predictions, previous)
                    progress.update(len(pending))
                    pending = []
            if pending:
                _predict_batch(pending, interactions, step, predictor, rule, predictions, previous)
                progress.update(len(pending))
    ordered = [predictions[index, step] for index, interaction in enumerate(interactions)
               for step in range(len(interaction.questions))]
    return PredictionRun(predictions=ordered, failures=failures)


def _predict_batch(
    pending: Sequence[Tuple[int, ConvertedExample]],
    interactions: Sequence[interaction_pb2.Interaction],
    step: int,
    predictor: BatchPredictor,
    rule: DecodingRule,
    predictions: Dict[Tuple[int, int], Prediction],
    previous: List[Tuple[Coordinate, ...]],
) -> None:
    """Runs one batch of step `step`; stores each prediction and its cells as the next previous answer."""
    outputs = predictor([example.features for _, example in pending])
    for (index, example), output in zip(pending, outputs):
        interaction = interactions[index]
        features = example.features
        prediction = rule.decode(
            interaction.questions[step].id, output["probabilities"], features["column_ids"],
            features["row_ids"], features["input_mask"],
            aggregation_logits=output.get("aggregation_logits"), table=interaction.table)
        predictions[index, step] = prediction
        previous[index] = prediction.coordinates


# --- evaluation ---------------------------------------------------------------------------


def _gold_float(answer: interaction_pb2.Answer) -> Optional[float]:
    return answer.float_value if answer.HasField("float_value") else None


def question_results(interactions: Sequence[interaction_pb2.Interaction],
                     run: PredictionRun) -> Iterator[Tuple[str, bool]]:
    """(question id, denotation correct) for every question; unconverted ones are wrong."""
    by_id = {prediction.question_id: prediction for prediction in run.predictions}
    for interaction in interactions:
        for question in interaction.questions:
            prediction = by_id.get(question.id)
            if prediction is None:
                raise ValueError(f"no prediction for question {question.id!r}")
            correct = (question.id not in run.failures and prediction.answer is not None
                       and metrics_lib.denotation_matches(
                           prediction.answer, list(question.answer.answer_texts),
                           _gold_float(question.answer)))
            yield question.id, correct


def evaluate_sqa(interactions: Sequence[interaction_pb2.Interaction], run: PredictionRun) -> Dict[str, object]:
    """`metrics.sqa_metrics` of the run plus "num_conversion_failures" and "conversion_failures" by reason."""
    result = metrics_lib.sqa_metrics(question_results(interactions, run))
    result["num_conversion_failures"] = len(run.failures)
    result["conversion_failures"] = run.failure_counts
    return result


def evaluate_denotations(interactions: Sequence[interaction_pb2.Interaction], run: PredictionRun
                         ) -> Dict[str, object]:
    """WTQ and WikiSQL: denotation accuracy, the executed answer against the answer texts (a
    question that was not converted counts as wrong)."""
    correct = [ok for _, ok in question_results(interactions, run)]
    return {"denotation_accuracy": sum(correct) / len(correct) if correct else None,
            "num_questions": len(correct), "num_correct": sum(correct),
            "num_conversion_failures": len(run.failures), "conversion_failures": run.failure_counts}


# How each task is scored: SQA by sequence position, the others by denotation only.
EVALUATIONS = {"sqa": evaluate_sqa, "denotation": evaluate_denotations}


def write_metric_summaries(log_dir: str, metrics: Mapping[str, object], step: int) -> None:
    """Writes the SCALAR_METRICS that have a value as TensorBoard scalars at `step`."""
    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        for name in SCALAR_METRICS:
            if metrics.get(name) is not None:
                tf.summary.scalar(name, float(metrics[name]), step=step)
    writer.flush()
    writer.close()


# --- a model directory end to end --------------------------------------------------------------


@dataclasses.dataclass
class PredictOutcome:
    """What `predict_model_dir` wrote: the TSV, and with evaluation the metrics."""

    checkpoint: str
    step: int
    predictions_path: str
    run: PredictionRun
    metrics_path: Optional[str] = None
    metrics: Optional[Dict[str, object]] = None


GOLD_PREVIOUS_SUFFIX = "_gold_previous"


def run_name(split: str, use_gold_previous_answer: bool = False) -> str:
    """The name of a prediction run's files: `dev`, or `dev_gold_previous` when each question saw
    the gold answer of the one before, so that the two evaluations of a split never overwrite
    each other."""
    return split + (GOLD_PREVIOUS_SUFFIX if use_gold_previous_answer else "")


def predictions_path(model_dir: str, split: str, use_gold_previous_answer: bool = False) -> str:
    return os.path.join(model_dir, PREDICTIONS_DIR, f"{run_name(split, use_gold_previous_answer)}.tsv")


def metrics_path(model_dir: str, split: str, use_gold_previous_answer: bool = False) -> str:
    return os.path.join(model_dir, PREDICTIONS_DIR,
                        f"{run_name(split, use_gold_previous_answer)}_metrics.json")


def _check_compatible(model_config, conversion_config: ConversionConfig, vocab_size: int) -> None:
    """Raises ValueError when the examples would index past the model's embedding tables."""
    if conversion_config.max_seq_length > model_config.max_position_embeddings:
        raise ValueError(
            f"max_seq_length {conversion_config.max_seq_length} exceeds the model's "
            f"max_position_embeddings {model_config.max_position_embeddings}")
    if vocab_size > model_config.vocab_size:
        raise ValueError(
            f"the vocabulary {conversion_config.vocab_file} has {vocab_size} pieces but the model "
            f"has {model_config.vocab_size} word embeddings; pass the vocabulary it was trained with")


def predict_model_dir(
    model_dir: str,
    interactions_file: str,
    split: str,
    conversion_config: ConversionConfig,
    checkpoint: Optional[str] = None,
    batch_size: int = 32,
    use_gold_previous_answer: bool = False,
    evaluate: bool = False,
    jit_compile: bool = False,
    show_progress: bool = True,
    evaluation: str = "sqa",
    rule: DecodingRule = DecodingRule(),
    output_dir: Optional[str] = None,
) -> PredictOutcome:
    """Predicts (and evaluates) a split with a model directory's checkpoint.

    Writes `output_dir/predictions/{name}.tsv`; with `evaluate`, also
    `output_dir/predictions/{name}_metrics.json` and TensorBoard scalars under
    `output_dir/eval_{name}` at the checkpoint's step. `output_dir` is `model_dir` unless given
    (a released model's cached copy is read, not written to). `name` is the split (`dev`), or
    `dev_gold_previous` with `use_gold_previous_answer`, so both evaluations are kept.

    Args:
      conversion_config: conversion options; `fail_on_dropped_answers` is turned
        off, since a prediction needs no labels.
      checkpoint: a checkpoint prefix; default the newest in `model_dir`.
      evaluation: a key of EVALUATIONS: "sqa" (ALL, SEQ, Q1...), or "denotation" (WTQ, WikiSQL),
        which also writes `predictions/{name}_official.tsv` in the WikiTableQuestions
        evaluator's format (`prediction_files.write_official_tsv`).
      rule: see `predict_interactions`.
    """
    if evaluation not in EVALUATIONS:
        raise ValueError(f"evaluation must be one of {sorted(EVALUATIONS)}, got {evaluation!r}")
    output_dir = output_dir or model_dir
    checkpoint = model_dir_lib.resolve_weights(model_dir, checkpoint)  # None: the compact weights.
    conversion_config = dataclasses.replace(conversion_config, fail_on_dropped_answers=False)
    converter = ExampleConverter(conversion_config)
    _check_compatible(model_dir_lib.load_config(model_dir), conversion_config, converter.tokenizer.vocab_size)
    model = model_dir_lib.load_model(model_dir, checkpoint)
    step = model_dir_lib.weights_step(model_dir, checkpoint)
    interactions = list(read_interactions(interactions_file))
    if not any(interaction.questions for interaction in interactions):
        raise ValueError(f"{interactions_file}: no questions to predict")
    logging.info("Predicting %d questions of %s with %s (step %d)",
                 sum(len(i.questions) for i in interactions), interactions_file, checkpoint or model_dir, step)

    model_fn = compiled_model_fn(model, batch_size, conversion_config.max_seq_length, jit_compile)
    run = predict_interactions(interactions, converter, BatchPredictor(model_fn, batch_size),
                               use_gold_previous_answer=use_gold_previous_answer,
                               rule=rule, show_progress=show_progress)
    outcome = PredictOutcome(checkpoint=checkpoint, step=step,
                             predictions_path=predictions_path(output_dir, split, use_gold_previous_answer),
                             run=run)
    os.makedirs(os.path.dirname(outcome.predictions_path), exist_ok=True)
    write_predictions_tsv(outcome.predictions_path, run.predictions)
    if evaluation == "denotation":
        write_official_tsv(outcome.predictions_path[:-len(".tsv")] + "_official.tsv", run.predictions)
    logging.info("Wrote %d predictions to %s; %d questions not converted (predicted empty)%s",
                 len(run.predictions), outcome.predictions_path, len(run.failures),
                 f": {run.failure_counts}" if run.failures else "")
    if evaluate:
        outcome.metrics = EVALUATIONS[evaluation](interactions, run)
        outcome.metrics["previous_answers"] = "gold" if use_gold_previous_answer else "predicted"
        # The decoding rules change the score severalfold on WTQ, so the file says which were on.
        outcome.metrics["decoding"] = rule.as_dict()
        outcome.metrics_path = metrics_path(output_dir, split, use_gold_previous_answer)
        metrics_lib.write_metrics_json(outcome.metrics_path, outcome.metrics)
        write_metric_summaries(os.path.join(output_dir, f"eval_{run_name(split, use_gold_previous_answer)}"),
                               outcome.metrics, step)
        logging.info("%s metrics at step %d: %s", split, step, ", ".join(
            f"{name}={outcome.metrics[name]:.4f}" for name in SCALAR_METRICS
            if outcome.metrics.get(name) is not None))
    return outcome
