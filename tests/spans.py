"""Error spans in test SQL: the expected span is tagged /*a*/ ... /*a*/ and checked."""

import pytest

import dsms


def tagged(sql: str) -> tuple[str, int, int]:
    """Strip /*a*/ tags; return the SQL and the 1-based line and column of the tagged span."""
    start = sql.index("/*a*/")
    clean = sql.replace("/*a*/", "")
    line = clean.count("\n", 0, start) + 1
    col = start - (clean.rfind("\n", 0, start) + 1) + 1
    end = sql.index("/*a*/", start + 5) - 5
    assert end >= start
    return clean, line, col


def assert_error_at(engine: dsms.Engine, sql: str, message: str, help_: str | None = None) -> dsms.SqlError:
    """Run tagged ``sql``; it must fail with ``message`` at the tagged line and column, caret included."""
    clean, line, col = tagged(sql)
    with pytest.raises(dsms.SqlError) as info:
        engine.execute(clean)
    err = info.value
    assert message in err.message
    assert (err.line, err.column) == (line, col), str(err)
    text = str(err)
    assert f"line {line}, column {col}" in text
    caret_line = next(ln for ln in text.split("\n") if "^" in ln)
    assert caret_line.index("^") - caret_line.index("|") - 2 == col - 1
    if help_:
        assert help_ in text
    return err
