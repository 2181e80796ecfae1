#!/bin/bash
# GRPO at a GPU's scale for a SmolLM2 preset: seeds side by side on one GPU, each run's step chosen on the validation
# split, then the test split scored once (BENCHMARKS.md, "Ninth round" for the oracle). From the repository root:
#     PRESET=oracle|function_call RUNS=DIR [SEEDS="1 2 3"] [T_TRAIN=420] [T_TEST=90] [OUT=DIR] \
#         bash experiments/grpo_gpu.sh
# T_TRAIN is a deadline in seconds for the training runs, which are then stopped with SIGINT (their evaluations are
# kept). Each run evaluates the validation split every EVERY steps and keeps a checkpoint with each evaluation;
# experiments/gpu_choose.py picks the step (the metric below, the guard no more than 0.02 under the warm-up's), which is
# scored once on the test split with ao_calib.eval, and so is the warm-up. With OUT set, everything but the
# checkpoints is archived there.
#   oracle: the preset's warm-up and GRPO rows (BENCHMARKS.md, "Twelfth round"), then GRPO at 32 prompts x 8
#     completions a step (the preset's 4 x 8) at the preset's lr and beta (LR=, BETA= to change them); all 300
#     validation rows (own/other/none) every 20 steps; chosen by AUROC within one question text, guarded by
#     accuracy. The ninth round ran this script at commit 889398b (the eighth round's warm-up, lr 3e-4, beta 0.2,
#     4 completions a group).
#   function_call: the preset's warm-up (its passes batched), then GRPO with 16 prompts x 8 completions at the
#     preset's lr and temperature; the 48 generated and 150 real validation cases every 10 steps; chosen by the
#     generated cases' AST accuracy, guarded by the real cases'.
set -u
PRESET=${PRESET:-oracle}
T_TRAIN=${T_TRAIN:-420}
T_TEST=${T_TEST:-90}
SEEDS=${SEEDS:-"1 2 3"}
PY=${PY:-python3}
RUNS=${RUNS:-$PWD/outputs/grpo_gpu_$PRESET}
EXTRA=${EXTRA:-}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} AO_CALIB_ROOT=$PWD
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
case $PRESET in
  oracle)
    WSTEPS=${WSTEPS:-260}; EVERY=${EVERY:-20}; EVN=${EVN:-300}
    ARGS=(experiment=oracle_smollm2 trainer.batch_size=${TB:-32} trainer.lr=${LR:-5e-5} trainer.beta=${BETA:-0.05}
      eval.num_samples=$EVN eval.during_num_samples=$EVN model.max_micro_batch_size=${MB:-256} eval.batch_size=100)
    METRIC=metrics.auroc_within_question; GUARD=metrics.accuracy ;;
  function_call)
    WSTEPS=${WSTEPS:-120}; EVERY=${EVERY:-10}; EVN=${EVN:-48}
    ARGS=(experiment=function_call_smollm2 eval.initial=false trainer.batch_size=${TB:-16}
      trainer.num_generations=${NG:-8} trainer.lr=${LR:-5e-5} eval.num_samples=$EVN eval.during_num_samples=$EVN
      warmup.micro_batch_size=null model.max_micro_batch_size=${MB:-32} eval.batch_size=64)
    METRIC=metrics.accuracy; GUARD=extra_test.metrics.accuracy ;;
  *) echo "PRESET=oracle or function_call, not '$PRESET'"; exit 2 ;;
esac
ARGS+=(task.data.eval_split=validation trainer.max_steps=400 eval.every_steps=$EVERY eval.during_warmup=false
  trainer.save_steps=$EVERY trainer.save_total_limit=null warmup.max_steps=$WSTEPS warmup.save_steps=$WSTEPS $EXTRA)
mkdir -p $RUNS
START=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null
$PY -c "import torch,transformers,trl,peft;print(torch.__version__,transformers.__version__,trl.__version__,peft.__version__)"
PIDS=""
for s in $SEEDS; do
  timeout -s INT -k 20 $T_TRAIN $PY -m ao_calib.run "${ARGS[@]}" trainer.seed=$s hydra.run.dir=$RUNS/s$s \
    > $RUNS/s$s.log 2>&1 &
  PIDS="$PIDS $!"
  sleep 1
done
( while sleep 60; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null; done ) &
MON=$!
wait $PIDS
echo "training stopped at $(( $(date +%s) - START )) s"
$PY -m experiments.gpu_choose $RUNS --metric $METRIC --guard $GUARD --warmup-step $WSTEPS > $RUNS/chosen.txt
cat $RUNS/chosen.txt
TPIDS=""
while read run ck tag value; do
  timeout -s INT -k 10 $T_TEST $PY -m ao_calib.eval run_dir=$run adapter=$ck tag=$tag task.data.eval_split=test \
    > $run/$tag.log 2>&1 &
  TPIDS="$TPIDS $!"
done < $RUNS/chosen.txt
[ -n "$TPIDS" ] && wait $TPIDS  # never a bare wait: the GPU monitor's loop never ends
kill $MON 2>/dev/null
echo "done at $(( $(date +%s) - START )) s"
for f in $RUNS/*.log $RUNS/*/test_*.log; do echo "== $f"; grep -E "\[eval|Traceback|Error|interrupted" $f | tail -8; done
if [ -n "${OUT:-}" ]; then
  tar czf $OUT/grpo_runs.tgz --exclude='checkpoint-*' --exclude='adapter' -C $RUNS .
fi
