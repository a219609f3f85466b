-- Joins over the ad_ctr example's impressions and clicks, and a versioned table of ads.
--
--   dsms run examples/ad_joins/ad_joins.sql
--   dsms explain examples/ad_joins/ad_joins.sql
--
-- Paths are relative to this file; out/ holds the sinks.

CREATE STREAM impressions (
  impression_id VARCHAR, ad_id BIGINT, user_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '../ad_ctr/data/impressions.jsonl', format = 'json');

CREATE STREAM clicks (
  impression_id VARCHAR, ad_id BIGINT, user_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '../ad_ctr/data/clicks.jsonl', format = 'json');

-- A versioned table: each Debezium change says from when (ts) an ad has its bid and campaign.
CREATE TABLE ads (
  ad_id BIGINT, campaign VARCHAR, bid DOUBLE, ts TIMESTAMP(3),
  PRIMARY KEY (ad_id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = 'data/ads.jsonl', format = 'debezium-json');

-- Interval join: every impression with its click within 30 seconds, or with NULL once
-- the watermark proves no click can come. Append-only, so a plain JSON sink takes it.
CREATE SINK attributed WITH (connector = 'file', path = 'out/attributed.jsonl', format = 'json',
  'sink.mode' = 'overwrite') AS
  SELECT i.impression_id, i.ad_id, i.ts, c.ts AS clicked_at
  FROM impressions i LEFT JOIN clicks c
    ON c.impression_id = i.impression_id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '30' SECOND;

-- Temporal join feeding a window: what each campaign spent per minute, at the bid each
-- ad had when its impression was served.
CREATE SINK spend WITH (connector = 'file', path = 'out/spend.jsonl', format = 'json',
  'sink.mode' = 'overwrite') AS
  SELECT window_start, campaign, COUNT(*) AS impressions, ROUND(SUM(bid), 2) AS spend
  FROM TABLE(TUMBLE(TABLE (
    SELECT i.ts, a.campaign, a.bid
    FROM impressions i JOIN ads FOR SYSTEM_TIME AS OF i.ts AS a ON i.ad_id = a.ad_id
  ), DESCRIPTOR(ts), INTERVAL '1' MINUTE))
  GROUP BY window_start, window_end, campaign;

-- An aggregate over the table: updating, so it goes to a changelog sink.
CREATE SINK campaigns WITH (connector = 'file', path = 'out/campaigns.jsonl', format = 'changelog-json',
  'sink.mode' = 'overwrite') AS
  SELECT campaign, COUNT(*) AS ads, MAX(bid) AS top_bid FROM ads GROUP BY campaign;
