-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: auction, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
WITH "n0" AS (
  SELECT
    s."auction" AS "auction",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    s."__mx" - 5000000 AS "__wm"
  FROM "__scan0" AS s
), "n1" AS (
  SELECT
    "auction" AS "auction",
    "ts" AS "ts",
    "__file",
    "__row",
    "__wm"
  FROM "n0"
), "n2" AS (
  SELECT
    "auction",
    "ts",
    "__file",
    "__row",
    "__wm",
    EPOCH_US("ts") - (
      (
        (
          EPOCH_US("ts") % 10000000
        ) + 10000000
      ) % 10000000
    ) AS "__ws",
    EPOCH_US("ts") - (
      (
        (
          EPOCH_US("ts") % 10000000
        ) + 10000000
      ) % 10000000
    ) + 10000000 AS "__we"
  FROM "n1"
), "n3" AS (
  SELECT
    MAKE_TIMESTAMP("__ws") AS "window_start",
    MAKE_TIMESTAMP("__we") AS "window_end",
    MAKE_TIMESTAMP("__we" - 1000) AS "window_time",
    "auction",
    COUNT(*) AS "agg0"
  FROM "n2"
  WHERE
    (
      "__wm" IS NULL OR "__we" - 1000 > "__wm"
    )
  GROUP BY
    "__ws",
    "__we",
    "auction"
), "n4" AS (
  SELECT
    "window_start" AS "window_start",
    "window_end" AS "window_end",
    "auction" AS "auction",
    "agg0" AS "n"
  FROM "n3"
), "n5" AS (
  SELECT
    "window_start",
    "window_end",
    "auction",
    "n",
    "rn"
  FROM (
    SELECT
      "window_start",
      "window_end",
      "auction",
      "n",
      ROW_NUMBER() OVER (
        PARTITION BY "window_start", "window_end"
        ORDER BY "n" DESC, "window_start" ASC NULLS FIRST, "window_end" ASC NULLS FIRST, "auction" ASC NULLS FIRST
      ) AS "rn"
    FROM "n4"
  ) AS r
  WHERE
    "rn" <= 3
), "n6" AS (
  SELECT
    "window_start" AS "window_start",
    "auction" AS "auction",
    "n" AS "n"
  FROM "n5"
)
SELECT
  "window_start",
  "auction",
  "n"
FROM "n6"
ORDER BY
  "window_start"
