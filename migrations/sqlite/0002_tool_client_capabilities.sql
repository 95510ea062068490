-- Tools may require MCP client capabilities (comma-separated names, e.g. sampling)
-- that the gateway checks before a call starts anything.
ALTER TABLE tools ADD COLUMN required_client_capabilities TEXT NOT NULL DEFAULT '';
