"""The JSON report of a data job, built from its Beam counters.

Per split, the report accounts for every input line and every question (docs/DATA_CONTRACT.md):

    lines_read       == lines.header + lines.questions + lines.tables + sum(lines.skipped)
    questions_read   == examples_written + sum(skipped) + sum(dropped)

(`lines.tables` counts the lines of WikiSQL's tables files that became tables; the TSV releases
have 0.) `files_failed` counts, by reason, the split's files that could not be read to their end
(a truncated TFRecord, JSON that breaks off), and `file_failures` names them with the message;
`adds_up` says whether both equations hold and no file failed. `fraction_converted` counts each skipped line as a lost
question: examples_written / (questions_read + sum(lines.skipped)).

`drop_rows_to_fit` says how the split treated tables that do not fit: `enabled` (trailing rows
were dropped instead of dropping the question), `by_default` (the per-split default chose it: on
for evaluation splits, off for training; false when the job's options set it), and `questions`
and `rows`, how many questions had rows dropped and how many rows that was in all.
"""

import logging
from typing import Dict, List, Optional, Sequence

from apache_beam.metrics.metric import MetricsFilter

from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.pipelines.classifier_data import COUNTER_NAMESPACE
from tapas_tf.pipelines.task_files import split_paths
from tapas_tf.task_registry.presets import Split

REPORT_FILE = "conversion_report.json"


def _by_prefix(values: Dict[str, int], prefix: str) -> Dict[str, int]:
    return {k[len(prefix):]: v for k, v in sorted(values.items()) if k.startswith(prefix) and v}


def split_report(values: Dict[str, int]) -> dict:
    """The report of one split from its counter values (name -> count)."""
    lines_skipped = _by_prefix(values, "lines_skipped_")
    skipped = _by_prefix(values, "skipped_")
    dropped = _by_prefix(values, "dropped_")
    lines = {"header": values.get("lines_header", 0), "questions": values.get("lines_in_questions", 0),
             "tables": values.get("lines_in_tables", 0), "skipped": lines_skipped}
    lines_read = values.get("lines_read", 0)
    questions = values.get("questions_read", 0)
    written = values.get("examples_written", 0)
    lost_lines = sum(lines_skipped.values())
    files_failed = _by_prefix(values, "files_failed_")
    if values.get("read_unexpected_error"):
        files_failed["unexpected_error"] = values["read_unexpected_error"]
    adds_up = (lines_read == lines["header"] + lines["questions"] + lines["tables"] + lost_lines
               and questions == written + sum(skipped.values()) + sum(dropped.values())
               and not files_failed)
    return {
        "lines_read": lines_read,
        "lines": lines,
        "questions_read": questions,
        "examples_written": written,
        "fraction_converted": round(written / (questions + lost_lines), 6) if questions + lost_lines else None,
        "skipped": skipped,
        "dropped": dropped,
        "limits": {k: v for k, v in sorted(values.items())
                   if k.startswith("limit_") or k.startswith("examples_with_")},
        "reader": _by_prefix(values, "reader_"),
        "files_failed": files_failed,
        "adds_up": adds_up,
    }


def counter_values(result, step_prefix: str = "") -> Dict[str, int]:
    """The job's `tapas_tf` counters by name, summed over the steps that start with `step_prefix`."""
    counters = result.metrics().query(MetricsFilter().with_namespace(COUNTER_NAMESPACE))["counters"]
    values: Dict[str, int] = {}
    for c in counters:
        if c.key.step.startswith(step_prefix):
            values[c.key.metric.name] = values.get(c.key.metric.name, 0) + int(c.committed or c.attempted or 0)
    return dict(sorted(values.items()))


def rows_dropped_report(split_result: dict, config: ConversionConfig, split: Split) -> dict:
    """The split's `drop_rows_to_fit` entry: whether rows were dropped to fit, and where."""
    limits = split_result["limits"]
    return {"enabled": bool(config.for_split(split.is_training).drop_rows_to_fit),
            "by_default": config.drop_rows_to_fit is None,
            "questions": limits.get("examples_with_rows_dropped", 0),
            "rows": limits.get("limit_rows_dropped", 0)}


def collect_report(result, splits: Sequence[Split], output_dir: str,
                   config: Optional[ConversionConfig] = None) -> dict:
    """Counters per split (from the step names, `{split}/...`) as `split_report`s; with the job's
    `config`, each also says whether rows were dropped to fit (`rows_dropped_report`)."""
    report = {"splits": {}}
    for split in splits:
        split_result = split_report(counter_values(result, f"{split.name}/"))
        if not split_result["adds_up"]:
            logging.warning("%s: the counts do not add up (%s); see the failures file", split.name, split_result)
        if config is not None:
            split_result["drop_rows_to_fit"] = rows_dropped_report(split_result, config, split)
        paths = split_paths(output_dir, split.name)
        if split_result["files_failed"]:
            split_result["file_failures"] = file_failure_rows(paths["failures"], split_result["files_failed"])
        report["splits"][split.name] = {**split_result, "files": paths}
    return report


def file_failure_rows(failures_path: str, reasons: Dict[str, int]) -> List[Dict[str, str]]:
    """The rows of a split's failures file that are whole files not read to their end:
    [{"path", "reason", "message"}], for the report and the command's error."""
    rows = []
    with open(failures_path, encoding="utf-8") as f:
        next(f, None)  # The header line.
        for line in f:
            file, lines, question_id, reason, message = (line.rstrip("\n").split("\t", 4) + [""] * 5)[:5]
            if reason in reasons and not question_id and not lines:
                rows.append({"path": file, "reason": reason, "message": message})
    return rows
