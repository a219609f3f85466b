-- Click-through rate per ad and minute, from two out-of-order event streams.
--
--   dsms run examples/ad_ctr/ad_ctr.sql
--
-- Paths are relative to this file. Both streams arrive up to 3 seconds out of
-- order, so the watermark trails the largest event time seen by 5 seconds.

CREATE STREAM impressions (
  impression_id VARCHAR,
  ad_id         BIGINT,
  user_id       BIGINT,
  ts            TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = 'data/impressions.jsonl', format = 'json');

CREATE STREAM clicks (
  impression_id VARCHAR,
  ad_id         BIGINT,
  user_id       BIGINT,
  ts            TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = 'data/clicks.jsonl', format = 'json');

-- One stream of both kinds of event.
CREATE VIEW ad_events AS
  SELECT ad_id, ts, 1 AS is_impression, 0 AS is_click FROM impressions
  UNION ALL
  SELECT ad_id, ts, 0 AS is_impression, 1 AS is_click FROM clicks;

-- Each one-minute window is emitted once, when the watermark passes its end.
CREATE VIEW ctr_per_minute AS
  SELECT window_start, window_end, ad_id,
         SUM(is_impression) AS impressions,
         SUM(is_click)      AS clicks,
         CAST(SUM(is_click) AS DOUBLE) / NULLIF(SUM(is_impression), 0) AS ctr
  FROM TABLE(TUMBLE(TABLE ad_events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
  GROUP BY window_start, window_end, ad_id;

CREATE SINK ctr WITH (connector = 'file', path = 'out/ctr.jsonl', format = 'json',
  'sink.mode' = 'overwrite') AS
  SELECT * FROM ctr_per_minute;

-- Printed as each window closes, for ads 1 to 3.
SELECT window_start, ad_id, impressions, clicks, ROUND(ctr, 3) AS ctr
FROM ctr_per_minute
WHERE ad_id <= 3;
