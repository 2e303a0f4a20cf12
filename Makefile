# `make demo` and `make test` each set up .venv from pyproject.toml first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

JVM := .jvm
JVM_STAMP := $(JVM)/.fetched

.PHONY: demo test bench clean jvm

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==25.3
	# compat mode puts the checkout itself on sys.path, so Spark's discovery of
	# pyspark_* modules (pkgutil) sees pyspark_seglog.
	$(PY) -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	# Spark starts its Python workers with PYSPARK_PYTHON, else the python3 on PATH, which
	# lacks seglog (DATA_SOURCE_NOT_FOUND): a script run with $(PY) gives them $(PY).
	echo 'import os, sys; os.environ.setdefault("PYSPARK_PYTHON", sys.executable)' \
	    > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/seglog-pyspark-python.pth"
	touch $(STAMP)

# Apache Kafka (broker, tools, Java client), Spark's Kafka source, Delta Lake and Hadoop's S3A,
# pinned in jvm/*/pom.xml, fetched with Maven into .jvm/ (see jvm/fetch.py).
$(JVM_STAMP): jvm/kafka/pom.xml jvm/spark/pom.xml jvm/s3/pom.xml jvm/fetch.py $(STAMP)
	$(PY) jvm/fetch.py kafka spark s3 \
	    --pyspark-jars "$$($(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
	touch $(JVM_STAMP)

jvm: $(JVM_STAMP)

# kcat for the interop tests, unpacked from Debian's packages into .tools/kcat (see testbed/kcat.py);
# where it cannot be fetched, those tests skip and say so.
KCAT_STAMP := .tools/kcat/.fetched
$(KCAT_STAMP): testbed/kcat.py $(STAMP)
	$(PY) testbed/kcat.py .tools/kcat

# Chromium and chromedriver for the web console's browser tests: installed with apt-get (Debian's chromium
# and chromium-driver) when /usr/bin/chromium is missing (see testbed/chromium.py); where they cannot be
# installed, those tests skip and say so.
CHROMIUM_STAMP := .tools/chromium/.installed
$(CHROMIUM_STAMP): testbed/chromium.py $(STAMP)
	$(PY) testbed/chromium.py $(CHROMIUM_STAMP)

# The checkout's own modules compiled to bytecode beforehand (compileall skips those up to date): where
# PYTHONDONTWRITEBYTECODE is set no process writes its own, and every one that Spark, a test or a command
# starts would compile each module it imports again.
BYTECODE := $(PY) -m compileall -q -j 0 format broker_core connector pyspark_seglog.py tests testbed bench examples > /dev/null

demo: $(STAMP)
	$(BYTECODE)
	$(PY) examples/demo.py

# The suite runs in TEST_WORKERS processes at once (pytest-xdist; most of its time is spent waiting for
# servers, clients and Spark, not computing); tests/side_by_side.py says which tests share a worker and
# which run alone. PYTEST_ARGS come last: `make test PYTEST_ARGS="-n 0 tests/format/test_index.py"`
# runs one file in one process.
TEST_WORKERS ?= 4

test: $(STAMP) $(JVM_STAMP) $(KCAT_STAMP) $(CHROMIUM_STAMP)
	$(BYTECODE)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/format_bench.py

clean:
	rm -rf $(VENV) $(JVM) .tools build *.egg-info
