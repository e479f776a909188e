#!/usr/bin/env bash
# The shipped model of issue 25: MiniLM (a text-pre-trained BERT, 6 layers, hidden 384) fine-tuned
# on SQA and WikiTableQuestions together, with WTQ's heads (cell selection, aggregation) and its
# answer-only supervision where there are no cell labels.
#
#   [KIND=mix|sqa|wtq] experiments/minilm_sqa_wtq.sh STAGE [NAME] [extra run_task flags...]
#
# KIND picks the model: `mix` (default) is one model with WTQ's heads trained on both tasks; `sqa`
# is SQA's heads (previous answers, no aggregation) trained on the mixture's SQA examples alone;
# `wtq` is WTQ's heads on its WTQ examples alone. Runs are $WORK/KIND_NAME.
#
# Stages (each writes under $WORK, default /tmp/exp; safe to re-run, and `train` resumes):
#   data                 SQA and WTQ create_data, the mixture and its held-out slice (mix_tasks.py)
#   init                 $WORK/minilm_TASK_init: MiniLM with the task's heads (tapas_tf.init_from_bert)
#   train NAME [flags]   trains (or resumes) $WORK/KIND_NAME from init; stop it at any time
#   holdout NAME [STEP]  per checkpoint, on the held-out training tables: WTQ denotation accuracy
#                        (KIND_NAME/holdout/STEP_metrics.json, not for `sqa`) and SQA ALL
#                        (STEP_sqa_metrics.json, not for `wtq`); how a checkpoint is chosen, not dev
#   dev NAME [flags]     WTQ dev denotation (predictions/wtq_dev_metrics.json), SQA dev ALL with
#                        own and gold previous answers (dev_metrics.json, dev_gold_previous_metrics.json);
#                        --checkpoint=... for another checkpoint than the newest
#
# The runs of docs/RESULTS.md ("A model worth asking"):
#   experiments/minilm_sqa_wtq.sh data && experiments/minilm_sqa_wtq.sh init
#   experiments/minilm_sqa_wtq.sh train main
#   KIND=sqa experiments/minilm_sqa_wtq.sh init && KIND=sqa TRAIN_STEPS=5000 BATCH=16 \
#     experiments/minilm_sqa_wtq.sh train a --precision=float32
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-/tmp/exp}
DATASETS=${DATASETS:-../shared/datasets}
PYTHON=${PYTHON:-.venv/bin/python}
TRAIN_STEPS=${TRAIN_STEPS:-1100}
BATCH=${BATCH:-32}
KIND=${KIND:-mix}
case "$KIND" in
  mix) TASK=WTQ; TRAIN_FILE=train.tfrecord ;;
  sqa) TASK=SQA; TRAIN_FILE=train_sqa.tfrecord ;;
  wtq) TASK=WTQ; TRAIN_FILE=train_wtq.tfrecord ;;
  *) echo "KIND must be mix, sqa or wtq, not $KIND" >&2; exit 2 ;;
esac
INIT="$WORK/minilm_$(echo "$TASK" | tr A-Z a-z)_init"
stage=${1:?usage: $0 data|init|train NAME|holdout NAME|dev NAME [flags...]}
shift
mkdir -p "$WORK"

stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

case "$stage" in
  data)
    stamp "SQA and WTQ data"
    "$PYTHON" run_task.py --task=SQA --mode=create_data --input_dir="$DATASETS/sqa" --output_dir="$WORK/sqa_data" \
      --noprogress_bar
    "$PYTHON" run_task.py --task=WTQ --mode=create_data --input_dir="$DATASETS/wtq" --output_dir="$WORK/wtq_data" \
      --drop_rows_to_fit --noprogress_bar
    stamp "mixture"
    "$PYTHON" experiments/mix_tasks.py --sqa_data="$WORK/sqa_data" --wtq_data="$WORK/wtq_data" \
      --wtq_dataset="$DATASETS/wtq" --output_dir="$WORK/mix"
    stamp done
    ;;
  init)
    "$PYTHON" -m tapas_tf.init_from_bert --model_dir="$INIT" --task="$TASK"
    ;;
  train)
    name=${1:?train needs a NAME}; shift
    stamp "training $WORK/${KIND}_$name"
    # A peak rate of 2e-4 (10% warm-up, linear decay, clipping at 1.0): a probe of MiniLM on SQA
    # learned nothing in 500 steps at 5e-5 and was at dev ALL 0.17 after 800 at 2e-4 (batch 16).
    "$PYTHON" run_task.py --task="$TASK" --mode=train --train_file="$WORK/mix/tf_examples/$TRAIN_FILE" \
      --model_dir="$WORK/${KIND}_$name" --init_checkpoint="$INIT" \
      --train_steps="$TRAIN_STEPS" --train_batch_size="$BATCH" --learning_rate=2e-4 --warmup_ratio=0.1 \
      --gradient_clipping=1.0 --save_checkpoints_steps=100 --keep_checkpoint_max=30 --log_steps=25 \
      --nouse_xla --noprogress_bar --seed=1 "$@"
    stamp done
    ;;
  holdout)
    # Prediction writes predictions/train_metrics.json; each checkpoint's copy is kept as
    # holdout/STEP_metrics.json (WTQ) and STEP_sqa_metrics.json (SQA, each question seeing the
    # model's own previous answer); a checkpoint already evaluated is skipped.
    name=${1:?holdout needs a NAME}; step=${2:-}
    run="$WORK/${KIND}_$name"
    mkdir -p "$run/holdout"
    show() { "$PYTHON" -c "import json,sys; m=json.load(open(sys.argv[1])); print(sys.argv[1], {k: v for k, v in m.items() if not isinstance(v, dict)})" "$1"; }
    for ckpt in "$run"/checkpoints/ckpt-*.index; do
      ckpt=${ckpt%.index}
      [ -n "$step" ] && [ "${ckpt##*-}" != "$step" ] && continue
      prefix="$run/holdout/${ckpt##*-}"
      if [ "$KIND" != sqa ] && [ ! -f "${prefix}_metrics.json" ]; then
        stamp "held-out WTQ, ${ckpt##*/}"
        "$PYTHON" run_task.py --task=WTQ --mode=predict_and_evaluate --output_dir="$WORK/wtq_data" \
          --model_dir="$run" --checkpoint="$ckpt" --interactions_file="$WORK/mix/interactions/holdout.tfrecord" \
          --predict_split=train --drop_rows_to_fit --noprogress_bar >> "$prefix.log" 2>&1
        cp "$run/predictions/train_metrics.json" "${prefix}_metrics.json"
        show "${prefix}_metrics.json"
      fi
      if [ "$KIND" != wtq ] && [ ! -f "${prefix}_sqa_metrics.json" ]; then
        stamp "held-out SQA, ${ckpt##*/}"
        "$PYTHON" run_task.py --task=SQA --mode=predict_and_evaluate --output_dir="$WORK/sqa_data" \
          --model_dir="$run" --checkpoint="$ckpt" --interactions_file="$WORK/mix/interactions/holdout_sqa.tfrecord" \
          --predict_split=train --noprogress_bar >> "$prefix.log" 2>&1
        cp "$run/predictions/train_metrics.json" "${prefix}_sqa_metrics.json"
        show "${prefix}_sqa_metrics.json"
      fi
    done
    ;;
  dev)
    name=${1:?dev needs a NAME}; shift
    run="$WORK/${KIND}_$name"
    if [ "$KIND" != sqa ]; then
      stamp "WTQ dev"
      "$PYTHON" run_task.py --task=WTQ --mode=predict_and_evaluate --output_dir="$WORK/wtq_data" \
        --model_dir="$run" --predict_split=dev --drop_rows_to_fit --noprogress_bar "$@"
      # SQA's dev prediction writes the same file names.
      for file in dev.tsv dev_metrics.json; do
        mv "$run/predictions/$file" "$run/predictions/wtq_$file"
      done
    fi
    if [ "$KIND" != wtq ]; then
      stamp "SQA dev, own previous answers"
      "$PYTHON" run_task.py --task=SQA --mode=predict_and_evaluate --output_dir="$WORK/sqa_data" \
        --model_dir="$run" --predict_split=dev --noprogress_bar "$@"
      stamp "SQA dev, gold previous answers"
      "$PYTHON" run_task.py --task=SQA --mode=predict_and_evaluate --output_dir="$WORK/sqa_data" \
        --model_dir="$run" --predict_split=dev --use_gold_previous_answer --noprogress_bar "$@"
    fi
    stamp done
    ;;
  *)
    echo "unknown stage $stage (data, init, train, holdout, dev)" >&2
    exit 2
    ;;
esac
