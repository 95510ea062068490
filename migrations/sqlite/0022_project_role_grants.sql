-- Roles for people (decision 0050): a project's grant of a role to an email
-- address or to a group of the OpenID provider. A person signed in through the
-- provider holds, in a project, the strongest role among the grants that name
-- their email or one of their groups, read on every request, so a revoked
-- grant takes effect on the next one. `baton admin grant-role` writes a row
-- (replacing the role of the same subject), `revoke-role` deletes it; both are
-- audited. Emails are kept lowercased; groups as the provider spells them.
CREATE TABLE project_role_grants (
    project_id    TEXT NOT NULL,
    subject_kind  TEXT NOT NULL,
    subject       TEXT NOT NULL,
    role          TEXT NOT NULL,
    granted_at    BIGINT NOT NULL,
    PRIMARY KEY (project_id, subject_kind, subject)
);

-- A person's dashboard session, opened by sign-in with the OpenID provider:
-- like dashboard_sessions, but for a person instead of an API key. The
-- person's role is not kept here: it is read from the grants on every request.
-- `groups_json` holds the groups the provider named at sign-in.
CREATE TABLE person_sessions (
    token_hash    BLOB PRIMARY KEY,
    org_id        TEXT NOT NULL,
    project_id    TEXT NOT NULL,
    subject       TEXT NOT NULL,
    email         TEXT NOT NULL,
    groups_json   TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_seen_at  BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    ended_at      BIGINT
);

CREATE INDEX person_sessions_expiry ON person_sessions (expires_at);
