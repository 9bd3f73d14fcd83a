-- 0006: costs that follow the work a call does, not the size of the store.
-- A watcher's live notice slots: the index range (watcher, queued_idx > the queue's live floor) holds at
-- most the queue cap, however many targets the watcher has. It replaces the plain (watcher) index, so
-- the only extra write is moving the entry when a notice is appended.
DROP INDEX cursors_by_watcher;
CREATE INDEX cursors_by_watcher ON cursors (watcher, queued_idx);
-- The restart sweep's lagging pairs (material > last_seen): only those rows are in this index.
CREATE INDEX cursors_lagging ON cursors (watcher) WHERE material > last_seen
