-- __scan0: bids (parquet files at bids.parquet), read by dsms's file reader: bidder, ts, __file, __row, __mx
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
    CAST(NULL AS DOUBLE) AS `price`,
    s.`ts` AS `ts`,
    s.`__file` AS `__file`,
    s.`__row` AS `__row`,
    CAST(NULL AS BIGINT) AS `__wm`
  FROM (
    SELECT
      r.`bidder`,
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
    `bidder` AS `bidder`,
    `ts` AS `ts`,
    `__file`,
    `__row`,
    `__wm`
  FROM `n2`
), `n4` AS (
  SELECT
    `bidder`,
    `ts`,
    `__file`,
    `__row`,
    `__wm`,
    `__sid`,
    MIN(`__t`) OVER (PARTITION BY `bidder`, `__sid`) AS `__ws`,
    MAX(`__t`) OVER (PARTITION BY `bidder`, `__sid`) + 30000000 AS `__we`
  FROM (
    SELECT
      *,
      SUM(`__new`) OVER (
        PARTITION BY `bidder`
        ORDER BY `__t` ASC, `__new` DESC
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
      ) AS `__sid`
    FROM (
      SELECT
        *,
        CASE
          WHEN `__t` <= MAX(`__t`) OVER (
            PARTITION BY `bidder`
            ORDER BY `__t` ASC
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
          ) + 30000000
          THEN 0
          ELSE 1
        END AS `__new`
      FROM (
        SELECT
          `bidder`,
          `ts`,
          `__file`,
          `__row`,
          `__wm`,
          UNIX_MICROS(`ts`) AS `__t`
        FROM `n3`
      ) AS e
    ) AS f
  ) AS i
), `n5` AS (
  SELECT
    TIMESTAMP_MICROS(`__ws`) AS `window_start`,
    TIMESTAMP_MICROS(`__we`) AS `window_end`,
    TIMESTAMP_MICROS(`__we` - 1000) AS `window_time`,
    `bidder`,
    COUNT(*) AS `agg0`
  FROM `n4`
  GROUP BY
    `__ws`,
    `__we`,
    `__sid`,
    `bidder`
), `n6` AS (
  SELECT
    `window_start` AS `window_start`,
    `window_end` AS `window_end`,
    `bidder` AS `bidder`,
    `agg0` AS `n`
  FROM `n5`
)
SELECT
  `window_start`,
  `window_end`,
  `bidder`,
  `n`
FROM `n6`
