-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: auction, ts, __file, __row, __mx
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
    s.`auction` AS `auction`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    s.`__mx` - 5000000 AS `__wm`
  FROM (
    SELECT
      r.`auction`,
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
    `auction` AS `auction`,
    `ts` AS `ts`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n2`
), `n4` AS (
  SELECT
    `auction`,
    `ts`,
    `__file`,
    `__row`,
    `__wm`,
    UNIX_MICROS(`ts`) - (
      (
        (
          UNIX_MICROS(`ts`) % 10000000
        ) + 10000000
      ) % 10000000
    ) AS `__ws`,
    UNIX_MICROS(`ts`) - (
      (
        (
          UNIX_MICROS(`ts`) % 10000000
        ) + 10000000
      ) % 10000000
    ) + 10000000 AS `__we`
  FROM `n3`
), `n5` AS (
  SELECT
    TIMESTAMP_MICROS(`__ws`) AS `window_start`,
    TIMESTAMP_MICROS(`__we`) AS `window_end`,
    TIMESTAMP_MICROS(`__we` - 1000) AS `window_time`,
    `auction`,
    COUNT(*) AS `agg0`
  FROM `n4`
  WHERE
    (
      `__wm` IS NULL OR `__we` - 1000 > `__wm`
    )
  GROUP BY
    `__ws`,
    `__we`,
    `auction`
), `n6` AS (
  SELECT
    `window_start` AS `window_start`,
    `window_end` AS `window_end`,
    `auction` AS `auction`,
    `agg0` AS `n`
  FROM `n5`
), `n7` AS (
  SELECT
    `window_start`,
    `window_end`,
    `auction`,
    `n`,
    `rn`
  FROM (
    SELECT
      `window_start`,
      `window_end`,
      `auction`,
      `n`,
      ROW_NUMBER() OVER (
        PARTITION BY `window_start`, `window_end`
        ORDER BY `n` DESC, `window_start` ASC, `window_end` ASC, `auction` ASC
      ) AS `rn`
    FROM `n6`
  ) AS r
  WHERE
    `rn` <= 3
), `n8` AS (
  SELECT
    `window_start` AS `window_start`,
    `auction` AS `auction`,
    `n` AS `n`
  FROM `n7`
)
SELECT
  `window_start`,
  `auction`,
  `n`
FROM `n8`
ORDER BY
  `window_start` NULLS LAST
