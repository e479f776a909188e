"""The training-data rule as a Beam step: keep the Interactions whose table a training stage may use.

    kept = interactions | "TrainingRule" >> KeepTrainingTables(rule, manifest_prefix="out/training_tables")

Each Interaction's table is decided by `TrainingTableRule.decide(table_id, document_title)`
(`tapas_tf.data.training_tables`): a table of an evaluation split, or of a Wikipedia page that holds
one, is dropped and counted as `tables_rule_excluded_{reason}`; a kept one is counted as
`tables_rule_kept`, and its manifest name (`page:204-page/590#2`, `wtq:csv/204-csv/590.csv`, ...)
is written, once, to `MANIFEST_PREFIX.txt.gz`: the stage's `training_tables.txt.gz`, which
`tapas-tf bundle --training_tables=...` takes.
"""

from typing import Iterator, Optional

import apache_beam as beam
from apache_beam import pvalue

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.training_tables import TrainingTableRule
from tapas_tf.pipelines.classifier_data import counter

MANIFEST = "manifest"  # The tagged output of manifest names.


class _DecideFn(beam.DoFn):
    def __init__(self, rule: TrainingTableRule):
        self._rule = rule

    def process(self, interaction: interaction_pb2.Interaction) -> Iterator:
        table = interaction.table
        decision = self._rule.decide(table.table_id, table.document_title)
        if not decision.kept:
            counter(f"tables_rule_excluded_{decision.reason}").inc()
            return
        counter("tables_rule_kept").inc()
        yield interaction
        yield pvalue.TaggedOutput(MANIFEST, decision.manifest_name)


class KeepTrainingTables(beam.PTransform):
    """Interactions -> the Interactions a training stage may use; writes their manifest.

    Args:
      rule: the rule over the releases (`TrainingTableRule.from_releases`).
      manifest_prefix: where the manifest goes, without `.txt.gz` (None: not written).
    """

    def __init__(self, rule: TrainingTableRule, manifest_prefix: Optional[str] = None):
        super().__init__()
        self._rule = rule
        self._manifest_prefix = manifest_prefix

    def expand(self, interactions):
        decided = interactions | "Decide" >> beam.ParDo(_DecideFn(self._rule)).with_outputs(MANIFEST, main="kept")
        if self._manifest_prefix:
            # One file, in no particular order (sorting six million names would hold them all on
            # one worker); `table_manifest.read_manifest` and `bundle` do not need an order.
            _ = (decided[MANIFEST]
                 | "Distinct" >> beam.Distinct()
                 | "Write" >> beam.io.WriteToText(self._manifest_prefix, file_name_suffix=".txt.gz",
                                                  num_shards=1, shard_name_template=""))
        return decided.kept
