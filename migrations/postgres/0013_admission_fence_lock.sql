-- The admission fence without a row lock per create (see 0011 and
-- coordinator/src/store/fence.rs). Locking the fence row FOR SHARE made every
-- create statement write the row's lock into its tuple (a dirtied page, and a
-- multixact when creates overlap): about a tenth of the create path's cost.
-- A transaction-scoped advisory lock lives in shared memory only: a create
-- holds it shared until it commits, a rebuild takes it exclusively to move the
-- generation on, so it still waits for every create holding the old one.
--
-- Both are functions because a create must read the generation *after* it
-- holds the lock: in read-committed mode a statement's snapshot is taken
-- before its execution starts, but a VOLATILE function's query takes a fresh
-- one, which sees a rebuild that committed while the create waited.
CREATE FUNCTION baton_admission_holds(generation BIGINT) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(4826174539102331);
    RETURN EXISTS (SELECT 1 FROM admission_fence WHERE id = 1 AND gen = generation);
END
$$;

CREATE FUNCTION baton_admission_move_on() RETURNS BIGINT
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    moved BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(4826174539102331);
    UPDATE admission_fence SET gen = gen + 1 WHERE id = 1 RETURNING gen INTO moved;
    RETURN moved;
END
$$;
