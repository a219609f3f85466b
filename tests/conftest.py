import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

GOLDENS = os.path.join(os.path.dirname(__file__), "goldens")


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from current output")


@pytest.fixture
def update_goldens(request):
    return request.config.getoption("--update-goldens")


@pytest.fixture
def golden(update_goldens):
    """``golden(name, text)``: ``text`` must equal the file tests/goldens/<name>.

    With ``--update-goldens``, ``text`` is written to it first (then read the diff). A missing file
    fails the test: a golden nobody wrote down would pass whatever the output.
    """

    def check(name: str, text: str) -> None:
        path = os.path.join(GOLDENS, name)
        if update_goldens:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        if not os.path.exists(path):
            pytest.fail(f"no golden file tests/goldens/{name}: run pytest --update-goldens to write it, "
                        "then read it", pytrace=False)
        with open(path) as f:
            assert text == f.read()

    return check


@pytest.fixture(scope="session")
def spark_session():
    """The one SparkSession of the test run (local, two cores, few shuffle partitions for small data).

    It is the session dsms's Spark route uses too (``runtime/spark_route.spark_session``).
    """
    pytest.importorskip("pyspark.sql")
    from dsms.runtime.spark_route import spark_session as session_for

    session = session_for({"spark.master": "local[2]", "spark.ui.enabled": "false",
                           "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"})
    yield session
    session.stop()


@pytest.fixture
def batch_routes(request):
    """The batch routes a test compares with the runtime: DuckDB always, Spark where PySpark is installed."""
    try:
        installed = importlib.util.find_spec("pyspark") is not None
    except ImportError:
        installed = False
    if not installed:
        return ("duckdb",)
    request.getfixturevalue("spark_session")
    return ("duckdb", "spark")


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server for the whole test run (devtools/postgres_server.py), or a skip saying why not."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "devtools"))
    from postgres_server import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer().start()
    except PostgresUnavailable as e:
        pytest.skip(f"no PostgreSQL server for the connector tests: {e}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_broker():
    """One Tansu broker (devtools/kafka_broker.py) for the test run: its bootstrap address, 127.0.0.1:PORT.

    Skipped, with the reason, only where the broker binary cannot run here.
    """
    pytest.importorskip("confluent_kafka", reason="the Kafka tests need confluent-kafka (pip install -e '.[test]')")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "devtools"))
    from kafka_broker import BrokerUnavailable, KafkaBroker

    try:
        broker = KafkaBroker().start()
    except BrokerUnavailable as e:
        pytest.skip(f"no Kafka broker: {e}")
    yield broker.bootstrap
    broker.stop()
