"""The flags that `tapas-tf ask` and `tapas-tf verify` share: the table file, how results print,
which backend runs the model.

Written once here, so the two command lines cannot drift apart. A command defines them in its own
`define_flags` (one command line runs per process) and declares them its key flags, so that its
`--help` lists them.
"""

from absl import flags


def define_flags(module_name: str) -> None:
    """Defines the shared table flags as flags of the module `module_name` (its --help lists them)."""
    flags.DEFINE_string("table", None, "The table: a CSV file with a header row.", module_name=module_name)
    flags.DEFINE_string("delimiter", None, "The CSV file's field separator (',', ';', '\\t' for a tab); default "
                        "the one its first lines use: a comma, else a semicolon, tab or bar that splits every line "
                        "alike.", module_name=module_name)
    flags.DEFINE_bool("json", False, "Print each result as one JSON line instead of text and the table.",
                      module_name=module_name)
    flags.DEFINE_integer("max_rows_shown", 20, "Rows of the table printed (rows with answers are always shown).",
                         module_name=module_name)
    flags.DEFINE_enum("backend", "auto", ["auto", "lite", "tensorflow"], "lite: the model directory's "
                      "model.tflite, without TensorFlow (starts fast); auto: lite when it has a current one.",
                      module_name=module_name)
