-- __scan0: auctions (parquet files at auctions.parquet), read by dsms's file reader: id, seller, ts, __file, __row, __mx
--   __mx: the largest ts before each row in its file; rows more than 5000000 us behind it are late
-- __scan1: bids (parquet files at bids.parquet), read by dsms's file reader: auction, price, ts, __file, __row, __mx
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
    s.`id` AS `id`,
    s.`seller` AS `seller`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    CAST(NULL AS BIGINT) AS `__wm`
  FROM (
    SELECT
      r.`id`,
      r.`seller`,
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
), `__scan1_files` AS (
  SELECT
    `__file`,
    MAX(UNIX_MICROS(`ts`)) AS `__fmax`
  FROM `__scan1`
  GROUP BY
    `__file`
), `__scan1_prefix` AS (
  SELECT
    `__file`,
    MAX(`__fmax`) OVER (ORDER BY `__file` NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS `__prev`
  FROM `__scan1_files`
), `n5` AS (
  SELECT
    s.`auction` AS `auction`,
    CAST(NULL AS BIGINT) AS `bidder`,
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    CAST(NULL AS BIGINT) AS `__wm`
  FROM (
    SELECT
      r.`auction`,
      r.`price`,
      r.`ts`,
      r.`__file`,
      r.`__row`,
      GREATEST(r.`__mx`, p.`__prev`) AS `__mx`
    FROM `__scan1` AS r
    LEFT JOIN `__scan1_prefix` AS p
      ON r.`__file` = p.`__file`
  ) AS s
  WHERE
    NOT (
      COALESCE(UNIX_MICROS(`ts`) < s.`__mx` - 5000000, FALSE)
    )
), `n6` AS (
  SELECT
    `id`,
    `seller`,
    `ts`,
    `auction`,
    `bidder`,
    `price`,
    `ts0`
  FROM (
    SELECT
      `id` AS `id`,
      `seller` AS `seller`,
      `ts` AS `ts`
    FROM `n2`
  ) AS l
  JOIN (
    SELECT
      `auction` AS `auction`,
      `bidder` AS `bidder`,
      `price` AS `price`,
      `ts` AS `ts0`
    FROM `n5`
  ) AS r
    ON `id` = `auction`
    AND UNIX_MICROS(`ts0`) BETWEEN UNIX_MICROS(`ts`) + 0 AND UNIX_MICROS(`ts`) + 60000000
), `n7` AS (
  SELECT
    `id` AS `id`,
    `seller` AS `seller`,
    `price` AS `price`
  FROM `n6`
)
SELECT
  `id`,
  `seller`,
  `price`
FROM `n7`
