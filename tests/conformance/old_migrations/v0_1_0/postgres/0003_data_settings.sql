-- The settings that define the data (queue cap, retention, row cap, wake coalescing window), stored
-- with the store so every gateway sharing it uses one value. Filled by the first process that opens the
-- store; changed only by `sessionwatch settings set`.
CREATE TABLE data_settings (
    name        text COLLATE "C" PRIMARY KEY,
    value       bigint NOT NULL,
    updated_at  bigint NOT NULL
);
