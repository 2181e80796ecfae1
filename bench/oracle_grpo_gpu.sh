#!/bin/bash
# oracle_smollm2's GRPO at scale on one GPU, the step chosen on the validation split, then the test split once
# (BENCHMARKS.md, "Ninth round"). Run from the repository root on a machine with a GPU:
#     RUNS=DIR [SEEDS="1 2 3"] [T_TRAIN=420] [OUT=DIR] bash bench/oracle_grpo_gpu.sh
# T_TRAIN is a deadline in seconds for the training runs (they run side by side, one per seed, and are stopped with
# SIGINT, which keeps their evaluations). Every evaluated step keeps its checkpoint (trainer.save_total_limit=null;
# the Ninth round's call kept the last three, so its steps were chosen among 60, 80 and 100).
# Seeds 1-3, one run each: a warm-up that draws the stated number from the whole scale (BENCHMARKS.md, eighth
# round), then GRPO at lr 3e-4 (the rate that separated within one question on seed 42 there) with beta 0.2 (a
# stronger pull to the warm-up's adapter, against the collapse the same rate gave seed 1 at beta 0.05); 32 prompts x
# 4 completions a step in one pass; all 300 validation rows (own/other/none) evaluated every 20 steps, with a
# checkpoint. At the deadline every run is stopped; each run's step with the best validation AUROC within one
# question text (own accuracy no more than 0.02 below the warm-up's) is scored once on the test split, and so is
# each warm-up. Everything but the checkpoints comes back in one archive.
set -u
T_TRAIN=${T_TRAIN:-420}
T_TEST=${T_TEST:-90}
SEEDS=${SEEDS:-"1 2 3"}
LR=${LR:-3e-4}
BETA=${BETA:-0.2}
PY=${PY:-python3}
RUNS=${RUNS:-$PWD/outputs/oracle_grpo_gpu}
EXTRA=${EXTRA:-}
WSTEPS=${WSTEPS:-200}  # warm-up steps (warmup=sft's default)
TB=${TB:-32}
EVERY=${EVERY:-20}
EVN=${EVN:-300}
MB=${MB:-128}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} AO_CALIB_ROOT=$PWD
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
mkdir -p $RUNS
START=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null
$PY -c "import torch,transformers,trl,peft;print(torch.__version__,transformers.__version__,trl.__version__,peft.__version__)"
WIDE=(experiment=oracle_smollm2 task.data.eval_split=validation task.sft_open_unstated=true
  warmup.tag_loss_fraction=1.0 'task.sft_confidences=[0,10,20,30,40,50,60,70,80,90,100]'
  task.rl_unreadable_fraction=0.4 task.rl_none_fraction=0.25 trainer.batch_size=$TB trainer.max_steps=400
  trainer.lr=$LR trainer.beta=$BETA
  eval.every_steps=$EVERY eval.during_num_samples=$EVN eval.num_samples=$EVN eval.during_warmup=false
  trainer.save_steps=$EVERY trainer.save_total_limit=null warmup.max_steps=$WSTEPS warmup.save_steps=$WSTEPS model.max_micro_batch_size=$MB
  eval.batch_size=100 $EXTRA)
PIDS=""
for s in $SEEDS; do
  timeout -s INT -k 20 $T_TRAIN $PY -m ao_calib.run "${WIDE[@]}" trainer.seed=$s hydra.run.dir=$RUNS/s$s \
    > $RUNS/s$s.log 2>&1 &
  PIDS="$PIDS $!"
  sleep 1
done
( while sleep 60; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null; done ) &
MON=$!
wait $PIDS
echo "training stopped at $(( $(date +%s) - START )) s"
# the test split, once per run: the validation-chosen step, and the warm-up
$PY - "$RUNS" "$WSTEPS" > $RUNS/chosen.txt <<'PYEOF'
import json, sys
from pathlib import Path
runs, wsteps = Path(sys.argv[1]), sys.argv[2]
for run in sorted(p for p in runs.iterdir() if p.is_dir()):
    warm = run / "eval_warmup.json"
    base = json.loads(warm.read_text())["metrics"]["accuracy"] if warm.is_file() else None
    best = None
    # ties go to the later step
    for f in sorted(run.glob("eval_step*.json"), key=lambda f: int(f.stem.removeprefix("eval_step"))):
        m = json.loads(f.read_text())["metrics"]
        step = int(f.stem.removeprefix("eval_step"))
        ck = run / "checkpoints" / f"checkpoint-{step}"
        w = m.get("auroc_within_question")
        if w is None or w != w or not (ck / "adapter_model.safetensors").is_file():
            continue
        if base is not None and m["accuracy"] < base - 0.02:
            continue
        if best is None or w >= best[0]:
            best = (w, step, ck)
    if best:
        print(run, best[2], f"test_step{best[1]}", f"{best[0]:.3f}")
    if (run / f"warmup/checkpoints/checkpoint-{wsteps}").is_dir():
        print(run, run / f"warmup/checkpoints/checkpoint-{wsteps}", "test_warmup", "-")
PYEOF
cat $RUNS/chosen.txt
while read run ck tag w; do
  timeout -s INT -k 10 $T_TEST $PY -m ao_calib.eval run_dir=$run adapter=$ck tag=$tag task.data.eval_split=test \
    > $run/$tag.log 2>&1 &
done < $RUNS/chosen.txt
wait
kill $MON 2>/dev/null
echo "done at $(( $(date +%s) - START )) s"
for f in $RUNS/*.log $RUNS/*/test_*.log; do echo "== $f"; grep -E "\[eval|Traceback|Error|interrupted" $f | tail -8; done
if [ -n "${OUT:-}" ]; then
  tar czf $OUT/oracle_runs.tgz --exclude='checkpoint-*' --exclude='adapter' -C $RUNS .
fi
