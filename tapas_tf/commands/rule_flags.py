"""The training-data rule's flags, shared by every command that makes training data from tables
(`collect-tables`, `make-ict-pairs`): where the releases are, and which dev splits are scored.

Written once here so that the commands cannot drift apart; a command defines them in its own
`define_flags` and builds the rule with `rule_from_flags()`.
"""

from typing import Optional

from absl import flags

from tapas_tf.data import training_tables

FLAGS = flags.FLAGS


def define_flags(module_name: str) -> None:
    """Defines the release flags as flags of the module `module_name` (its --help lists them)."""
    flags.DEFINE_string("wtq_release", None, "The WikiTableQuestions release (training.tsv, csv/): the rule "
                        "keeps only its training tables, less those of the scored dev split.", module_name=module_name)
    flags.DEFINE_string("sqa_release", None, "The SQA release (train.tsv, random-split-1-dev.tsv).",
                        module_name=module_name)
    flags.DEFINE_string("tabfact_release", None, "The TabFact release (train_examples.json, val_examples.json, "
                        "all_csv/): only train's tables are kept, and no page titled as a val table's caption.",
                        module_name=module_name)
    flags.DEFINE_string("wtq_pages", None, "WikiTableQuestions' page crawl (2xx-page/N.json): a page of an "
                        "evaluation table, and its whole article, is left out.", module_name=module_name)
    flags.DEFINE_multi_string("scored_dev_split", list(training_tables.SCORED_DEV_FILES),
                              "A dev split file (in the WTQ and SQA releases) that scores are measured on: its "
                              "tables are left out (repeatable).", module_name=module_name)


def rule_from_flags() -> Optional[training_tables.TrainingTableRule]:
    """The rule of the release flags given; None when no release is given (the rule is then not applied)."""
    if not (FLAGS.wtq_release or FLAGS.sqa_release or FLAGS.tabfact_release):
        return None
    return training_tables.TrainingTableRule.from_releases(training_tables.Releases(
        wtq_dir=FLAGS.wtq_release, sqa_dir=FLAGS.sqa_release, tabfact_dir=FLAGS.tabfact_release,
        wtq_pages_dir=FLAGS.wtq_pages, scored_dev_files=tuple(FLAGS.scored_dev_split)))
