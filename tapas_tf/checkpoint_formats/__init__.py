"""Readers (and a writer) of TAPAS checkpoint formats, all reduced to one canonical form.

The canonical form is a dict `{TF1 name: numpy array in the TF1 layout}`: the names and shapes
of an original TAPAS (TF1) checkpoint, e.g. `bert/encoder/layer_0/attention/self/query/kernel`
<float32>[hidden, hidden]. `models`' `weight_map()` uses the same names, so one strict
assignment (`tapas_tf.import_checkpoint.assign_weights`) serves every format.

- `names`: TF1 <-> Hugging Face names, and the TF1 shape of each of our variables.
- `hf`: Hugging Face `config.json` + `model.safetensors` (or a safe `pytorch_model.bin`).
- `tf1`: the original release's `bert_config.json` + `model.ckpt*`; also writes such checkpoints.
"""
