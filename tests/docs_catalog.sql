-- The streams and tables that the SQL examples of docs/ read, as memory
-- sources, and a few rows for them. tests/test_docs_sql.py declares them
-- before a page's own statements (skipping every name the page declares
-- itself); paste the file into `dsms` to try the examples by hand.

CREATE STREAM clicks (ad_id BIGINT, impression_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE STREAM impressions (id BIGINT, ad_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE TABLE ads (ad_id BIGINT, campaign VARCHAR, PRIMARY KEY (ad_id) NOT ENFORCED) WITH (connector = 'memory');
CREATE TABLE campaigns (name VARCHAR, owner VARCHAR, PRIMARY KEY (name) NOT ENFORCED) WITH (connector = 'memory');

CREATE STREAM orders (id BIGINT, cur VARCHAR, amount DECIMAL(10, 2), ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE TABLE rates (cur VARCHAR, rate DECIMAL(10, 4), ts TIMESTAMP(3), PRIMARY KEY (cur) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');
CREATE TABLE orders_table (id BIGINT, customer BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE TABLE customers (id BIGINT, name VARCHAR, tier VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'memory');

CREATE STREAM bid (auction BIGINT, price BIGINT, bidder VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE STREAM auction (id BIGINT, seller BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE TABLE person (id BIGINT, name VARCHAR, state VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'memory');

CREATE STREAM ev (k VARCHAR, v BIGINT, user_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE STREAM readings (sensor VARCHAR, v DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE STREAM s (k VARCHAR, x BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');

INSERT INTO ads VALUES (7, 'spring'), (9, 'summer');
INSERT INTO campaigns VALUES ('spring', 'ann');
INSERT INTO impressions VALUES (1, 7, '2024-05-01 12:00:01'), (2, 9, '2024-05-01 12:00:02'),
  (3, 7, '2024-05-01 12:01:30');
INSERT INTO clicks VALUES (7, 1, '2024-05-01 12:00:20'), (9, 2, '2024-05-01 12:00:40'),
  (7, 3, '2024-05-01 12:01:31');
INSERT INTO rates VALUES ('EUR', 1.08, '2024-05-01 12:00:00'), ('EUR', 1.09, '2024-05-01 12:01:00');
INSERT INTO orders VALUES (1, 'EUR', 10.00, '2024-05-01 12:00:30'), (2, 'EUR', 20.00, '2024-05-01 12:01:30'),
  (3, 'USD', 5.00, '2024-05-01 12:01:40');
INSERT INTO customers VALUES (1, 'Ann', 'gold');
INSERT INTO orders_table VALUES (1, 1), (2, 2);
INSERT INTO person VALUES (1, 'Ann', 'OR');
INSERT INTO auction VALUES (1, 1, '2024-05-01 12:00:00');
INSERT INTO bid VALUES (1, 10, 'al', '2024-05-01 12:00:05'), (1, 12, 'bo', '2024-05-01 12:00:20'),
  (2, 7, 'al', '2024-05-01 12:00:25');
INSERT INTO ev VALUES ('a', 1, 1, '2024-05-01 12:00:01'), ('a', 2, 1, '2024-05-01 12:00:09'),
  ('b', 3, 2, '2024-05-01 12:00:12'), ('a', 4, 2, '2024-05-01 12:01:15');
INSERT INTO readings VALUES ('t1', 20.5, '2024-05-01 12:00:01'), ('t1', 21.0, '2024-05-01 12:00:02'),
  ('t2', 18.0, '2024-05-01 12:00:03');
INSERT INTO s VALUES ('a', 5, '2024-05-01 12:00:01'), ('a', 15, '2024-05-01 12:00:11'),
  ('b', 20, '2024-05-01 12:00:12');
