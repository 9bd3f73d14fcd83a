-- Bearer tokens scoped to agents (or admin); see migrations/sqlite/0004_tokens.sql. Only a SHA-256 hash of
-- each token is kept; gateways re-read a row at most a second after caching it, so a revocation reaches
-- every gateway of the database within a second.
CREATE TABLE tokens (
    token_id    text COLLATE "C" PRIMARY KEY,
    token_hash  text NOT NULL,
    name        text,
    agents      text NOT NULL,
    admin       boolean NOT NULL DEFAULT false,
    created_at  bigint NOT NULL,
    revoked_at  bigint
);
