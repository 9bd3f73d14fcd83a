-- 0011: a drain or acknowledgment that took something asks whether a lagging pair of the watcher has no
-- live notice (the 20-entry cap evicted it), so the engine can queue it again at once rather than at the
-- next restart. This index makes that question read only the watcher's lagging cursors.
CREATE INDEX cursors_lagging_by_watcher ON cursors (watcher) WHERE material > last_seen;
