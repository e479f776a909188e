#!/usr/bin/env bash
# Issue 56: the bundled models again, trained only on training tables (the rule of
# tapas_tf.data.training_tables), with a larger default where it pays.
#
#   experiments/clean_models.sh STAGE [args...]
#
# Stages, in order (each writes under $WORK, default /work/runs/clean; resumable: a stage that
# trains resumes from its newest checkpoint):
#   data        SQA and WTQ create_data (WTQ's train split: random-split-1-train.tsv, whose tables
#               are disjoint from the dev split scored on); the Wikipedia job's tables of the WTQ
#               pages and the dump samples under the rule (the job is given the releases); the
#               synthetic stage's tables under the rule (report, manifest); SYNTHETIC create_data
#   synth NAME [flags]
#               a model on the synthetic questions -> $WORK/synth_NAME (default mini, bfloat16
#               where the CPU has avx512_bf16 or amx_bf16: the trainer chooses at start-up)
#   mix         SQA's and WTQ's training examples under the rule, with a held-out slice of 60 WTQ
#               training tables for checkpoints and calibration -> $WORK/mix (experiments/mix_tasks.py)
#   finetune KIND NAME FROM [flags]
#               KIND sqa or wtq: $WORK/synth_FROM (both heads kept) fine-tuned on the mixture's
#               half of that task -> $WORK/KIND_NAME
#   statements  TabFact create_data (train and val), and the intermediate pre-training statements
#               of Eisenschlos et al. (2020) from TabFact's train tables only (make-statements keeps
#               the rule; 400 train tables held out for choosing) -> $WORK/tabfact_data,
#               $WORK/tf_statements, $WORK/tf_statements_data
#   tabfact NAME FROM [flags]
#               $WORK/synth_FROM's encoder on the made statements (INTERMEDIATE_STEPS) ->
#               $WORK/tfstmt_NAME, then on TabFact train (TRAIN_STEPS) -> $WORK/tabfact_NAME
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${WORK:-/work/runs/clean}
DATASETS=${DATASETS:-../shared/datasets}
PYTHON=${PYTHON:-.venv/bin/python}
TAPAS=("$PYTHON" -m tapas_tf.commands.dispatch)
SYNTH_STEPS=${SYNTH_STEPS:-8000}
WIKIPEDIA=$DATASETS/wikipedia
RELEASES=(--wtq_release="$DATASETS/wtq" --sqa_release="$DATASETS/sqa" --tabfact_release="$DATASETS/tabfact"
          --wtq_pages="$WIKIPEDIA/wtq_pages")
stage=${1:?usage: $0 data|synth NAME|mix|finetune KIND NAME FROM [flags...]}
shift

stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

case "$stage" in
  data)
    mkdir -p "$WORK"
    stamp "SQA and WTQ create_data"
    "${TAPAS[@]}" create-data --task=SQA --input_dir="$DATASETS/sqa" --output_dir="$WORK/sqa_data" --noprogress_bar
    "${TAPAS[@]}" create-data --task=WTQ --input_dir="$DATASETS/wtq" --output_dir="$WORK/wtq_data" \
      --drop_rows_to_fit --noprogress_bar
    stamp "Wikipedia tables of pages that hold no evaluation table (the job keeps the rule itself)"
    "${TAPAS[@]}" create-pretrain-data --stage=extract --interactions_format=tfrecord \
      --input_dumps="$WIKIPEDIA/enwiki-sample-pages-articles.xml.bz2" \
      --input_dumps="$WIKIPEDIA/enwiki-table-markup.xml.bz2" --input_pages="$WIKIPEDIA/wtq_pages/*/*.html.gz" \
      "${RELEASES[@]}" --output_dir="$WORK/synth/pages" --noprogress_bar
    stamp "the synthetic stage's tables under the rule"
    "${TAPAS[@]}" collect-tables --interactions="$WORK/wtq_data/interactions/train.tfrecord" \
      --interactions="$WORK/synth/pages/interactions/*.tfrecord" "${RELEASES[@]}" \
      --output="$WORK/synth/tables/train.tfrecord" --report="$WORK/synth/tables_report.json" \
      --manifest_out="$WORK/synth/training_tables.txt.gz"
    stamp "SYNTHETIC create_data"
    "${TAPAS[@]}" create-data --task=SYNTHETIC --input_dir="$WORK/synth/tables" --output_dir="$WORK/synth/data" \
      --noprogress_bar
    stamp done
    ;;
  synth)
    name=${1:?synth needs a NAME}; shift
    stamp "training $WORK/synth_$name"
    "${TAPAS[@]}" train --task=SYNTHETIC --output_dir="$WORK/synth/data" --model_dir="$WORK/synth_$name" \
      --model_size=mini --train_steps="$SYNTH_STEPS" --train_batch_size=32 --learning_rate=3e-4 \
      --warmup_ratio=0.1 --gradient_clipping=1.0 --save_checkpoints_steps=500 --keep_checkpoint_max=30 \
      --log_steps=100 --noprogress_bar --seed=1 --model_option=use_question_match_embeddings=true "$@"
    stamp done
    ;;
  mix)
    "$PYTHON" experiments/mix_tasks.py --sqa_data="$WORK/sqa_data" --wtq_data="$WORK/wtq_data" \
      --wtq_dataset="$DATASETS/wtq" --sqa_dataset="$DATASETS/sqa" --output_dir="$WORK/mix"
    ;;
  finetune)
    kind=${1:?finetune needs KIND (wtq or sqa)}; name=${2:?finetune needs a NAME}; from=${3:?finetune needs FROM}
    shift 3
    case "$kind" in
      # Temperature 1.0: the cell head was trained at 1.0 on the synthetic questions.
      wtq) task=WTQ; steps=${TRAIN_STEPS:-1500}; extra=(--noreset_cell_selection_weights --temperature=1.0) ;;
      sqa) task=SQA; steps=${TRAIN_STEPS:-2500}; extra=() ;;
      *) echo "KIND must be wtq or sqa, not $kind" >&2; exit 2 ;;
    esac
    stamp "fine-tuning $WORK/synth_$from on $task -> $WORK/${kind}_$name"
    "${TAPAS[@]}" train --task="$task" --train_file="$WORK/mix/tf_examples/train_$kind.tfrecord" \
      --output_dir="$WORK/${kind}_data" --model_dir="$WORK/${kind}_$name" --init_checkpoint="$WORK/synth_$from" \
      --init_heads "${extra[@]}" --train_steps="$steps" --train_batch_size=32 --learning_rate=5e-4 \
      --warmup_ratio=0.1 --gradient_clipping=1.0 --save_checkpoints_steps=250 --keep_checkpoint_max=12 \
      --log_steps=50 --noprogress_bar --seed=1 "$@"
    stamp done
    ;;
  statements)
    stamp "TabFact create_data"
    "${TAPAS[@]}" create-data --task=TABFACT --input_dir="$DATASETS/tabfact" --output_dir="$WORK/tabfact_data" \
      --noprogress_bar
    stamp "statements made from TabFact's train tables"
    "${TAPAS[@]}" make-statements --input_dir="$DATASETS/tabfact" --output_dir="$WORK/tf_statements" \
      --pairs_per_table="${PAIRS_PER_TABLE:-16}" --include_original --holdout_tables=400
    "${TAPAS[@]}" create-data --task=TABFACT --input_dir="$WORK/tf_statements" \
      --output_dir="$WORK/tf_statements_data" --noprogress_bar
    stamp done
    ;;
  tabfact)
    name=${1:?tabfact needs a NAME}; from=${2:?tabfact needs FROM}
    shift 2
    common=(--train_batch_size=32 --warmup_ratio=0.05 --gradient_clipping=1.0 --save_checkpoints_steps=500
            --keep_checkpoint_max=30 --log_steps=100 --noprogress_bar --seed=1)
    stamp "intermediate pre-training $WORK/synth_$from on made statements -> $WORK/tfstmt_$name"
    "${TAPAS[@]}" train --task=TABFACT --output_dir="$WORK/tf_statements_data" --model_dir="$WORK/tfstmt_$name" \
      --init_checkpoint="$WORK/synth_$from" --train_steps="${INTERMEDIATE_STEPS:-8000}" \
      --learning_rate=5e-4 "${common[@]}" "$@"
    stamp "fine-tuning $WORK/tfstmt_$name on TabFact train -> $WORK/tabfact_$name"
    "${TAPAS[@]}" train --task=TABFACT --output_dir="$WORK/tabfact_data" --model_dir="$WORK/tabfact_$name" \
      --init_checkpoint="$WORK/tfstmt_$name" --init_heads --train_steps="${TRAIN_STEPS:-3000}" \
      --learning_rate=2e-4 "${common[@]}" "$@"
    stamp done
    ;;
  *)
    echo "unknown stage $stage (data, synth, mix, finetune, statements, tabfact)" >&2
    exit 2
    ;;
esac
