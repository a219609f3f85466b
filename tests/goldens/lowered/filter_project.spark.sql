-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: auction, price, ts, __file, __row, __mx
WITH `n0` AS (
  SELECT
    s.`auction` AS `auction`,
    CAST(NULL AS BIGINT) AS `bidder`,
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    CAST(NULL AS BIGINT) AS `__wm`
  FROM `__scan0` AS s
), `n1` AS (
  SELECT
    `auction`,
    `bidder`,
    `price`,
    `ts`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n0`
  WHERE
    `price` > 10
), `n2` AS (
  SELECT
    `auction` AS `auction`,
    `price` * 0.9 AS `net`,
    `ts` AS `ts`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n1`
)
SELECT
  `auction`,
  `net`,
  `ts`
FROM `n2`
ORDER BY
  `ts` NULLS LAST
