-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: auction, price, ts, __file, __row, __mx
WITH `n0` AS (
  SELECT
    s.`auction` AS `auction`,
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    CAST(NULL AS BIGINT) AS `__wm`
  FROM `__scan0` AS s
), `n1` AS (
  SELECT
    `auction` AS `auction`,
    `price` AS `price`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n0`
), `n2` AS (
  SELECT
    `auction`,
    COUNT(*) AS `agg0`,
    CAST(CASE WHEN COUNT(`price`) > 0 THEN CAST(SUM(`price`) AS DOUBLE) / COUNT(`price`) END AS DOUBLE) AS `agg1`
  FROM `n1`
  GROUP BY
    `auction`
), `n3` AS (
  SELECT
    `auction` AS `auction`,
    `agg0` AS `n`,
    `agg1` AS `avg_price`
  FROM `n2`
)
SELECT
  `auction`,
  `n`,
  `avg_price`
FROM `n3`
