-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: bidder, price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; rows more than 5000000 us behind it are late
WITH "n0" AS (
  SELECT
    CAST(NULL AS BIGINT) AS "auction",
    s."bidder" AS "bidder",
    s."price" AS "price",
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
    "auction",
    "bidder",
    "price",
    "ts",
    "__file",
    "__row",
    "__wm",
    CAST(SUM("price") OVER (
      PARTITION BY "bidder"
      ORDER BY EPOCH_US("ts") ASC NULLS FIRST
      RANGE BETWEEN 10000000 PRECEDING AND CURRENT ROW
    ) AS DOUBLE) AS "__over0"
  FROM "n0"
), "n2" AS (
  SELECT
    "bidder" AS "bidder",
    "ts" AS "ts",
    "__over0" AS "recent",
    "__file",
    "__row",
    "__wm"
  FROM "n1"
)
SELECT
  "bidder",
  "ts",
  "recent"
FROM "n2"
ORDER BY
  "ts"
