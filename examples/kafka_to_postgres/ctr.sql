-- Click-through rate per ad and minute, read from Kafka, written to PostgreSQL.
--
--   make demo-kafka      (run_demo.py fills in the broker, topics and table below)
--
-- Both topics are read from their first offset to the end they have when the
-- query starts ('scan.bounded.mode' = 'latest-offset'), so `dsms run` ends.
-- Events arrive up to 3 seconds out of order: the watermark trails by 5 s.

CREATE STREAM impressions (
  impression_id VARCHAR,
  ad_id         BIGINT,
  ts            TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = '${impressions_topic}',
        'properties.bootstrap.servers' = '${bootstrap}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');

CREATE STREAM clicks (
  impression_id VARCHAR,
  ad_id         BIGINT,
  ts            TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = '${clicks_topic}',
        'properties.bootstrap.servers' = '${bootstrap}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');

-- One stream of both kinds of event.
CREATE VIEW ad_events AS
  SELECT ad_id, ts, 1 AS is_impression, 0 AS is_click FROM impressions
  UNION ALL
  SELECT ad_id, ts, 0 AS is_impression, 1 AS is_click FROM clicks;

-- Each one-minute window is inserted once, when the watermark passes its end.
CREATE SINK ctr_per_minute WITH (
  'connector' = 'jdbc', 'url' = '${jdbc_url}', 'table-name' = '${table}',
  'username' = '${username}', 'password' = '${password}'
) AS
  SELECT window_start, window_end, ad_id,
         SUM(is_impression) AS impressions,
         SUM(is_click)      AS clicks,
         CAST(SUM(is_click) AS DOUBLE) / NULLIF(SUM(is_impression), 0) AS ctr
  FROM TABLE(TUMBLE(TABLE ad_events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
  GROUP BY window_start, window_end, ad_id;
