"""Run Flink SQL jobs on a local mini-cluster and report timings and rows as JSON.

This file runs inside the Flink venv (benchmarks/.venv-flink, PyFlink and
its own pandas/pyarrow), never in the project's venv; flinkenv.py starts it.
It reads a spec (JSON) and writes a result (JSON):

    spec = {"parallelism": 2, "config": {"key": "value"},
            "ddl": ["CREATE TABLE ...", ...],
            "jobs": [{"name": "q1", "sql": "INSERT INTO ... | SELECT ...",
                      "repeat": 1, "collect": false}]}

An INSERT job is timed: ``submit_s`` (planning the job and starting the
per-job mini-cluster), ``wait_s`` (from submission to the job result) and
``net_ms`` (the job's own run time as Flink's JobMaster measured it:
``JobExecutionResult.getNetRuntime``). A SELECT job with ``collect`` is run
and its changelog collected (each row with its row kind). A job that fails
reports its error and the run goes on with the next one.

With ``"stepped": true`` the runner starts the JVM and runs the DDL, then
runs one job per line it reads on stdin, printing ``@@done NAME`` on stdout
after each (so a benchmark can interleave Flink's runs with other engines').
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import sys
import time

DONE = "@@done"
ROW_KINDS = {"INSERT": "+I", "UPDATE_BEFORE": "-U", "UPDATE_AFTER": "+U", "DELETE": "-D"}


def value(v):
    """A JSON-friendly value: timestamps as 'YYYY-MM-DD HH:MM:SS.fff' (as dsms writes them)."""
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.") + f"{v.microsecond // 1000:03d}"
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    return v


def error_text(e: BaseException) -> str:
    """The Java exception chain, shortened to its 'Caused by' lines and the first line."""
    text = str(e)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if ln.startswith(("org.apache", "java.", "Caused by"))
            and "Exception" in ln and not ln.startswith("at ")]
    return " | ".join(dict.fromkeys(keep[:1] + keep[-2:])) or (lines[0] if lines else repr(e))


def run_job(env, job: dict) -> dict:
    out: dict = {"name": job["name"]}
    try:
        if job.get("collect"):
            began = time.perf_counter()
            result = env.execute_sql(job["sql"])
            schema = result._j_table_result.getResolvedSchema()
            out["columns"] = list(schema.getColumnNames())
            out["types"] = [str(t.toString()) for t in schema.getColumnDataTypes()]
            rows = []
            with result.collect() as results:
                for row in results:
                    rows.append([ROW_KINDS[row.get_row_kind().name]] + [value(v) for v in row])
            out["rows"] = rows
            out["seconds"] = time.perf_counter() - began
            return out
        runs = []
        for _ in range(job.get("repeat", 1)):
            began = time.perf_counter()
            result = env.execute_sql(job["sql"])
            submitted = time.perf_counter()
            execution = result.get_job_client().get_job_execution_result().result()
            finished = time.perf_counter()
            runs.append({"submit_s": submitted - began, "wait_s": finished - submitted,
                         "net_ms": execution.get_net_runtime()})
        out["runs"] = runs
    except Exception as e:  # a Py4JJavaError from planning or running the job
        out["error"] = error_text(e)
    return out


def jvm_peak_mb() -> float | None:
    """Peak resident memory (VmHWM) of the JVM that PyFlink started below this process."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo, peak = list(children.get(os.getpid(), [])), None
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if status.get("Name", "").strip() == "java" and "VmHWM" in status:
            peak = max(peak or 0.0, int(status["VmHWM"].split()[0]) / 1024)
    return peak


def main() -> None:
    spec_path, result_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = json.load(f)
    stepped = spec.get("stepped", False)
    if stepped:  # stdout carries only the markers; the JVM's and Python's other output goes to stderr
        markers = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    began = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment
    from pyflink.version import __version__

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    jvm_start = time.perf_counter() - began
    config = env.get_config()
    config.set("parallelism.default", str(spec.get("parallelism", 2)))
    for key, val in spec.get("config", {}).items():
        config.set(key, str(val))
    from pyflink.java_gateway import get_gateway

    result = {"flink_version": __version__, "jvm_start_s": jvm_start,
              "java_version": get_gateway().jvm.System.getProperty("java.version"),
              "parallelism": int(config.get("parallelism.default", "2")), "ddl_errors": [], "jobs": []}
    for ddl in spec.get("ddl", []):
        try:
            env.execute_sql(ddl)
        except Exception as e:
            result["ddl_errors"].append({"ddl": ddl, "error": error_text(e)})
    for job in spec["jobs"]:
        if stepped and not sys.stdin.readline():  # wait for the driver's go; end of input: stop
            break
        result["jobs"].append(run_job(env, job))
        result["jvm_peak_mb"] = jvm_peak_mb()
        with open(result_path, "w") as f:  # after every job, so a crash keeps what ran
            json.dump(result, f)
        if stepped:
            print(f"{DONE} {job['name']}", file=markers, flush=True)


if __name__ == "__main__":
    main()
