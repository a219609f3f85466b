-- __scan0: auctions (parquet files at auctions.parquet), read by dsms's file reader: id, seller, ts, __file, __row, __mx
--   __mx: the largest ts before each row in its file; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
-- __scan1: bids (parquet files at bids.parquet), read by dsms's file reader: auction, price, ts, __file, __row, __mx
--   __mx: the largest ts before each row in its file; __wm = __mx - 5000000 us, the watermark when the row arrived, against which the operators above judge it (a window counts it when its last millisecond is above it)
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
    s.`__mx` - 5000000 AS `__wm`
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
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    s.`__mx` - 5000000 AS `__wm`
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
), `n6` AS (
  SELECT
    `id`,
    `seller`,
    `ts`,
    `auction`,
    `price`,
    `ts0`
  FROM (
    SELECT
      `id` AS `id`,
      `seller` AS `seller`,
      `ts` AS `ts`,
      `__wm` AS `__wl`
    FROM `n2`
  ) AS l
  JOIN (
    SELECT
      `auction` AS `auction`,
      `price` AS `price`,
      `ts` AS `ts0`,
      `__wm` AS `__wr`
    FROM `n5`
  ) AS r
    ON `id` = `auction`
    AND UNIX_MICROS(`ts0`) BETWEEN UNIX_MICROS(`ts`) + 0 AND UNIX_MICROS(`ts`) + 60000000
    AND NOT (
      (
        COALESCE(`__wl`, -4611686018427387904) > UNIX_MICROS(`ts0`) - 0
        AND COALESCE(`__wl`, -4611686018427387904) >= COALESCE(`__wr`, -4611686018427387904)
      )
      OR (
        COALESCE(`__wr`, -4611686018427387904) > UNIX_MICROS(`ts`) + 60000000
        AND COALESCE(`__wr`, -4611686018427387904) >= COALESCE(`__wl`, -4611686018427387904)
      )
    )
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
