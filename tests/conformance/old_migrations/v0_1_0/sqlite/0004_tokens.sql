-- Bearer tokens scoped to agents (or admin). Only a SHA-256 hash of each token is kept; the token itself
-- is shown once when it is created. agents is a JSON array of agent ids (empty for an admin token).
CREATE TABLE tokens (
    token_id    TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL,
    name        TEXT,
    agents      TEXT NOT NULL,
    admin       INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
