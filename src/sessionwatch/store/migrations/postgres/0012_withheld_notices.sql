-- 0012: a drain or acknowledgment that took something asks whether a lagging pair of the watcher has no
-- live notice (the 20-entry cap evicted it), so the engine can queue it again at once rather than at the
-- next restart (sw_drain's 'withheld' row). This index makes that question read only the watcher's
-- lagging cursors. Its predicate is the stored column of 0008, like cursors_lagging: a fan-out to a pair
-- that is already behind changes neither, so those updates stay HOT.
CREATE INDEX cursors_lagging_by_watcher ON cursors (watcher) WHERE lagging;
