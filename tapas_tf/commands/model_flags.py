"""The flags that `tapas-tf ask`, `serve` and `verify` share: which model, and how it decodes.

Written once here, so the command lines cannot drift apart. A command defines them in its own
`define_flags` (one command line runs per process), as flags of its own module, so that its
`--help` lists them.
"""

from typing import Any, Dict

from absl import flags

import tapas_tf.cli as cli
from tapas_tf.inference.decoding import DecodingRule

FLAGS = flags.FLAGS


def define_flags(module_name: str, aggregation: bool = True) -> None:
    """Defines the model flags as flags of the module `module_name` (its --help lists them);
    `aggregation`: also --aggregation_model_dir and the decoding options (the QA commands')."""
    flags.DEFINE_string("model_dir", None, "A tapas-tf model directory (trained, or imported); "
                        "default the bundled model.", module_name=module_name)
    flags.DEFINE_string("model", None, "A released model by name, downloaded and imported on first use, then "
                        "cached: a Hugging Face repository id (google/tapas-base-finetuned-wtq[@REVISION]) or "
                        "the address of an original TAPAS release zip "
                        "(https://.../tapas_sqa_inter_masklm_base_reset.zip[#sha256=HEX]).", module_name=module_name)
    flags.DEFINE_string("model_revision", None, "The Hub revision (branch, tag or commit) of --model; "
                        "default main.", module_name=module_name)
    flags.DEFINE_string("vocab_file", None, "Vocabulary; default the model directory's vocab.txt, else BERT's.",
                        module_name=module_name)
    flags.register_multi_flags_validator(["model", "model_dir"], lambda v: not (v["model"] and v["model_dir"]),
                                         "give --model (a released model) or --model_dir, not both")
    flags.register_multi_flags_validator(["model", "model_revision"],
                                         lambda v: v["model"] or not v["model_revision"],
                                         "--model_revision needs --model")
    if not aggregation:
        return
    flags.DEFINE_string("aggregation_model_dir", None, "A second model directory, with an aggregation head, that "
                        "answers the questions which read like counting or arithmetic (\"how many\", \"total\") "
                        "and follow up no earlier answer; default, with the bundled model, the bundled aggregation "
                        "model; 'none' turns it off.", module_name=module_name)
    # --threshold, --fallback_to_best_cell, --expected_count: one flag per DecodingRule option.
    cli.define_option_flags(DecodingRule.flag_specs(), "Default: the model's own rule (the best cell for models "
                            "that select one column, as SQA's and WTQ's; the expected count for WTQ's).",
                            module_name)


def table_qa_options() -> Dict[str, Any]:
    """`TableQA.from_model_dir` keyword arguments from the flags (the model directory included)."""
    return dict(model_dir=FLAGS.model_dir, vocab_file=FLAGS.vocab_file,
                aggregation_model_dir=FLAGS.aggregation_model_dir, **cli.option_flag_values(DecodingRule.flag_specs()))


def load_table_qa(**options):
    """The TableQA the flags name: --model (`TableQA.from_pretrained`), else --model_dir or the bundled
    model."""
    from tapas_tf.qa.table_qa import TableQA

    settings = {**table_qa_options(), **options}
    if FLAGS.model:
        del settings["model_dir"]
        return TableQA.from_pretrained(FLAGS.model, revision=FLAGS.model_revision, **settings)
    return TableQA.from_model_dir(**settings)
