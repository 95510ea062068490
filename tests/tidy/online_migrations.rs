//! Postgres migrations run while the service serves (decision 0046): a
//! statement that rewrites a table or scans it under a lock that blocks
//! writes stops every request touching that table for as long as it runs.
//! This reads each migration numbered above `GRANDFATHERED_THROUGH` statement
//! by statement (cut exactly as the runner cuts a no-transaction migration)
//! and refuses those, unless the statement carries
//! `-- tidy: allow-lock <why it is safe>` (before it or inside it).
//!
//! Tables created in the same file are new and empty, so what would lock or
//! rewrite them costs nothing; `SET NOT NULL` is fine once a `CHECK (c IS
//! NOT NULL)` on the column has been validated (in any earlier statement or
//! file), since Postgres then skips the scan.

use crate::sql::{identifier, strip_comments};
use std::collections::{BTreeMap, BTreeSet};

#[path = "../../coordinator/src/store/migrations/statements.rs"]
mod statements;

/// The last migration written before the rule existed; later ones are held to it.
pub(crate) const GRANDFATHERED_THROUGH: u32 = 20;

pub(crate) const MARKER: &str = "tidy: allow-lock";
const NO_TRANSACTION: &str = "-- no-transaction";

/// Functions whose value differs per row: as a new column's default, each
/// existing row gets its own, so Postgres rewrites the table. (`now()` is
/// the transaction's time, stable: stored once, no rewrite.)
const VOLATILE: [&str; 7] =
    ["RANDOM", "GEN_RANDOM_UUID", "UUID_GENERATE_V1", "UUID_GENERATE_V4", "CLOCK_TIMESTAMP", "TIMEOFDAY", "NEXTVAL"];
const SERIAL: [&str; 3] = ["SMALLSERIAL", "SERIAL", "BIGSERIAL"];

/// What the migrations read so far established about `CHECK (c IS NOT NULL)`.
#[derive(Default)]
pub(crate) struct Checks {
    /// (table, constraint) → the column it holds not null.
    not_null: BTreeMap<(String, String), String>,
    /// (table, column) with such a check validated.
    validated: BTreeSet<(String, String)>,
}

/// Reads one migration file: records its checks in `checks`, and when
/// `enforce`, answers a line per refused statement.
pub(crate) fn check(file: &str, sql: &str, enforce: bool, checks: &mut Checks) -> Vec<String> {
    let mut problems = Vec::new();
    let no_tx = sql.starts_with(NO_TRANSACTION);
    let mut fresh = BTreeSet::new();
    for raw in statements::split(sql) {
        let words = tokens(&strip_comments(&raw));
        let head = statements::first_line(&raw);
        let allowed = raw.lines().any(|l| {
            l.trim_start()
                .strip_prefix("--")
                .and_then(|c| c.trim().strip_prefix(MARKER))
                .is_some_and(|why| !why.trim().is_empty())
        });
        for why in refusals(&words, &mut fresh, checks) {
            if enforce && !allowed {
                problems.push(format!("{file}: {why}: {head}"));
            }
        }
        if enforce && !no_tx && words.iter().any(|w| w == "CONCURRENTLY") {
            problems.push(format!(
                "{file}: CONCURRENTLY cannot run in a transaction; start the file with `{NO_TRANSACTION}`: {head}"
            ));
        }
    }
    problems
}

/// Upper-case words, with `(`, `)` and `,` as words of their own.
fn tokens(code: &str) -> Vec<String> {
    code.replace('(', " ( ")
        .replace(')', " ) ")
        .replace(',', " , ")
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect()
}

fn starts(words: &[String], prefix: &[&str]) -> bool {
    words.len() >= prefix.len() && prefix.iter().zip(words).all(|(p, w)| p == w)
}

fn has(words: &[String], word: &str) -> bool {
    words.iter().any(|w| w == word)
}

/// The word after the first `word`.
fn after<'w>(words: &'w [String], word: &str) -> Option<&'w String> {
    words.iter().position(|w| w == word).and_then(|i| words.get(i + 1))
}

/// Why the statement `words` is refused (empty: it is not). Tables it
/// creates go into `fresh`; its not-null checks into `checks`.
fn refusals(words: &[String], fresh: &mut BTreeSet<String>, checks: &mut Checks) -> Vec<&'static str> {
    let mut why = Vec::new();
    if starts(words, &["CREATE", "TABLE"]) {
        let name = words.iter().skip(2).find(|w| !["IF", "NOT", "EXISTS"].contains(&w.as_str()));
        fresh.extend(name.map(|n| identifier(n)));
    } else if starts(words, &["CREATE", "INDEX"]) || starts(words, &["CREATE", "UNIQUE", "INDEX"]) {
        let table = after(words, "ON").map(|t| if t == "ONLY" { String::new() } else { identifier(t) });
        // `ON ONLY` a partitioned table builds nothing: each partition's index is built (concurrently) and attached.
        let builds = table.as_ref().is_some_and(|t| !t.is_empty() && !fresh.contains(t));
        if builds && !has(words, "CONCURRENTLY") {
            why.push("CREATE INDEX without CONCURRENTLY on an existing table blocks its writes while it builds");
        }
    } else if starts(words, &["ALTER", "TABLE"]) {
        alter_table(words, fresh, checks, &mut why);
    } else if starts(words, &["VACUUM"]) && has(words, "FULL") {
        why.push("VACUUM FULL rewrites the table under an exclusive lock");
    } else if starts(words, &["CLUSTER"]) {
        why.push("CLUSTER rewrites the table under an exclusive lock");
    } else if starts(words, &["LOCK"]) {
        why.push("LOCK TABLE holds a table lock for the rest of the migration");
    } else if starts(words, &["REINDEX"]) && !has(words, "CONCURRENTLY") {
        why.push("REINDEX without CONCURRENTLY blocks the table's writes while it builds");
    }
    why
}

fn alter_table(words: &[String], fresh: &BTreeSet<String>, checks: &mut Checks, why: &mut Vec<&'static str>) {
    let mut rest = &words[2..];
    for skip in [&["IF", "EXISTS"][..], &["ONLY"][..]] {
        if starts(rest, skip) {
            rest = &rest[skip.len()..];
        }
    }
    let Some((name, actions)) = rest.split_first() else { return };
    let table = identifier(name);
    let new = fresh.contains(&table);
    for action in top_level(actions) {
        let is = |prefix: &[&str]| starts(action, prefix);
        if is(&["ADD", "CONSTRAINT"]) {
            let constraint = identifier(&action[2]);
            if let [_, _, _, check, open, column, is_, not, null, close, ..] = action
                && [check, open, is_, not, null, close].map(String::as_str) == ["CHECK", "(", "IS", "NOT", "NULL", ")"]
            {
                let column = identifier(column);
                if !has(action, "VALID") {
                    checks.validated.insert((table.clone(), column.clone()));
                }
                checks.not_null.insert((table.clone(), constraint), column);
            }
        } else if is(&["VALIDATE", "CONSTRAINT"]) {
            let key = (table.clone(), action.get(2).map(|c| identifier(c)).unwrap_or_default());
            if let Some(column) = checks.not_null.get(&key) {
                checks.validated.insert((table.clone(), column.clone()));
            }
        }
        if new {
            continue;
        }
        let column_change = is(&["ALTER"]).then(|| {
            let at = if action.get(1).is_some_and(|w| w == "COLUMN") { 2 } else { 1 };
            (action.get(at).map(|c| identifier(c)).unwrap_or_default(), &action[(at + 1).min(action.len())..])
        });
        if let Some((column, change)) = column_change {
            if starts(change, &["TYPE"]) || starts(change, &["SET", "DATA", "TYPE"]) {
                why.push("ALTER COLUMN … TYPE rewrites the table under an exclusive lock");
            } else if starts(change, &["SET", "NOT", "NULL"]) && !checks.validated.contains(&(table.clone(), column)) {
                why.push(
                    "SET NOT NULL scans the table under an exclusive lock; first ADD CONSTRAINT … CHECK (column IS NOT \
                     NULL) NOT VALID and VALIDATE CONSTRAINT it",
                );
            }
        } else if is(&["ADD"]) && !is(&["ADD", "CONSTRAINT"]) && !is(&["ADD", "PRIMARY"]) && !is(&["ADD", "UNIQUE"]) {
            let volatile = action.iter().skip_while(|w| *w != "DEFAULT").any(|w| VOLATILE.contains(&w.as_str()));
            let rewrites = SERIAL.iter().any(|s| has(action, s)) || (has(action, "GENERATED") && has(action, "STORED"));
            if volatile || rewrites {
                why.push("ADD COLUMN with a volatile default or a generated value rewrites the table");
            }
        }
        if is(&["ADD"]) {
            let validates = has(action, "FOREIGN") || has(action, "CHECK") || has(action, "REFERENCES");
            if has(action, "CONSTRAINT") && validates && !(has(action, "NOT") && has(action, "VALID")) {
                why.push("ADD CONSTRAINT (foreign key or check) without NOT VALID scans the table under a lock");
            }
            let indexes = has(action, "UNIQUE") || (has(action, "PRIMARY") && has(action, "KEY"));
            if indexes && !has(action, "USING") {
                why.push("ADD UNIQUE / PRIMARY KEY builds its index under an exclusive lock; build it concurrently and add USING INDEX");
            }
        }
    }
}

/// `words` cut at commas outside parentheses.
fn top_level(words: &[String]) -> Vec<&[String]> {
    let (mut parts, mut start, mut depth) = (Vec::new(), 0, 0usize);
    for (i, w) in words.iter().enumerate() {
        match w.as_str() {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                parts.push(&words[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&words[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

#[cfg(test)]
mod rule {
    use super::*;

    /// What the rule says about `sql` as a new migration, after `before` (an older one).
    fn refused(before: &str, sql: &str) -> Vec<String> {
        let mut checks = Checks::default();
        check("0020.sql", before, false, &mut checks);
        check("0021.sql", sql, true, &mut checks)
    }

    #[test]
    fn statements_that_rewrite_or_long_lock_an_existing_table_are_refused() {
        let refused_forms = [
            "CREATE INDEX jobs_note ON jobs (note);",
            "CREATE UNIQUE INDEX IF NOT EXISTS jobs_note ON public.jobs (note);",
            "ALTER TABLE jobs ALTER COLUMN note TYPE BIGINT;",
            "ALTER TABLE ONLY jobs ALTER note SET DATA TYPE BIGINT USING note::bigint;",
            "ALTER TABLE jobs ADD COLUMN token UUID DEFAULT gen_random_uuid();",
            "ALTER TABLE jobs ADD COLUMN n INT NOT NULL DEFAULT (random() * 10)::int;",
            "ALTER TABLE jobs ADD COLUMN seq BIGSERIAL;",
            "ALTER TABLE jobs ALTER COLUMN note SET NOT NULL;",
            "ALTER TABLE jobs ADD CONSTRAINT jobs_owner FOREIGN KEY (owner) REFERENCES owners (id);",
            "ALTER TABLE jobs ADD COLUMN x TEXT, ADD CONSTRAINT jobs_n CHECK (n > 0);",
            "ALTER TABLE jobs ADD CONSTRAINT jobs_key UNIQUE (org_id, key);",
            "VACUUM (FULL, ANALYZE) jobs;",
            "CLUSTER jobs USING jobs_pkey;",
            "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;",
            "REINDEX TABLE jobs;",
        ];
        for sql in refused_forms {
            let problems = refused("", sql);
            assert_eq!(problems.len(), 1, "{sql}: {problems:?}");
        }
        let marked = "-- tidy: allow-lock\nLOCK TABLE jobs IN SHARE MODE;";
        assert_eq!(refused("", marked).len(), 1, "a marker without a reason allows nothing");
    }

    #[test]
    fn the_online_forms_new_tables_and_marked_statements_are_allowed() {
        let allowed_forms = [
            "-- no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_note ON jobs (note);",
            "CREATE TABLE fresh (id BIGINT, note TEXT);\nCREATE INDEX fresh_note ON fresh (note);\n\
             ALTER TABLE fresh ALTER COLUMN note TYPE BIGINT, ALTER COLUMN note SET NOT NULL;",
            "CREATE INDEX jobs_by_day ON ONLY jobs (day);",
            "ALTER TABLE jobs ADD COLUMN seen BIGINT NOT NULL DEFAULT 0, ADD COLUMN at TIMESTAMPTZ DEFAULT now();",
            "ALTER TABLE jobs ADD CONSTRAINT jobs_owner FOREIGN KEY (owner) REFERENCES owners (id) NOT VALID;",
            "ALTER TABLE jobs VALIDATE CONSTRAINT jobs_owner;",
            "ALTER TABLE jobs ADD CONSTRAINT jobs_note_set CHECK (note IS NOT NULL) NOT VALID;\n\
             ALTER TABLE jobs VALIDATE CONSTRAINT jobs_note_set;\nALTER TABLE jobs ALTER COLUMN note SET NOT NULL;",
            "ALTER TABLE jobs ADD CONSTRAINT jobs_key UNIQUE USING INDEX jobs_key_idx;",
            "-- tidy: allow-lock jobs holds at most 50 rows (one per tool)\nLOCK TABLE jobs IN SHARE MODE;",
            "ALTER TABLE jobs\n    -- tidy: allow-lock the column is empty until 0022 fills it\n    ALTER COLUMN note TYPE BIGINT;",
            "CREATE FUNCTION f() RETURNS INT LANGUAGE plpgsql AS $$ BEGIN LOCK TABLE jobs; RETURN 1; END $$;",
        ];
        for sql in allowed_forms {
            assert_eq!(refused("", sql), Vec::<String>::new(), "{sql}");
        }
        let validated_earlier = "ALTER TABLE jobs ADD CONSTRAINT jobs_note_set CHECK (note IS NOT NULL) NOT VALID;\n\
                                 ALTER TABLE jobs VALIDATE CONSTRAINT jobs_note_set;";
        assert!(refused(validated_earlier, "ALTER TABLE jobs ALTER COLUMN note SET NOT NULL;").is_empty());
    }

    #[test]
    fn concurrently_needs_a_migration_without_a_transaction() {
        let problems = refused("", "CREATE INDEX CONCURRENTLY jobs_note ON jobs (note);");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("-- no-transaction"), "{problems:?}");
    }
}
