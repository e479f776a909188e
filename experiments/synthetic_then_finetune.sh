#!/usr/bin/env bash
# Issue 25: a tiny model trained first on synthetic questions with gold cells and operators (the
# SYNTHETIC task: questions made from WTQ's training tables), then fine-tuned on WTQ from answers
# only and on SQA, as the released TAPAS models were fine-tuned on WikiSQL and SQA before WTQ.
#
#   experiments/synthetic_then_finetune.sh STAGE [args...]
#
# Stages, in order (each writes under $WORK, default /tmp/exp; needs the SQA and WTQ data and the
# mixture of `experiments/minilm_sqa_wtq.sh data`):
#   tables                  the distinct WTQ training tables, without the held-out slice's and
#                           without any SQA or WTQ dev table -> $WORK/synth/tables/train.tfrecord,
#                           and the names of the tables left out -> $WORK/synth/exclude_tables.txt
#   data                    SYNTHETIC create_data on them -> $WORK/synth/data
#   synth NAME [flags]      a tiny model on the synthetic questions ($SYNTH_DATA, default
#                           $WORK/synth/data) -> $WORK/synth_NAME; with SYNTH_INIT=DIR, the model
#                           of DIR (both heads kept) instead of a tiny one from random weights
#   stack NAME SOURCE [ORDER]
#                           a deeper model whose layers are copies of SOURCE's (ORDER, default
#                           0,1,0,1: a bundled tiny model becomes L4/H128) -> $WORK/synth_NAME,
#                           to train with `synth` (SYNTH_INIT) or `finetune ... NAME`
# The wider table set of session 16 (9,588 tables), after `tables` and before `synth`:
#   pages                   the Wikipedia job's tables of the WTQ pages and the dump samples,
#                           those tables left out -> $WORK/synth/pages/interactions
#   tables2                 the WTQ training tables (held-out ones left out) and those
#                           -> $WORK/synth2/tables/train.tfrecord
#   data2                   SYNTHETIC create_data on them -> $WORK/synth2/data
#   finetune KIND NAME FROM [flags]
#                           KIND wtq or sqa: fine-tune $WORK/synth_FROM (both heads kept) on the
#                           mixture's WTQ (or SQA) half -> $WORK/KIND_NAME; then
#                           `KIND=... experiments/minilm_sqa_wtq.sh holdout NAME` and `dev NAME`
#                           score it on the held-out slice and on dev.
# The runs of docs/RESULTS.md (issue 25, session 15):
#   experiments/synthetic_then_finetune.sh tables && experiments/synthetic_then_finetune.sh data
#   experiments/synthetic_then_finetune.sh synth tiny
#   experiments/synthetic_then_finetune.sh finetune wtq syn tiny
#   experiments/synthetic_then_finetune.sh finetune sqa syn tiny
# and of session 16 (the bundled pair since then):
#   experiments/synthetic_then_finetune.sh tables && ... pages && ... tables2 && ... data2
#   SYNTH_DATA=$WORK/synth2/data SYNTH_STEPS=12000 experiments/synthetic_then_finetune.sh synth s2 \
#     --save_checkpoints_steps=1000 --log_steps=100 --shuffle_buffer=50000
#   experiments/synthetic_then_finetune.sh finetune wtq s2 s2
#   experiments/synthetic_then_finetune.sh finetune sqa s2 s2
# and of session 18 (a mini model, L4/H256, through the same stage; the size flag overrides tiny):
#   SYNTH_DATA=$WORK/synth2/data SYNTH_STEPS=4000 experiments/synthetic_then_finetune.sh synth mini \
#     --model_size=mini --learning_rate=3e-4 --save_checkpoints_steps=250 --keep_checkpoint_max=8 \
#     --log_steps=25 --shuffle_buffer=50000
#   experiments/synthetic_then_finetune.sh finetune sqa mini mini --learning_rate=3e-4
#   experiments/synthetic_then_finetune.sh finetune wtq mini mini --learning_rate=3e-4
# and of sessions 21-22 (a tiny model with question-match embeddings; session 21's 6,000-step stage
# was lost to a machine reset, session 22 ran 4,000; its WTQ model, step 1,000, is the bundled wtq_tiny):
#   SYNTH_DATA=$WORK/synth2/data SYNTH_STEPS=4000 experiments/synthetic_then_finetune.sh synth qm \
#     --save_checkpoints_steps=500 --keep_checkpoint_max=30 --log_steps=100 --shuffle_buffer=50000 \
#     --model_option=use_question_match_embeddings=true
#   TRAIN_STEPS=2000 experiments/synthetic_then_finetune.sh finetune sqa qm qm
#   TRAIN_STEPS=1500 experiments/synthetic_then_finetune.sh finetune wtq qm qm
# and of session 23 (the same at 12,000 steps; its SQA step 1,000 and WTQ step 1,500 are the bundled pair):
#   SYNTH_DATA=$WORK/synth2/data SYNTH_STEPS=12000 experiments/synthetic_then_finetune.sh synth qm12 \
#     --save_checkpoints_steps=1000 --keep_checkpoint_max=30 --log_steps=100 --shuffle_buffer=50000 \
#     --model_option=use_question_match_embeddings=true
#   TRAIN_STEPS=2500 experiments/synthetic_then_finetune.sh finetune sqa qm12 qm12
#   TRAIN_STEPS=1500 experiments/synthetic_then_finetune.sh finetune wtq qm12 qm12
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-/tmp/exp}
DATASETS=${DATASETS:-../shared/datasets}
PYTHON=${PYTHON:-.venv/bin/python}
SYNTH_STEPS=${SYNTH_STEPS:-3000}
SYNTH_DATA=${SYNTH_DATA:-$WORK/synth/data}
WIKIPEDIA=$DATASETS/wikipedia
stage=${1:?usage: $0 tables|data|pages|tables2|data2|synth NAME|stack NAME SOURCE|finetune KIND NAME FROM [flags...]}
shift

stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }
# No table that a score is measured on: SQA's and WTQ's dev splits and the held-out slice.
EXCLUDE=(--exclude_interactions="$WORK/wtq_data/interactions/dev.tfrecord"
         --exclude_interactions="$WORK/sqa_data/interactions/dev.tfrecord"
         --exclude_interactions="$WORK/mix/interactions/holdout.tfrecord")

case "$stage" in
  tables)
    "$PYTHON" -m tapas_tf.commands.dispatch collect-tables --interactions="$WORK/wtq_data/interactions/train.tfrecord" \
      "${EXCLUDE[@]}" --output="$WORK/synth/tables/train.tfrecord" --excluded_out="$WORK/synth/exclude_tables.txt"
    ;;
  data)
    stamp "SYNTHETIC create_data"
    "$PYTHON" run_task.py --task=SYNTHETIC --mode=create_data --input_dir="$WORK/synth/tables" \
      --output_dir="$WORK/synth/data" --noprogress_bar
    stamp done
    ;;
  pages)
    stamp "Wikipedia tables"
    "$PYTHON" -m tapas_tf.commands.dispatch create-pretrain-data --stage=extract --interactions_format=tfrecord \
      --input_dumps="$WIKIPEDIA/enwiki-sample-pages-articles.xml.bz2" \
      --input_dumps="$WIKIPEDIA/enwiki-table-markup.xml.bz2" --input_pages="$WIKIPEDIA/wtq_pages/*/*.html.gz" \
      --exclude_tables="$WORK/synth/exclude_tables.txt" --output_dir="$WORK/synth/pages" --noprogress_bar
    stamp done
    ;;
  tables2)
    # Every shard the Wikipedia job wrote (one per bundle).
    pages=("$WORK"/synth/pages/interactions/*.tfrecord)
    "$PYTHON" -m tapas_tf.commands.dispatch collect-tables --interactions="$WORK/wtq_data/interactions/train.tfrecord" \
      "${pages[@]/#/--interactions=}" "${EXCLUDE[@]}" --output="$WORK/synth2/tables/train.tfrecord"
    ;;
  data2)
    stamp "SYNTHETIC create_data, the wider table set"
    "$PYTHON" run_task.py --task=SYNTHETIC --mode=create_data --input_dir="$WORK/synth2/tables" \
      --output_dir="$WORK/synth2/data" --noprogress_bar
    stamp done
    ;;
  synth)
    name=${1:?synth needs a NAME}; shift
    stamp "training $WORK/synth_$name"
    if [ -n "${SYNTH_INIT:-}" ]; then start=(--init_checkpoint="$SYNTH_INIT" --init_heads --noreset_cell_selection_weights)
    else start=(--model_size=tiny); fi  # A later --model_size in the flags wins (absl keeps the last).
    # The tiny recipe of the SQA and WTQ runs (5e-4, 10% warm-up, linear decay, clipping 1.0).
    "$PYTHON" run_task.py --task=SYNTHETIC --mode=train --output_dir="$SYNTH_DATA" \
      --model_dir="$WORK/synth_$name" "${start[@]}" --train_steps="$SYNTH_STEPS" --train_batch_size=32 \
      --learning_rate=5e-4 --warmup_ratio=0.1 --gradient_clipping=1.0 --save_checkpoints_steps=500 \
      --keep_checkpoint_max=6 --log_steps=50 --noprogress_bar --seed=1 "$@"
    stamp done
    ;;
  stack)
    name=${1:?stack needs a NAME}; source=${2:?stack needs a SOURCE model directory}
    "$PYTHON" experiments/stack_layers.py --source="$source" --output="$WORK/synth_$name" --layer_order="${3:-0,1,0,1}"
    ;;
  finetune)
    kind=${1:?finetune needs KIND (wtq or sqa)}; name=${2:?finetune needs a NAME}; from=${3:?finetune needs FROM}
    shift 3
    case "$kind" in
      wtq) task=WTQ; steps=${TRAIN_STEPS:-1500}
           # Temperature 1.0: the cell head was trained at 1.0 on the synthetic questions; WTQ's
           # 0.035 would multiply its logits by 28.
           extra=(--noreset_cell_selection_weights --temperature=1.0) ;;
      sqa) task=SQA; steps=${TRAIN_STEPS:-2500}; extra=() ;;
      *) echo "KIND must be wtq or sqa, not $kind" >&2; exit 2 ;;
    esac
    stamp "fine-tuning $WORK/synth_$from on $task -> $WORK/${kind}_$name"
    "$PYTHON" run_task.py --task="$task" --mode=train --train_file="$WORK/mix/tf_examples/train_$kind.tfrecord" \
      --model_dir="$WORK/${kind}_$name" --init_checkpoint="$WORK/synth_$from" --init_heads "${extra[@]}" \
      --train_steps="$steps" --train_batch_size=32 --learning_rate=5e-4 --warmup_ratio=0.1 \
      --gradient_clipping=1.0 --save_checkpoints_steps=250 --keep_checkpoint_max=12 --log_steps=50 \
      --noprogress_bar --seed=1 "$@"
    stamp done
    ;;
  *)
    echo "unknown stage $stage (tables, data, pages, tables2, data2, synth, stack, finetune)" >&2
    exit 2
    ;;
esac
