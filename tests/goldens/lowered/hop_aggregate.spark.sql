-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: price, ts, __file, __row, __mx
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
    s.`price` AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    s.`__mx` - 5000000 AS `__wm`
  FROM (
    SELECT
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
  SELECT
    `price` AS `price`,
    `ts` AS `ts`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n2`
), `n4` AS (
  SELECT
    `price`,
    `ts`,
    `__file`,
    `__row`,
    `__wm`,
    `__each` AS `__ws`,
    `__each` + 10000000 AS `__we`
  FROM (
    SELECT
      `price`,
      `ts`,
      `__file`,
      `__row`,
      `__wm`,
      EXPLODE(
        SEQUENCE(
          UNIX_MICROS(`ts`) - (
            (
              (
                UNIX_MICROS(`ts`) % 5000000
              ) + 5000000
            ) % 5000000
          ) - 5000000,
          UNIX_MICROS(`ts`) - (
            (
              (
                UNIX_MICROS(`ts`) % 5000000
              ) + 5000000
            ) % 5000000
          ),
          5000000
        )
      ) AS `__each`
    FROM `n3`
  ) AS `h`
), `n5` AS (
  SELECT
    TIMESTAMP_MICROS(`__ws`) AS `window_start`,
    TIMESTAMP_MICROS(`__we`) AS `window_end`,
    TIMESTAMP_MICROS(`__we` - 1000) AS `window_time`,
    CAST(SUM(`price`) AS DOUBLE) AS `agg0`
  FROM `n4`
  WHERE
    (
      `__wm` IS NULL OR `__we` - 1000 > `__wm`
    )
  GROUP BY
    `__ws`,
    `__we`
), `n6` AS (
  SELECT
    `window_start` AS `window_start`,
    `window_end` AS `window_end`,
    `agg0` AS `volume`
  FROM `n5`
)
SELECT
  `window_start`,
  `window_end`,
  `volume`
FROM `n6`
ORDER BY
  `window_end` NULLS LAST,
  `window_start` NULLS LAST
