-- The admission generation. Redis admission keeps its generation in its epoch
-- key; a create is admitted under that generation and inserted only while this
-- row still holds it. A rebuild after Redis lost its state moves the
-- generation on before reading the open executions, so a create admitted
-- before the loss is either in what the rebuild reads or never inserted
-- (coordinator/src/store/fence.rs has the argument).
CREATE TABLE admission_fence (
    id  INTEGER PRIMARY KEY,
    gen BIGINT NOT NULL
);

INSERT INTO admission_fence (id, gen) VALUES (1, 0);
