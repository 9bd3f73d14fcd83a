-- 0008 (PostgreSQL only; SQLite writes rows in place and keeps no row versions): a fan-out's cursor
-- updates are HOT again. PostgreSQL writes an update without touching any index (a heap-only tuple) only
-- when no column an index reads changes value. The partial index of 0006 read material and last_seen in
-- its predicate, and every fan-out moves material, so each of the N cursor rows a recording moves got a
-- new entry in all three cursor indexes, and dead versions filled the index pages a later update of the
-- same pair writes into (a 10k-row table held 870k dead versions after a few thousand fan-outs). The
-- predicate now reads one stored column that changes only when a pair starts or stops lagging, so a
-- fan-out to watchers already behind changes no indexed value (the table keeps fillfactor 80 for the new
-- versions). Queries that want the index say `lagging` (sw_sweep).
ALTER TABLE cursors ADD COLUMN lagging boolean GENERATED ALWAYS AS (material > last_seen) STORED;
DROP INDEX IF EXISTS cursors_lagging;
CREATE INDEX cursors_lagging ON cursors (target) WHERE lagging;
