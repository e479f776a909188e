"""Stage 3b, checkpoints: the model directory and the checkpoint formats it is made from.

Holds the self-describing model directory (`model_dir`: config JSON plus
checkpoints, and `load_model`), the importer of released checkpoints
(`importer`) with its format readers (`hf`: Hugging Face safetensors; `tf1`:
the original release, which it can also write; `names`: the mapping of
variable names), released models by name (`released`: a Hugging Face Hub
repository through `hub`, or an original release zip through `download`,
imported once and cached), and initialisation of a TAPAS encoder from a text
BERT (`bert_init`).

All formats are reduced to one canonical form, a dict `{TF1 name: numpy array in
the TF1 layout}`, e.g. `bert/encoder/layer_0/attention/self/query/kernel`
<float32>[hidden, hidden]. `tapas_tf.models`' `weight_map()` uses the same
names, so one strict assignment (`importer.assign_weights`) serves every format.

May import: `tapas_tf.models` and `tapas_tf.task_registry.presets` (task presets of imported models).
"""
