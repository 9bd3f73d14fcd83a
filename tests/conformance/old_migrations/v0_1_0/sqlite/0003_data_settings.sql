-- The settings that define the data (queue cap, retention, row cap, wake coalescing window), stored
-- with the store so every process sharing it uses one value. Filled by the first process that opens the
-- store; changed only by `sessionwatch settings set`.
CREATE TABLE data_settings (
    name        TEXT PRIMARY KEY,
    value       INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
