-- __scan0: auctions (parquet files at auctions.parquet), read by dsms's file reader: id, seller, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
-- __scan1: bids (parquet files at bids.parquet), read by dsms's file reader: auction, price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
WITH "n0" AS (
  SELECT
    s."id" AS "id",
    s."seller" AS "seller",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    s."__mx" - 5000000 AS "__wm"
  FROM "__scan0" AS s
), "n1" AS (
  SELECT
    s."auction" AS "auction",
    s."price" AS "price",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    s."__mx" - 5000000 AS "__wm"
  FROM "__scan1" AS s
), "n2" AS (
  SELECT
    "id",
    "seller",
    "ts",
    "auction",
    "price",
    "ts0"
  FROM (
    SELECT
      "id" AS "id",
      "seller" AS "seller",
      "ts" AS "ts",
      "__wm" AS "__wl"
    FROM "n0"
  ) AS l
  JOIN (
    SELECT
      "auction" AS "auction",
      "price" AS "price",
      "ts" AS "ts0",
      "__wm" AS "__wr"
    FROM "n1"
  ) AS r
    ON "id" = "auction"
    AND EPOCH_US("ts0") BETWEEN EPOCH_US("ts") + 0 AND EPOCH_US("ts") + 60000000
    AND NOT (
      (
        COALESCE("__wl", -4611686018427387904) > EPOCH_US("ts0") - 0
        AND COALESCE("__wl", -4611686018427387904) >= COALESCE("__wr", -4611686018427387904)
      )
      OR (
        COALESCE("__wr", -4611686018427387904) > EPOCH_US("ts") + 60000000
        AND COALESCE("__wr", -4611686018427387904) >= COALESCE("__wl", -4611686018427387904)
      )
    )
), "n3" AS (
  SELECT
    "id" AS "id",
    "seller" AS "seller",
    "price" AS "price"
  FROM "n2"
)
SELECT
  "id",
  "seller",
  "price"
FROM "n3"
