"""The JSON report of a data job, built from its Beam counters."""

from typing import Dict, Sequence

from apache_beam.metrics.metric import MetricsFilter

from tapas_tf.pipelines.classifier_data import COUNTER_NAMESPACE
from tapas_tf.pipelines.task_files import split_paths
from tapas_tf.tasks import Split

REPORT_FILE = "conversion_report.json"


def collect_report(result, splits: Sequence[Split], output_dir: str) -> dict:
    """Counters per split (from the step names) plus totals of examples and drops."""
    counters = result.metrics().query(MetricsFilter().with_namespace(COUNTER_NAMESPACE))
    report = {"splits": {}}
    for split in splits:
        values: Dict[str, int] = {}
        for c in counters["counters"]:
            if c.key.step.startswith(f"{split.name}/"):
                values[c.key.metric.name] = values.get(c.key.metric.name, 0) + int(c.committed or c.attempted or 0)
        questions = values.get("questions_read", 0)
        written = values.get("examples_written", 0)
        report["splits"][split.name] = {
            "questions_read": questions,
            "examples_written": written,
            "fraction_converted": round(written / questions, 6) if questions else None,
            "dropped": {k[len("dropped_"):]: v for k, v in sorted(values.items()) if k.startswith("dropped_")},
            "skipped": {k[len("skipped_"):]: v for k, v in sorted(values.items()) if k.startswith("skipped_")},
            "limits": {k: v for k, v in sorted(values.items())
                       if k.startswith("limit_") or k.startswith("examples_with_")},
            "files": split_paths(output_dir, split.name),
        }
    return report
