#!/usr/bin/env bash
# The experiment of issue 16 (the paper's central claim at tiny scale): pre-train a tiny TAPAS on
# Wikipedia tables, fine-tune it on SQA, and compare with the same fine-tuning from scratch.
#
#   experiments/pretraining_vs_scratch.sh STAGE [NAME] [extra run_task flags...]
#
# Stages, in order (each writes under $WORK, default /tmp/exp):
#   data                       exclusion list (SQA and WTQ dev tables), pre-training and SQA data
#   pretrain NAME [flags]      masked-LM pre-training into $WORK/pt_NAME, then its Table 5 evaluation
#   finetune NAME [flags]      SQA fine-tuning into $WORK/ft_NAME, then dev with own and gold previous
#                              answers; pass --init_checkpoint=$WORK/pt_X to start from pre-training
#
# The runs of docs/RESULTS.md:
#   experiments/pretraining_vs_scratch.sh data
#   experiments/pretraining_vs_scratch.sh pretrain main
#   experiments/pretraining_vs_scratch.sh finetune pre --init_checkpoint=/tmp/exp/pt_main
#   experiments/pretraining_vs_scratch.sh finetune scratch
# The ablation of paper Table 7 (the same fine-tuning, the column and row embeddings removed):
#   experiments/pretraining_vs_scratch.sh finetune pre_nocolrow --init_checkpoint=/tmp/exp/pt_main \
#       --model_option=use_column_embeddings=false --model_option=use_row_embeddings=false
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-/tmp/exp}
DATASETS=${DATASETS:-../shared/datasets}
PYTHON=${PYTHON:-.venv/bin/python}
# 2,500 steps x 64 (160,000 examples, about 2 epochs) take 41 minutes on a 2-core CPU without
# AVX-512 (65 examples/s); fine-tuning 2,500 steps x 32 (80,000 examples, 6.5 epochs of SQA) takes
# 38 minutes there (35 examples/s, XLA chosen at start-up, length buckets), 2 more for both dev runs.
PRETRAIN_STEPS=${PRETRAIN_STEPS:-2500}
stage=${1:?usage: $0 data|pretrain NAME|finetune NAME [flags...]}
shift
mkdir -p "$WORK"

stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

case "$stage" in
  data)
    # Tables of the evaluation sets, by the name the pre-training job gives a table (its csv path).
    "$PYTHON" - "$DATASETS" "$WORK/exclude_eval_tables.txt" <<'EOF'
import csv, sys
datasets, out = sys.argv[1:]
names = set()
with open(f"{datasets}/sqa/random-split-1-dev.tsv", newline="") as f:
    names.update(row["table_file"] for row in csv.DictReader(f, delimiter="\t"))
with open(f"{datasets}/wtq/random-split-1-dev.tsv", newline="") as f:
    names.update(row["context"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
with open(out, "w") as f:
    f.writelines(name + "\n" for name in sorted(names))
print(f"{len(names)} evaluation tables -> {out}")
EOF
    stamp "pre-training data"
    "$PYTHON" -m tapas_tf.commands.dispatch create-pretrain-data --output_dir="$WORK/pt_data" \
      --input_pages="$DATASETS/wikipedia/wtq_pages/*/*.html.gz" \
      --input_dumps="$DATASETS/wikipedia/enwiki-sample-pages-articles.xml.bz2" \
      --input_dumps="$DATASETS/wikipedia/enwiki-table-markup.xml.bz2" \
      --exclude_tables="$WORK/exclude_eval_tables.txt"
    stamp "SQA data"
    "$PYTHON" run_task.py --task=SQA --mode=create_data --input_dir="$DATASETS/sqa" --output_dir="$WORK/sqa_data"
    stamp done
    ;;
  pretrain)
    name=${1:?pretrain needs a NAME}; shift
    stamp "pre-training $WORK/pt_$name"
    "$PYTHON" run_task.py --task=PRETRAIN --mode=train --output_dir="$WORK/pt_data" --model_dir="$WORK/pt_$name" \
      --model_size=tiny --train_steps="$PRETRAIN_STEPS" --train_batch_size=64 --learning_rate=5e-4 --warmup_ratio=0.02 \
      --save_checkpoints_steps=500 --keep_checkpoint_max=3 --log_steps=250 --noprogress_bar --seed=1 "$@"
    stamp "Table 5 evaluation"
    "$PYTHON" run_task.py --task=PRETRAIN --mode=evaluate --output_dir="$WORK/pt_data" --model_dir="$WORK/pt_$name"
    stamp done
    ;;
  finetune)
    name=${1:?finetune needs a NAME}; shift
    stamp "fine-tuning $WORK/ft_$name"
    "$PYTHON" run_task.py --task=SQA --mode=train --output_dir="$WORK/sqa_data" --model_dir="$WORK/ft_$name" \
      --model_size=tiny --train_steps=2500 --train_batch_size=32 --learning_rate=5e-4 --warmup_ratio=0.1 \
      --gradient_clipping=1.0 --save_checkpoints_steps=500 --keep_checkpoint_max=6 --log_steps=50 \
      --noprogress_bar --seed=1 "$@"
    stamp "dev, own previous answers"
    "$PYTHON" run_task.py --task=SQA --mode=predict_and_evaluate --output_dir="$WORK/sqa_data" \
      --model_dir="$WORK/ft_$name" --predict_split=dev --noprogress_bar
    stamp "dev, gold previous answers"
    "$PYTHON" run_task.py --task=SQA --mode=predict_and_evaluate --output_dir="$WORK/sqa_data" \
      --model_dir="$WORK/ft_$name" --predict_split=dev --use_gold_previous_answer --noprogress_bar
    stamp done
    ;;
  *)
    echo "unknown stage $stage (data, pretrain, finetune)" >&2
    exit 2
    ;;
esac
