-- Tenancy: organizations (with their members, invitations and dynamic
-- access-control roles) and projects (with their environments and project
-- roles). Every ID and ID-referencing column is COLLATE "C", like the IDs
-- it joins to.

CREATE TABLE organizations (
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT NOT NULL,
    slug        TEXT NOT NULL UNIQUE,
    logo        TEXT,
    metadata    JSONB CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object'),
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    archived_at TIMESTAMPTZ
);

-- role: one role, or several joined with commas (as better-auth stores them).
CREATE TABLE members (
    id              TEXT COLLATE "C" PRIMARY KEY,
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role            TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (organization_id, user_id)
);

CREATE INDEX members_user_idx ON members (user_id);

-- email is stored lower-case.
CREATE TABLE invitations (
    id              TEXT COLLATE "C" PRIMARY KEY,
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email           TEXT NOT NULL,
    role            TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected', 'canceled')),
    inviter_id      TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at      TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX invitations_organization_idx ON invitations (organization_id, status);
CREATE INDEX invitations_email_idx ON invitations (email);

-- Dynamic access-control roles; permission is {"resource": ["action", ...]}.
CREATE TABLE organization_roles (
    id              TEXT COLLATE "C" PRIMARY KEY,
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    role            TEXT NOT NULL,
    permission      JSONB NOT NULL CHECK (jsonb_typeof(permission) = 'object'),
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    UNIQUE (organization_id, role)
);

-- Projects are archived, never deleted; deleting an organization that still
-- has projects fails (no cascade), so project data cannot vanish by accident.
CREATE TABLE projects (
    id              TEXT COLLATE "C" PRIMARY KEY,
    organization_id TEXT COLLATE "C" NOT NULL REFERENCES organizations (id),
    name            TEXT NOT NULL,
    slug            TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    archived_at     TIMESTAMPTZ,
    UNIQUE (organization_id, slug)
);

CREATE TABLE environments (
    id         TEXT COLLATE "C" PRIMARY KEY,
    project_id TEXT COLLATE "C" NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name       TEXT NOT NULL CHECK (name IN ('development', 'staging', 'production')),
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (project_id, name)
);

-- permissions is a JSON array of permission strings.
CREATE TABLE project_roles (
    id          TEXT COLLATE "C" PRIMARY KEY,
    project_id  TEXT COLLATE "C" NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    slug        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    permissions JSONB NOT NULL CHECK (jsonb_typeof(permissions) = 'array'),
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (project_id, slug)
);
