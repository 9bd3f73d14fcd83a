-- 0006: costs that follow the work a call does, not the size of the store (see sqlite/0006 and
-- store/sqlite/upkeep.py for the same model on SQLite; the functions, sw_prune_step and
-- sw_event_rows, are in store/postgres_functions.sql).

-- The restart sweep's lagging pairs (material > last_seen): only those rows are in this index, keyed
-- by target like the fan-out that moves them.
CREATE INDEX cursors_lagging ON cursors (target) WHERE material > last_seen;
