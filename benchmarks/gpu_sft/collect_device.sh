#!/usr/bin/env bash
# Wait (at most $1 seconds) for the device run to finish, then pack what it wrote so far into $OUT.
EXP=${EXP:-/root/gpu_exp}
end=$(( $(date +%s) + ${1:-560} ))
while [ "$(date +%s)" -lt "$end" ] && ! grep -qE "ALL DONE|FAILED|mismatch" "$EXP/log.txt" 2>/dev/null; do sleep 5; done
cd "$EXP" && tar czf "$OUT/results.tgz" log.txt answers-*.jsonl base_hf/envsim_base_model.json ckpt/*/trainer_log.jsonl ckpt/*/all_results.json ckpt/*/train_results.json 2>/dev/null
grep -v "it/s\]\|s/it\]" "$EXP/log.txt" | tail -60
