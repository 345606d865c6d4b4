-- Seeds stocks from stocks.csv, once: each new stock row gets its outbox row in the same
-- transaction (ADR-021: the initial universe is itself replayable). Run with the client's
-- --local-infile, from the repository root.

CREATE TEMPORARY TABLE stocks_csv (ticker VARCHAR(16) NOT NULL, company_name VARCHAR(191) NOT NULL)
  DEFAULT CHARSET=utf8mb4;
LOAD DATA LOCAL INFILE 'sql/demo/stocks.csv' INTO TABLE stocks_csv
  CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"' IGNORE 1 LINES (ticker, company_name);

START TRANSACTION;
CREATE TEMPORARY TABLE stocks_new DEFAULT CHARSET=utf8mb4 AS
  SELECT c.ticker, c.company_name FROM stocks_csv c LEFT JOIN stocks s ON s.ticker = c.ticker WHERE s.ticker IS NULL;
INSERT INTO stocks (ticker, company_name) SELECT ticker, company_name FROM stocks_new;
INSERT INTO stock_control_outbox (entity_type, entity_key, op, payload)
  SELECT 'stock', ticker, 'upsert', JSON_OBJECT('ticker', ticker, 'companyName', company_name)
  FROM stocks_new ORDER BY ticker;
COMMIT;
