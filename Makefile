# dsms: `make demo` runs the main example, `make test` runs the tests.
# Both create .venv and install dsms with its dependencies first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
FLINK_VENV := benchmarks/.venv-flink

.PHONY: setup install-postgres install-jdbc demo demo-kafka test bench bench-flink flink-conformance clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: setup
	$(BIN)/dsms run examples/ad_ctr/ad_ctr.sql

# Kafka -> dsms -> PostgreSQL (examples/kafka_to_postgres): starts and stops a broker and a database itself.
demo-kafka: setup install-postgres
	$(BIN)/python examples/kafka_to_postgres/run_demo.py

test: setup install-postgres install-jdbc
	$(BIN)/pytest -q

# PostgreSQL 15 from Debian's packages for the PostgreSQL connector tests (they start their own server in a
# temporary folder). Installed as root when missing (CI's clean machine); elsewhere those tests are skipped.
install-postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing PostgreSQL (postgresql, postgresql-client) for the connector tests"; \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql postgresql-client; } \
			>/tmp/dsms-apt-postgres.log 2>&1 \
		|| echo "(apt-get could not install PostgreSQL, see /tmp/dsms-apt-postgres.log: its tests are skipped)"; \
	else echo "(PostgreSQL is not installed and cannot be installed here: the PostgreSQL connector tests are skipped)"; fi

# PostgreSQL's JDBC driver from Debian's packages, for the JDBC client test of `dsms server` (it needs Java 17,
# which the machine has). Installed as root when missing; elsewhere that test is skipped.
install-jdbc:
	@if [ -f /usr/share/java/postgresql.jar ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "Installing PostgreSQL's JDBC driver (libpostgresql-jdbc-java) for the server's JDBC test"; \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libpostgresql-jdbc-java; } \
			>/tmp/dsms-apt-jdbc.log 2>&1 \
		|| echo "(apt-get could not install the JDBC driver, see /tmp/dsms-apt-jdbc.log: its test is skipped)"; \
	else echo "(PostgreSQL's JDBC driver is not installed and cannot be installed here: its test is skipped)"; fi

# make bench also runs the Flink comparison once its venv exists (make bench-flink creates it).
bench: setup
	$(BIN)/python benchmarks/throughput.py
	$(BIN)/python benchmarks/windows.py
	$(BIN)/python benchmarks/joins.py
	$(BIN)/python benchmarks/repl.py
	$(BIN)/python benchmarks/state.py
	$(BIN)/python benchmarks/memory.py
	$(BIN)/python benchmarks/routes.py
	$(BIN)/python benchmarks/connectors_postgres.py
	$(BIN)/python benchmarks/connectors.py
	@if [ -f $(FLINK_VENV)/.installed ]; then $(BIN)/python benchmarks/flink/bench.py; \
	else echo "(Flink not set up: make bench-flink creates $(FLINK_VENV) and compares with Flink SQL)"; fi

# Flink SQL streaming (PyFlink in its own venv, created on first use; needs Java 17).
bench-flink: setup
	$(BIN)/python benchmarks/flink/bench.py

# The same queries on Flink and dsms, final rows compared (about two minutes; not part of make test).
flink-conformance: setup
	$(BIN)/python benchmarks/flink/conformance.py

clean:
	rm -rf $(VENV) examples/*/out benchmarks/data benchmarks/results .pytest_cache
