-- __scan0: auctions (parquet files at auctions.parquet), read by dsms's file reader: id, seller, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; rows more than 5000000 us behind it are late
-- __scan1: bids (parquet files at bids.parquet), read by dsms's file reader: auction, price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in the source; rows more than 5000000 us behind it are late
WITH "n0" AS (
  SELECT
    s."id" AS "id",
    s."seller" AS "seller",
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
    s."auction" AS "auction",
    CAST(NULL AS BIGINT) AS "bidder",
    s."price" AS "price",
    s."ts" AS "ts",
    s."__file" AS "__file",
    s."__row" AS "__row",
    CAST(NULL AS BIGINT) AS "__wm"
  FROM "__scan1" AS s
  WHERE
    NOT (
      COALESCE(EPOCH_US("ts") < s."__mx" - 5000000, FALSE)
    )
), "n2" AS (
  SELECT
    "id",
    "seller",
    "ts",
    "auction",
    "bidder",
    "price",
    "ts0"
  FROM (
    SELECT
      "id" AS "id",
      "seller" AS "seller",
      "ts" AS "ts"
    FROM "n0"
  ) AS l
  JOIN (
    SELECT
      "auction" AS "auction",
      "bidder" AS "bidder",
      "price" AS "price",
      "ts" AS "ts0"
    FROM "n1"
  ) AS r
    ON "id" = "auction"
    AND EPOCH_US("ts0") BETWEEN EPOCH_US("ts") + 0 AND EPOCH_US("ts") + 60000000
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
