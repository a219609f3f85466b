-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: bidder, price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
WITH "n0" AS MATERIALIZED (
  SELECT
    s."bidder" AS "bidder",
    s."price" AS "price",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    s."__mx" - 5000000 AS "__wm"
  FROM "__scan0" AS s
), "n1" AS (
  SELECT DISTINCT
    i."__file",
    i."__row"
  FROM "n0" AS i
  INNER JOIN "n0" AS j
    ON i."bidder" IS NOT DISTINCT FROM j."bidder"
    AND (
      j."__file" < i."__file" OR j."__file" = i."__file" AND j."__row" < i."__row"
    )
    AND EPOCH_US(j."ts") BETWEEN EPOCH_US(i."ts") AND i."__wm"
    AND (
      j."__wm" IS NULL OR j."__wm" < i."__wm"
    )
  WHERE
    NOT i."__wm" IS NULL AND EPOCH_US(i."ts") <= i."__wm"
), "n2" AS (
  SELECT
    s."bidder" AS "bidder",
    s."price" AS "price",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    s."__wm" AS "__wm"
  FROM "n0" AS s
  LEFT JOIN "n1" AS l
    ON s."__file" = l."__file" AND s."__row" = l."__row"
  WHERE
    l."__row" IS NULL
), "n3" AS (
  SELECT
    "bidder",
    "price",
    "ts",
    "__file",
    "__row",
    "__wm",
    CAST(SUM("price") OVER (
      PARTITION BY "bidder"
      ORDER BY "ts" ASC NULLS FIRST, "__file" ASC NULLS FIRST, "__row" ASC NULLS FIRST, "__wm" ASC NULLS FIRST
      ROWS BETWEEN 3 PRECEDING AND CURRENT ROW
    ) AS DOUBLE) AS "__over0"
  FROM "n2"
), "n4" AS (
  SELECT
    "bidder" AS "bidder",
    "ts" AS "ts",
    "__over0" AS "recent",
    "__file",
    "__row",
    "__wm"
  FROM "n3"
)
SELECT
  "bidder",
  "ts",
  "recent"
FROM "n4"
ORDER BY
  "ts"
