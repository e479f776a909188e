"""The flags that `tapas_tf.ask` and `tapas-tf verify` share: the table file, how results print,
which backend runs the model.

Defined once here, so that a process that imports both command lines (the layout test) defines
each flag once; each command declares them as its own key flags (`--help` lists them).
"""

from absl import flags

flags.DEFINE_string("table", None, "The table: a CSV file with a header row.")
flags.DEFINE_string("delimiter", None, "The CSV file's field separator (',', ';', '\\t' for a tab); default the "
                    "one its first lines use: a comma, else a semicolon, tab or bar that splits every line alike.")
flags.DEFINE_bool("json", False, "Print each result as one JSON line instead of text and the table.")
flags.DEFINE_integer("max_rows_shown", 20, "Rows of the table printed (rows with answers are always shown).")
flags.DEFINE_enum("backend", "auto", ["auto", "lite", "tensorflow"], "lite: the model directory's "
                  "model.tflite, without TensorFlow (starts fast); auto: lite when it has a current one.")

SHARED = ("table", "delimiter", "json", "max_rows_shown", "backend")
