#!/usr/bin/env bash
# The GPU checks of the speed issue in one run (the device machine is lent briefly):
# kernel correctness on CUDA, bench/gpu_apply.py, and bench/e2e.py on a random-weight
# Llama-3.2-1B-shaped model with the Llama-3 tokenizer. Results go to $OUT (or bench/results).
#   usage: bash bench/gpu_session.sh WHEELS_DIR TOKENIZER_DIR
set -u
WHEELS=${1:-.whl}; TOK=${2:-../shared/data/tokenizers/llama3}; DEST=${OUT:-bench/results}
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$DEST/gpu_session.log"
python3 -m pytest -q -rf --tb=short -p no:cacheprovider tests/test_bitmask.py 2>&1 | tail -40 | tee -a "$DEST/gpu_session.log"
python3 bench/gpu_apply.py --out "$DEST/gpu_apply.json" 2>&1 | tail -60 | tee -a "$DEST/gpu_session.log"
python3 bench/e2e.py --random-llama 1b --tokenizer "$TOK" --device cuda --batches 1,64 --max-new-tokens 128 --repeats 5 \
  --out "$DEST/e2e_cuda.json" 2>&1 | tail -20 | tee -a "$DEST/gpu_session.log"
