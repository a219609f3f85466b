"""Lowering: whole queries to one DuckDB or Spark SQL statement, and the runtime's per-batch DuckDB SQL."""
