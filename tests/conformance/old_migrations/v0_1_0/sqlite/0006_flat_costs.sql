-- 0006: costs that follow the work a call does, not the size of the store.
-- The restart sweep's lagging pairs (material > last_seen): only those rows are in this index. Keyed
-- by target, like the table, so one event's fan-out rewrites adjacent entries (a watcher-ordered key
-- would scatter them over one index page per watcher: measured 4x slower with 100 watchers per event).
CREATE INDEX cursors_lagging ON cursors (target) WHERE material > last_seen
