-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: bidder, price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in its file; rows more than 5000000 us behind it are late
WITH `__scan0_files` AS (
  SELECT
    `__file`,
    MAX(UNIX_MICROS(`ts`)) AS `__fmax`
  FROM `__scan0`
  GROUP BY
    `__file`
), `__scan0_prefix` AS (
  SELECT
    `__file`,
    MAX(`__fmax`) OVER (ORDER BY `__file` NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS `__prev`
  FROM `__scan0_files`
), `n2` AS (
  SELECT
    CAST(NULL AS BIGINT) AS `auction`,
    s.`bidder` AS `bidder`,
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    CAST(NULL AS BIGINT) AS `__wm`
  FROM (
    SELECT
      r.`bidder`,
      r.`price`,
      r.`ts`,
      r.`__file`,
      r.`__row`,
      GREATEST(r.`__mx`, p.`__prev`) AS `__mx`
    FROM `__scan0` AS r
    LEFT JOIN `__scan0_prefix` AS p
      ON r.`__file` = p.`__file`
  ) AS s
  WHERE
    NOT (
      COALESCE(UNIX_MICROS(`ts`) < s.`__mx` - 5000000, FALSE)
    )
), `n3` AS (
  SELECT
    `auction`,
    `bidder`,
    `price`,
    `ts`,
    `__file`,
    `__row`,
    `__wm`,
    CAST(SUM(`price`) OVER (
      PARTITION BY `bidder`
      ORDER BY UNIX_MICROS(`ts`) ASC
      RANGE BETWEEN 10000000 PRECEDING AND CURRENT ROW
    ) AS DOUBLE) AS `__over0`
  FROM `n2`
), `n4` AS (
  SELECT
    `bidder` AS `bidder`,
    `ts` AS `ts`,
    `__over0` AS `recent`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n3`
)
SELECT
  `bidder`,
  `ts`,
  `recent`
FROM `n4`
ORDER BY
  `ts` NULLS LAST
