-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: bidder, price, ts, __file, __row, __mx
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
    s.`bidder` AS `bidder`,
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    s.`__mx` - 5000000 AS `__wm`
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
), `n3` AS (
  SELECT DISTINCT
    i.`__file`,
    i.`__row`
  FROM `n2` AS i
  INNER JOIN `n2` AS j
    ON i.`bidder` IS NOT DISTINCT FROM j.`bidder`
    AND (
      j.`__file` < i.`__file` OR j.`__file` = i.`__file` AND j.`__row` < i.`__row`
    )
    AND UNIX_MICROS(j.`ts`) BETWEEN UNIX_MICROS(i.`ts`) AND i.`__wm`
    AND (
      j.`__wm` IS NULL OR j.`__wm` < i.`__wm`
    )
  WHERE
    NOT i.`__wm` IS NULL AND UNIX_MICROS(i.`ts`) <= i.`__wm`
), `n4` AS (
  SELECT
    s.`bidder` AS `bidder`,
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    s.`__wm` AS `__wm`
  FROM `n2` AS s
  LEFT JOIN `n3` AS l
    ON s.`__file` = l.`__file` AND s.`__row` = l.`__row`
  WHERE
    l.`__row` IS NULL
), `n5` AS (
  SELECT
    `bidder`,
    `price`,
    `ts`,
    `__file`,
    `__row`,
    `__wm`,
    CAST(SUM(`price`) OVER (
      PARTITION BY `bidder`
      ORDER BY `ts` ASC, `__file` ASC, `__row` ASC, `__wm` ASC
      ROWS BETWEEN 3 PRECEDING AND CURRENT ROW
    ) AS DOUBLE) AS `__over0`
  FROM `n4`
), `n6` AS (
  SELECT
    `bidder` AS `bidder`,
    `ts` AS `ts`,
    `__over0` AS `recent`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n5`
)
SELECT
  `bidder`,
  `ts`,
  `recent`
FROM `n6`
ORDER BY
  `ts` NULLS LAST
