"""Join errors point at the join (from its right relation to the end of its condition) or at the
part of it to change, and say what to write instead."""

import pytest
from spans import assert_error_at

import dsms

DDL = """CREATE STREAM bid (auction BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE STREAM plain (auction BIGINT, t TIMESTAMP(3)) WITH (connector = 'memory');
CREATE TABLE rates (auction BIGINT, day VARCHAR, rate DOUBLE, ts TIMESTAMP(3), PRIMARY KEY (auction, day) NOT ENFORCED,
  WATERMARK FOR ts AS ts) WITH (connector = 'memory');
CREATE TABLE dim (auction BIGINT, name VARCHAR, PRIMARY KEY (auction) NOT ENFORCED) WITH (connector = 'memory');
"""

CASES = [
    ("SELECT * FROM bid NATURAL JOIN /*a*/plain/*a*/", "NATURAL JOIN is not supported", "ON a.k = b.k"),
    ("SELECT * FROM bid JOIN /*a*/plain USING (auction)/*a*/", "USING is not supported", "ON a.k = b.k"),
    ("SELECT * FROM bid JOIN /*a*/plain FOR SYSTEM_TIME AS OF bid.ts/*a*/ ON bid.auction = plain.auction",
     "needs a table with a PRIMARY KEY", "PRIMARY KEY (k)"),
    ("SELECT * FROM bid JOIN /*a*/dim FOR SYSTEM_TIME AS OF bid.ts/*a*/ ON bid.auction = dim.auction",
     "has no event time", "WATERMARK FOR"),
    ("SELECT * FROM bid JOIN /*a*/rates FOR SYSTEM_TIME AS OF bid.ts ON bid.auction = rates.auction/*a*/",
     "needs the table's primary key", "rates.day"),
    ("SELECT * FROM plain JOIN rates FOR SYSTEM_TIME AS OF /*a*/plain.t/*a*/ ON plain.auction = rates.auction",
     "not a time attribute", "WATERMARK"),
    ("SELECT * FROM bid RIGHT JOIN /*a*/dim FOR SYSTEM_TIME AS OF PROCTIME() ON bid.auction = dim.auction/*a*/",
     "cannot use FOR SYSTEM_TIME AS OF", "INNER or LEFT"),
    ("SELECT * FROM bid b JOIN /*a*/bid c ON b.auction = c.auction AND c.ts > b.ts + INTERVAL '1' MINUTE\n"
     "  AND c.ts < b.ts/*a*/", "can never hold", None),
    ("SELECT * FROM bid JOIN /*a*/plain ON bid.auction = plain.auction/*a*/", "grows without bound", "interval join"),
    ("SELECT * FROM bid JOIN /*a*/dim ON bid.auction = dim.auction/*a*/", "regular join of a stream keeps every row",
     "FOR SYSTEM_TIME AS OF PROCTIME()"),
    ("SELECT * FROM plain JOIN /*a*/bid FOR SYSTEM_TIME AS OF PROCTIME()/*a*/ ON plain.auction = bid.auction",
     "needs a table (with a primary key) on the right", None),
    ("SELECT * FROM bid JOIN plain ON bid.auction = /*a*/plain.auctionn/*a*/", "unknown column", "auction"),
    ("SELECT * FROM bid JOIN plain ON /*a*/bid.auction + plain.auction/*a*/", "must be BOOLEAN", None),
    ("SELECT * FROM bid JOIN /*a*/dim ON bid.ts = dim.name/*a*/", "cannot join TIMESTAMP(3) with VARCHAR",
     "CAST one side"),
    ("SELECT * FROM bid JOIN plain ON bid.auction = /*a*/COUNT(plain.auction)/*a*/", "not allowed in ON", None),
]


@pytest.mark.parametrize("sql,message,help_", CASES)
def test_join_error_points_at_the_span(sql, message, help_):
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.execute("SET 'strict' = 'true'")
    assert_error_at(engine, sql, message, help_)
