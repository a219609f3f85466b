-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: bidder, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; rows more than 5000000 us behind it are late
WITH "n0" AS (
  SELECT
    CAST(NULL AS BIGINT) AS "auction",
    s."bidder" AS "bidder",
    CAST(NULL AS DOUBLE) AS "price",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    CAST(NULL AS BIGINT) AS "__wm"
  FROM "__scan0" AS s
  WHERE
    NOT (
      COALESCE(EPOCH_US("ts") < s."__mx" - 5000000, FALSE)
    )
), "n1" AS (
  SELECT
    "bidder" AS "bidder",
    "ts" AS "ts",
    "__file",
    "__row",
    "__wm"
  FROM "n0"
), "n2" AS (
  SELECT
    "bidder",
    "ts",
    "__file",
    "__row",
    "__wm",
    "__sid",
    MIN("__t") OVER (PARTITION BY "bidder", "__sid") AS "__ws",
    MAX("__t") OVER (PARTITION BY "bidder", "__sid") + 30000000 AS "__we"
  FROM (
    SELECT
      *,
      SUM("__new") OVER (
        PARTITION BY "bidder"
        ORDER BY "__t" ASC NULLS FIRST, "__new" DESC
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
      ) AS "__sid"
    FROM (
      SELECT
        *,
        CASE
          WHEN "__t" <= MAX("__t") OVER (
            PARTITION BY "bidder"
            ORDER BY "__t" ASC NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          ) + 30000000
          THEN 0
          ELSE 1
        END AS "__new"
      FROM (
        SELECT
          "bidder",
          "ts",
          "__file",
          "__row",
          "__wm",
          EPOCH_US("ts") AS "__t"
        FROM "n1"
      ) AS e
    ) AS f
  ) AS i
), "n3" AS (
  SELECT
    MAKE_TIMESTAMP("__ws") AS "window_start",
    MAKE_TIMESTAMP("__we") AS "window_end",
    MAKE_TIMESTAMP("__we" - 1000) AS "window_time",
    "bidder",
    COUNT(*) AS "agg0"
  FROM "n2"
  GROUP BY
    "__ws",
    "__we",
    "__sid",
    "bidder"
), "n4" AS (
  SELECT
    "window_start" AS "window_start",
    "window_end" AS "window_end",
    "bidder" AS "bidder",
    "agg0" AS "n"
  FROM "n3"
)
SELECT
  "window_start",
  "window_end",
  "bidder",
  "n"
FROM "n4"
