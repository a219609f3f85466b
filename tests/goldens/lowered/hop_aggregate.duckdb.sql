-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
WITH "n0" AS (
  SELECT
    s."price" AS "price",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    s."__mx" - 5000000 AS "__wm"
  FROM "__scan0" AS s
), "n1" AS (
  SELECT
    "price" AS "price",
    "ts" AS "ts",
    "__file",
    "__row",
    "__wm"
  FROM "n0"
), "n2" AS (
  SELECT
    "price",
    "ts",
    "__file",
    "__row",
    "__wm",
    "__each" AS "__ws",
    "__each" + 10000000 AS "__we"
  FROM (
    SELECT
      "price",
      "ts",
      "__file",
      "__row",
      "__wm",
      UNNEST(
        GENERATE_SERIES(
          EPOCH_US("ts") - (
            (
              (
                EPOCH_US("ts") % 5000000
              ) + 5000000
            ) % 5000000
          ) - 5000000,
          EPOCH_US("ts") - (
            (
              (
                EPOCH_US("ts") % 5000000
              ) + 5000000
            ) % 5000000
          ),
          5000000
        )
      ) AS "__each"
    FROM "n1"
  ) AS "h"
), "n3" AS (
  SELECT
    MAKE_TIMESTAMP("__ws") AS "window_start",
    MAKE_TIMESTAMP("__we") AS "window_end",
    MAKE_TIMESTAMP("__we" - 1000) AS "window_time",
    CAST(SUM("price") AS DOUBLE) AS "agg0"
  FROM "n2"
  WHERE
    (
      "__wm" IS NULL OR "__we" - 1000 > "__wm"
    )
  GROUP BY
    "__ws",
    "__we"
), "n4" AS (
  SELECT
    "window_start" AS "window_start",
    "window_end" AS "window_end",
    "agg0" AS "volume"
  FROM "n3"
)
SELECT
  "window_start",
  "window_end",
  "volume"
FROM "n4"
ORDER BY
  "window_end",
  "window_start"
