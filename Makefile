# slatelib: SlateDB 0.17-compatible library and PySpark maintenance jobs.
# `make help` lists the targets. `make test` and `make run` bootstrap .venv themselves.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AIRFLOW_VENV := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
PYTEST := $(BIN)/python -m pytest
DEMO_DIR := $(CURDIR)/var/demo
DEMO_DB := file://$(DEMO_DIR)/db

.DEFAULT_GOAL := help
.PHONY: help install jars chromium lint typecheck test test-unit test-integration test-spark test-interop \
        test-dags test-cluster test-faults test-sanitize soak check run bench bench-compaction bench-writer bench-gc bench-rescale bench-worker bench-cost bench-cas bench-export bench-export-delta bench-large package-jobs package-executor-env wheels test-wheels flatbuffers clean docs

help: ## list targets
	@grep -hE '^[.a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml setup.py $(wildcard slatelib/_*.c) $(wildcard slatelib/csrc/*.[ch])
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q -e '.[spark,test]'
	@touch $(STAMP)

install: $(STAMP) $(JARS_STAMP) ## create .venv, install slatelib with the spark and test extras, fetch the Spark jars

# The Spark jars (delta-spark, delta-storage; hadoop-aws with its AWS SDK bundle), pinned
# with their SHA-256 in slatelib/spark/jars.lock, copied by the machine's own mvn (its
# settings and ~/.m2 cache) into build/jars and checked; the jobs add them to spark.jars
# when they start Spark (slatelib/spark/jars.py). Installs Maven with apt-get if missing.
JARS_DIR := build/jars
JARS_STAMP := $(JARS_DIR)/.checked
$(JARS_STAMP): slatelib/spark/jars.lock slatelib/spark/jars.py | $(STAMP)
	@command -v $${MVN:-mvn} >/dev/null || { command -v apt-get >/dev/null && \
	    (apt-get update -qq && apt-get install -y -qq maven >/dev/null || \
	     sudo -n apt-get install -y -qq maven >/dev/null); }
	$(BIN)/python -m slatelib.spark.jars fetch --dest $(JARS_DIR)
	@touch $(JARS_STAMP)

jars: $(JARS_STAMP) ## fetch and check the pinned Spark jars into build/jars (make install does it)

# Debian's chromium: the headless browser of the `slate health --html` page tests
# (tests/integration/test_health_page.py fails without it). Installed with apt-get if missing.
chromium: ## install Debian's chromium (for the health page tests) with apt-get if missing
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && \
	    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null || \
	     sudo -n apt-get install -y -qq chromium >/dev/null); }

# Real Apache Airflow 3 (with the Spark provider), apart from the project's venv (its
# dependencies are not ours), pinned by tests/dags/airflow-requirements.txt: the DAG tests
# load airflow_dags/ into it and run each DAG with dag.test(). Rebuilt from scratch when the
# pins change (an upgrade in place would keep the old Airflow's leftovers).
.PHONY: .venv-airflow
.venv-airflow: $(AIRFLOW_STAMP) ## Airflow 3 in its own venv (tests/dags/airflow-requirements.txt), for make test-dags and trying the DAGs

$(AIRFLOW_STAMP): tests/dags/airflow-requirements.txt
	rm -rf $(AIRFLOW_VENV) && $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install -q -r tests/dags/airflow-requirements.txt
	@touch $(AIRFLOW_STAMP)

# What the DAGs' executor_env param names by default (airflow_dags/slatelib_dag_common.py):
# a packed venv with slatelib and what executors import (obstore, cramjam, flatbuffers,
# pyarrow, pandas; pyspark comes from the cluster's Spark), shipped with
# --archives dist/slatelib-executor-env.tar.gz#env and spark.pyspark.python=./env/bin/python.
EXECUTOR_VENV := build/executor-env
EXECUTOR_ENV := dist/slatelib-executor-env.tar.gz
PACKAGE_SOURCES := pyproject.toml setup.py $(shell find slatelib jobs -name '*.py' -o -name '*.c' -o -name '*.h' 2>/dev/null)
WHEEL_STAMP := build/.wheel-built

# The docs site (MkDocs with the Material theme, pinned by docs/requirements.txt) in its own
# venv, apart from the project's; rebuilt from scratch when the pins change. Its hook
# (docs/hooks/mkdocs_reference.py) renders the CLI and job reference from the argument
# parsers with the project's Python, so the build needs .venv too.
DOCS_VENV := .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): docs/requirements.txt
	rm -rf $(DOCS_VENV) && $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q -r docs/requirements.txt
	@touch $(DOCS_STAMP)

docs: $(STAMP) $(DOCS_STAMP) ## build the docs site into site/ (strict: a broken link or anchor fails; part of make test)
	NO_MKDOCS_2_WARNING=1 SLATELIB_DOCS_PYTHON=$(CURDIR)/$(BIN)/python \
	    $(DOCS_VENV)/bin/mkdocs build --strict --site-dir $(CURDIR)/site

lint: $(STAMP) ## ruff
	$(BIN)/ruff check slatelib jobs tests airflow_dags benchmarks scripts docs/hooks

typecheck: $(STAMP) ## mypy --strict on slatelib and jobs
	$(BIN)/mypy

test-unit: $(STAMP) ## fast unit tests (no network, no Spark)
	$(PYTEST) tests/unit -q

test-integration: $(STAMP) $(JARS_STAMP) chromium ## local FS and moto_server S3, the health page in headless Chromium
	$(PYTEST) tests/integration -q

test-spark: $(STAMP) $(JARS_STAMP) ## Spark jobs on a local SparkSession
	$(PYTEST) tests/spark -q

test-interop: $(STAMP) ## against the official slatedb==0.17.0 package
	$(PYTEST) tests/interop -q

test-dags: $(STAMP) $(JARS_STAMP) $(AIRFLOW_STAMP) ## Airflow DAGs: loaded and run with dag.test() on real Airflow 3.3.2 (.venv-airflow)
	SLATELIB_AIRFLOW_PYTHON=$(CURDIR)/$(AIRFLOW_VENV)/bin/python $(PYTEST) tests/dags -q

test-cluster: $(STAMP) $(JARS_STAMP) $(AIRFLOW_STAMP) $(EXECUTOR_ENV) ## every job on a Spark standalone cluster (a master, two one-core workers in network namespaces), three ways each, and its faults
	SLATELIB_AIRFLOW_PYTHON=$(CURDIR)/$(AIRFLOW_VENV)/bin/python $(PYTEST) tests/cluster -q

.PHONY: test-pure
test-pure: $(STAMP) ## the unit tests on the pure-Python path (SLATELIB_NO_NATIVE=1; native-only cases skip; about 90 s; part of make test)
	SLATELIB_NO_NATIVE=1 $(PYTEST) tests/unit -q -p no:cacheprovider

test-faults: $(STAMP) ## a few fixed seeds of the fault harness (about a minute; part of make test)
	$(PYTEST) tests/faults -q

SEED ?= $(shell date +%s)
MINUTES ?= 10
soak: $(STAMP) ## one long seeded fault run: make soak SEED=123 MINUTES=10 (docs/fault-scenarios.md)
	$(BIN)/python -m tests.faults.soak --seed $(SEED) --minutes $(MINUTES)

# AddressSanitizer + UndefinedBehaviorSanitizer over the C extensions
# (docs/rfcs/0020-house-second-step.md, "C with common parts"). A copy of the package and the
# tests in build/sanitize/tree gets the extensions built with the sanitizers (-Werror as
# always; the in-place .so files of the working tree are never touched), then:
#  1. the proof that it bites: a second copy built with -DSL_FAULT_BOUNDS_SLACK=64 (one bounds
#     check of check_blocks loosened, csrc/common.h) must die with an AddressSanitizer report
#     on a call that reads past its buffer;
#  2. the native differential tests, run in the copy (so its slatelib is the one imported),
#     with the ASan runtime preloaded (python itself is not instrumented), leak checks off
#     (CPython keeps objects until exit by design) and PYTHONMALLOC=malloc (so every PyMem
#     and object buffer is its own checked heap block, not a slice of a pymalloc arena);
#     pytest's --capture=sys lets a sanitizer report reach the terminal, and the plugin
#     tests/unit/format/_sanitizer_run.py runs fewer property examples and refuses builds
#     without ASan.
SAN_DIR := build/sanitize
SAN_PY = $(abspath $(BIN))/python
SAN_CFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -O1 -g
SAN_LDFLAGS := -fsanitize=address,undefined
SAN_RUN = LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
          ASAN_OPTIONS=detect_leaks=0:malloc_context_size=5 UBSAN_OPTIONS=print_stacktrace=1 PYTHONMALLOC=malloc
SAN_TESTS := tests/unit/format/test_native.py tests/unit/format/test_native_merge.py \
             tests/unit/format/test_native_pipe.py tests/unit/format/test_sst_native.py \
             tests/unit/format/test_manifest_native.py tests/unit/format/test_compactions_codec_native.py \
             tests/unit/format/test_native_bounds.py
SAN_PROBE := from slatelib import _speedups as s; s.check_blocks(bytes(16), [0, 64], 2, True)
# $(call san_copy,DIR,EXTRA_CFLAGS): the sources and tests copied to DIR, extensions built there
san_copy = rm -rf $(1) && mkdir -p $(1) && \
	tar -c --exclude='*.so' --exclude=__pycache__ setup.py pyproject.toml slatelib tests | tar -x -C $(1) && \
	cd $(1) && CFLAGS="$(SAN_CFLAGS) $(2)" LDFLAGS="$(SAN_LDFLAGS)" $(SAN_PY) setup.py -q \
	    build_ext --inplace >build.log 2>&1; \
	$(SAN_RUN) $(SAN_PY) -c 'import slatelib._speedups, slatelib._manifest, slatelib._sstwrite' \
	    || { cat build.log; echo "sanitized build failed (see above)"; exit 1; }

test-sanitize: $(STAMP) ## the native differential tests on ASan + UBSan builds of the C extensions (a few minutes; part of make test)
	@echo "sanitize: proof run (-DSL_FAULT_BOUNDS_SLACK=64 must be caught)"
	@$(call san_copy,$(SAN_DIR)/broken,-DSL_FAULT_BOUNDS_SLACK=64)
	@cd $(SAN_DIR)/broken && if $(SAN_RUN) $(SAN_PY) -c '$(SAN_PROBE)' 2>probe.log; then \
	    echo "sanitize: the injected out-of-bounds read went unnoticed"; exit 1; fi; \
	    grep -q 'ERROR: AddressSanitizer: heap-buffer-overflow' probe.log \
	    || { cat probe.log; echo "sanitize: no AddressSanitizer report"; exit 1; }
	@echo "sanitize: caught: $$(grep -m1 'ERROR: AddressSanitizer' $(SAN_DIR)/broken/probe.log)"
	@$(call san_copy,$(SAN_DIR)/tree,)
	cd $(SAN_DIR)/tree && $(SAN_RUN) $(SAN_PY) -m pytest $(SAN_TESTS) -q -p no:cacheprovider \
	    -p tests.unit.format._sanitizer_run --capture=sys

check: lint typecheck test-unit ## lint + typecheck + unit tests

test: $(STAMP) $(JARS_STAMP) $(AIRFLOW_STAMP) $(EXECUTOR_ENV) $(WHEEL_STAMP) chromium test-sanitize docs ## every suite but the benchmarks (tests/wheels too), the sanitizer run and the docs build (the command CI runs)
	SLATELIB_AIRFLOW_PYTHON=$(CURDIR)/$(AIRFLOW_VENV)/bin/python SLATELIB_WHEEL_DIR=$(CURDIR)/dist \
	    $(PYTEST) tests -q -p no:cacheprovider
	$(MAKE) --no-print-directory test-pure

run: $(STAMP) $(JARS_STAMP) ## the main job: write a demo database with the slatelib writer, compact it on Spark (local[2]), verify every key
	@rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	$(BIN)/python scripts/compaction_demo.py write --db $(DEMO_DB) --rows 200000 --l0s 6 \
	    --model $(DEMO_DIR)/model.jsonl
	$(BIN)/slate --db $(DEMO_DB) summary
	SLATELIB_COMPACTION__MIN_RANGE_BYTES=1MiB PYSPARK_PYTHON=$(CURDIR)/$(BIN)/python \
	    PYSPARK_DRIVER_PYTHON=$(CURDIR)/$(BIN)/python SLATELIB_SPARK_LOG_LEVEL=ERROR \
	    $(BIN)/spark-submit --master 'local[2]' --conf spark.ui.enabled=false --conf spark.log.level=WARN \
	    jobs/compact.py --db $(DEMO_DB) --policy l0 --report $(DEMO_DIR)/report.json
	$(BIN)/slate --db $(DEMO_DB) summary
	$(BIN)/slate --db $(DEMO_DB) scan --start user:00000040 --end user:00000043
	$(BIN)/slate --db $(DEMO_DB) get user:00000042
	$(BIN)/python scripts/compaction_demo.py verify --db $(DEMO_DB) --model $(DEMO_DIR)/model.jsonl \
	    --report $(DEMO_DIR)/report.json

.PHONY: demo-s3
demo-s3: $(STAMP) ## S3 end to end: local moto_server, official 0.17 writer, slate-spark compact + gc (local[2]), official reader checks every key, server stopped
	$(BIN)/python scripts/s3_demo.py --workdir $(CURDIR)/var/demo-s3

bench: $(STAMP) ## benchmarks side by side with the official package (see benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_read.py

bench-compaction: $(STAMP) ## official 0.17 compactor vs the Spark compaction job: W1, lz4/zstd, moto S3 (ARGS=... passes flags)
	$(BIN)/python benchmarks/bench_compaction.py $(ARGS)

bench-writer: $(STAMP) ## slatelib Db vs official Db: durable puts and point gets (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_writer.py

bench-gc: $(STAMP) ## official run_gc_once vs jobs/gc.py on ~100k garbage objects, local disk and moto S3 (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_gc.py

bench-rescale: $(STAMP) ## official 0.17 clones + compactor vs jobs/rescale.py: split ~300 MB 4 ways, merge back (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_rescale.py

bench-worker: $(STAMP) ## official 0.17 writer for 60 s: embedded compactor vs coordinator + jobs/compact.py --worker (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_worker.py

bench-cost: $(STAMP) ## object-store requests, counted at the S3 server: per GB compacted, per 100k objects collected, per hour idle, vs official 0.17 (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_cost.py

bench-large: $(STAMP) ## a manifest of 100k SSTs (SSTS=300000 for more): codec, planners, ls, reader, writer, checkpoint, GC dry run, clone vs official 0.17 (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_large.py --ssts $(or $(SSTS),100000)

bench-cas: $(STAMP) ## manifest commits/s and p50/p99: native put-if-absent vs two-phase CAS (SQLite, PostgreSQL) on local disk and moto S3 (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_cas.py

bench-export: $(STAMP) $(JARS_STAMP) ## official scan -> pyarrow -> Parquet vs jobs/export.py to Parquet, ~2.3 M rows (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_export.py

bench-export-delta: $(STAMP) $(JARS_STAMP) ## full and incremental Delta exports (delta-spark, delta-rs) vs the official reader drained to Parquet: rows/s and peak RSS, 2.3 M rows and 3 M changes (benchmarks/RESULTS.md)
	$(BIN)/python benchmarks/bench_export_delta.py

package-jobs: $(WHEEL_STAMP) ## build the slatelib wheels into dist/ (what nodes install; the packed env holds one; same as make wheels)

# `python -m build` under each Python of WHEEL_PYTHONS (pyenv's, else pythonX.Y on PATH):
# the sdist, then each wheel built from the sdist, each checked to hold the three compiled
# extensions (scripts/build_wheels.py). The per-version `build` venvs stay in build/wheel-tools.
WHEEL_PYTHONS ?= 3.11 3.12 3.13
wheels: $(WHEEL_STAMP) ## the sdist and one wheel per Python (3.11, 3.12, 3.13) with the C extensions, into dist/

$(WHEEL_STAMP): $(STAMP) $(PACKAGE_SOURCES) MANIFEST.in CHANGELOG.md
	@mkdir -p dist build
	$(BIN)/python scripts/build_wheels.py --dist dist --pythons $(WHEEL_PYTHONS)
	@touch $(WHEEL_STAMP)

test-wheels: $(WHEEL_STAMP) ## each wheel in a fresh venv with no checkout: slate --version, a fixture read, load, slate-spark compact; unit + interop subset on 3.12/3.13 (venvs cached in build/wheel-venvs; part of make test)
	SLATELIB_WHEEL_DIR=$(CURDIR)/dist $(PYTEST) tests/wheels -q -p no:cacheprovider

# The executors' environment, built from the wheel: build/executor-env is a venv with the
# wheel, pyarrow and pandas installed (what a node with slatelib installed has; the cluster
# tier's second way of shipping code), and dist/slatelib-executor-env.tar.gz is that venv
# packed (--archives ...#env). Test suites and C headers are left out of it: executors
# never import them, and every executor unpacks the archive for every application.
$(EXECUTOR_ENV): $(WHEEL_STAMP)
	rm -rf $(EXECUTOR_VENV) && $(PYTHON) -m venv $(EXECUTOR_VENV)
	$(EXECUTOR_VENV)/bin/python -m pip install -q "$$(ls dist/slatelib-*-$$($(EXECUTOR_VENV)/bin/python -c \
	    'import sys; print("cp%d%d" % sys.version_info[:2])')-*.whl)" 'pyarrow>=18' 'pandas>=2.2,<3'
	find $(EXECUTOR_VENV)/lib -depth -type d \( -name tests -o -name __pycache__ \) -exec rm -rf {} +
	rm -rf $(EXECUTOR_VENV)/lib/python*/site-packages/pyarrow/include
	$(BIN)/python -m pip install -q venv-pack==0.2.0
	@mkdir -p dist
	$(BIN)/venv-pack --force -p $(EXECUTOR_VENV) -o $(EXECUTOR_ENV)
	@echo "executors: --archives $(CURDIR)/$(EXECUTOR_ENV)#env --conf spark.pyspark.python=./env/bin/python"
	@echo "(the venv links to $$(readlink -f $(EXECUTOR_VENV)/bin/python): the same Python 3.11 must exist at that path on every executor)"

package-executor-env: $(EXECUTOR_ENV) ## the executors' env: build/executor-env (from the wheel) and it packed as dist/slatelib-executor-env.tar.gz

flatbuffers: ## no generated code: FlatBuffers are hand-decoded (docs/rfcs/0001-flatbuffers.md)
	@echo "slatelib decodes FlatBuffers by hand; nothing to generate (see docs/rfcs/0001-flatbuffers.md)"

clean: ## remove build outputs and the demo
	rm -rf build dist var site *.egg-info
