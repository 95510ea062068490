//! Tidy: rules about the source tree itself, checked by reading the files (as
//! rust-analyzer's `tidy` test does). Each rule fails with the full list of
//! offending places. Allow-lists name today's exceptions; an entry that no
//! longer offends fails too, so the lists only shrink.

mod modules;
mod online_migrations;
mod source;
mod sql;

use source::{find_path, is_test_file, line_of, non_test_code, read, relative, rust_files};
use std::collections::BTreeSet;

/// Fails with `title` and one line per problem, if there are any.
fn report(title: &str, hint: &str, problems: &[String]) {
    if !problems.is_empty() {
        panic!("\n{title} ({} found):\n  {}\n\n{hint}\n", problems.len(), problems.join("\n  "));
    }
}

/// Allow-list entries (files) that no longer offend: each is a problem.
fn stale(list_name: &str, allowed: &[&str], offending: &BTreeSet<String>) -> Vec<String> {
    allowed
        .iter()
        .filter(|f| !offending.contains(**f))
        .map(|f| format!("{f}: listed in {list_name} but no longer offends; remove it from the list"))
        .collect()
}

// --- a. The engine speaks domain types, not wire types ----------------------

/// Engine files that still import generated proto types; never add to it.
/// (It held `engine/dispatch.rs` and `engine/input.rs` until their wire
/// mapping moved to `grpc/`.)
const ENGINE_PROTO_IMPORTS_ALLOWED: &[&str] = &[];

const GENERATED_PATHS: [&str; 4] = ["baton_proto::coordinator", "baton_proto::worker", "pb::", "wpb::"];

/// Where `code` names a generated proto type: `baton_proto::coordinator…`,
/// `baton_proto::worker…` (also inside `baton_proto::{…}`), `pb::…`, `wpb::…`.
fn proto_uses(code: &[char]) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> =
        GENERATED_PATHS.iter().flat_map(|p| find_path(code, p).into_iter().map(|at| (at, (*p).to_owned()))).collect();
    for at in find_path(code, "baton_proto::{") {
        let start = at + "baton_proto::{".len();
        let mut depth = 1usize;
        let mut end = start;
        while end < code.len() && depth > 0 {
            match code[end] {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            end += 1;
        }
        let group: String = code[start..end.saturating_sub(1).max(start)].iter().collect();
        let top_level: Vec<String> = split_group(&group);
        for item in top_level {
            if item.starts_with("coordinator") || item.starts_with("worker") {
                found.push((at, format!("baton_proto::{{{item}…}}")));
            }
        }
    }
    found.sort();
    found
}

/// The comma-separated items of a `use` group, nested groups kept whole.
fn split_group(group: &str) -> Vec<String> {
    let (mut items, mut current, mut depth) = (Vec::new(), String::new(), 0usize);
    for ch in group.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    items.push(current.trim().to_owned());
    items
}

#[test]
fn the_engine_does_not_import_generated_proto_types() {
    let mut problems = Vec::new();
    let mut offending = BTreeSet::new();
    let files = rust_files(&["coordinator/src/engine"]).unwrap_or_else(|e| panic!("{e}"));
    for file in &files {
        let rel = relative(file);
        let code = source::mask(&read(file).unwrap_or_else(|e| panic!("{e}")));
        let uses = proto_uses(&code);
        if uses.is_empty() {
            continue;
        }
        offending.insert(rel.clone());
        if !ENGINE_PROTO_IMPORTS_ALLOWED.contains(&rel.as_str()) {
            problems.extend(uses.iter().map(|(at, what)| format!("{rel}:{}: {what}", line_of(&code, *at))));
        }
    }
    problems.extend(stale("ENGINE_PROTO_IMPORTS_ALLOWED", ENGINE_PROTO_IMPORTS_ALLOWED, &offending));
    report(
        "generated proto types used in coordinator/src/engine/",
        "The engine works in domain types; converting to and from the wire belongs in coordinator/src/grpc/.",
        &problems,
    );
}

// --- b. Files stay readable -------------------------------------------------

const MAX_LINES: usize = 600;
const SOURCE_DIRS: [&str; 5] = ["proto", "coordinator", "gateway", "worker", "src"];

/// Non-test files over the limit; split them and remove the entry, never add to it.
const LONG_FILES_ALLOWED: &[&str] = &[];

#[test]
fn source_files_stay_under_the_line_limit() {
    let mut problems = Vec::new();
    let mut offending = BTreeSet::new();
    for file in rust_files(&SOURCE_DIRS).unwrap_or_else(|e| panic!("{e}")) {
        if is_test_file(&file) {
            continue;
        }
        let lines = read(&file).unwrap_or_else(|e| panic!("{e}")).lines().count();
        let rel = relative(&file);
        if lines > MAX_LINES {
            offending.insert(rel.clone());
            if !LONG_FILES_ALLOWED.contains(&rel.as_str()) {
                problems.push(format!("{rel}: {lines} lines"));
            }
        }
    }
    problems.extend(stale("LONG_FILES_ALLOWED", LONG_FILES_ALLOWED, &offending));
    report(
        &format!("non-test source files longer than {MAX_LINES} lines"),
        "Split the file by concern (a submodule per part); test files (tests.rs, *_tests.rs, tests/) are exempt.",
        &problems,
    );
}

// --- c. Background tasks are supervised --------------------------------------

/// The one place allowed to start tasks: named, panics logged, awaited at shutdown.
const SUPERVISED_HELPER: &str = "worker/src/supervise.rs";

/// Non-test files that call `tokio::spawn` directly, each with its reason.
/// Everything else goes through a supervised helper (the engine's
/// `TaskTracker` via `Engine::spawn`, or `baton_worker::supervise`).
const BARE_SPAWN_ALLOWED: &[&str] = &[
    // The coalescers' batching task (`coalesce::spawn`) lives exactly as long as
    // the engine that holds its sender; a tracker awaited at shutdown would wait
    // on the engine it belongs to.
    "coordinator/src/engine/batch/coalesce.rs",
];

const SPAWN_PATHS: [&str; 2] = ["tokio::spawn", "tokio::task::spawn"];

#[test]
fn background_tasks_are_started_through_a_supervised_helper() {
    let mut problems = Vec::new();
    let mut offending = BTreeSet::new();
    for file in rust_files(&SOURCE_DIRS).unwrap_or_else(|e| panic!("{e}")) {
        let rel = relative(&file);
        if is_test_file(&file) || rel == SUPERVISED_HELPER {
            continue;
        }
        let Some(code) = non_test_code(&read(&file).unwrap_or_else(|e| panic!("{e}"))) else { continue };
        let mut sites: Vec<usize> = SPAWN_PATHS.iter().flat_map(|p| find_path(&code, p)).collect();
        if sites.is_empty() {
            continue;
        }
        sites.sort_unstable();
        offending.insert(rel.clone());
        if !BARE_SPAWN_ALLOWED.contains(&rel.as_str()) {
            problems.extend(sites.iter().map(|at| format!("{rel}:{}: bare tokio::spawn", line_of(&code, *at))));
        }
    }
    problems.extend(stale("BARE_SPAWN_ALLOWED", BARE_SPAWN_ALLOWED, &offending));
    report(
        "background tasks started with a bare tokio::spawn",
        "Use baton_worker::supervise::spawn_supervised(name, future) (worker, baton binary) or the engine's \
         tracker (coordinator): a named task whose panic is logged and that shutdown awaits. Test code \
         (#[cfg(test)] items, tests.rs, *_tests.rs, tests/) is exempt.",
        &problems,
    );
}

// --- c2. Store transactions begin through one helper -----------------------

/// The one file that may begin a transaction on the pool itself.
const STORE_BEGIN_HELPER: &str = "coordinator/src/store/mod.rs";

#[test]
fn store_transactions_begin_through_the_store_helper() {
    let mut problems = Vec::new();
    for file in rust_files(&["coordinator/src"]).unwrap_or_else(|e| panic!("{e}")) {
        let rel = relative(&file);
        if is_test_file(&file) || rel == STORE_BEGIN_HELPER {
            continue;
        }
        let Some(code) = non_test_code(&read(&file).unwrap_or_else(|e| panic!("{e}"))) else { continue };
        let text: String = code.iter().collect();
        for (at, _) in text.match_indices("pool.begin") {
            let line = text[..at].matches('\n').count() + 1;
            problems.push(format!("{rel}:{line}: a transaction begun on the pool"));
        }
    }
    report(
        "store transactions begun on the pool directly",
        "Use Store::begin: on SQLite it begins IMMEDIATE, so a write beside another process (`baton admin` \
         next to `baton dev`) waits for the lock instead of failing SQLITE_BUSY.",
        &problems,
    );
}

// --- d. Both backends have the same schema ---------------------------------

fn migrated_schema(dir: &str) -> Result<sql::Schema, String> {
    let path = source::root().join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&path)
        .map_err(|e| format!("cannot list {dir}: {e}"))?
        .map(|entry| entry.map(|e| e.path()).map_err(|e| format!("cannot list {dir}: {e}")))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|x| x == "sql"));
    files.sort();
    if files.is_empty() {
        return Err(format!("{dir} holds no .sql migrations"));
    }
    let mut schema = sql::Schema::new();
    for file in files {
        sql::apply(&mut schema, &relative(&file), &read(&file)?)?;
    }
    Ok(schema)
}

#[test]
fn postgres_and_sqlite_migrations_define_the_same_tables_and_columns() {
    let postgres = migrated_schema("migrations/postgres").unwrap_or_else(|e| panic!("{e}"));
    let sqlite = migrated_schema("migrations/sqlite").unwrap_or_else(|e| panic!("{e}"));
    let mut problems = Vec::new();
    if postgres.is_empty() || sqlite.is_empty() {
        problems.push("no CREATE TABLE read from the migrations: the SQL reader is broken".to_owned());
    }
    let tables: BTreeSet<&String> = postgres.keys().chain(sqlite.keys()).collect();
    for table in tables {
        match (postgres.get(table), sqlite.get(table)) {
            (Some(_), None) => problems.push(format!("table {table}: only in postgres")),
            (None, Some(_)) => problems.push(format!("table {table}: only in sqlite")),
            (Some(p), Some(s)) => {
                for column in p.difference(s) {
                    problems.push(format!("{table}.{column}: only in postgres"));
                }
                for column in s.difference(p) {
                    problems.push(format!("{table}.{column}: only in sqlite"));
                }
            }
            (None, None) => {}
        }
    }
    report(
        "migrations/postgres and migrations/sqlite disagree",
        "The store runs one SQL implementation on both backends: every migration needs its twin.",
        &problems,
    );
}

// --- g. Migrations do not stop the service ---------------------------------

#[test]
fn new_postgres_migrations_do_not_rewrite_or_long_lock_existing_tables() {
    let dir = source::root().join("migrations/postgres");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list migrations/postgres: {e}"))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    let mut checks = online_migrations::Checks::default();
    let mut problems = Vec::new();
    let mut last_grandfathered = Vec::new();
    for file in &files {
        let rel = relative(file);
        let sql = read(file).unwrap_or_else(|e| panic!("{e}"));
        let stem = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let Some(number) = stem.split('_').next().and_then(|n| n.parse::<u32>().ok()) else {
            problems.push(format!("{rel}: a migration file is named NNNN_name.sql"));
            continue;
        };
        if number == online_migrations::GRANDFATHERED_THROUGH {
            // The reader must see the real files: the last old one would not pass.
            let mut scratch = online_migrations::Checks::default();
            last_grandfathered = online_migrations::check(&rel, &sql, true, &mut scratch);
        }
        let enforce = number > online_migrations::GRANDFATHERED_THROUGH;
        problems.extend(online_migrations::check(&rel, &sql, enforce, &mut checks));
    }
    if last_grandfathered.is_empty() {
        problems
            .push("the reader refuses nothing in the last grandfathered migration (it rebuilds primary keys)".into());
    }
    report(
        "Postgres migrations that would rewrite or long-lock a table while the service runs",
        &format!(
            "See docs/operating.md, \"Upgrading the schema\": build indexes CONCURRENTLY in a `-- no-transaction` \
             migration, add constraints NOT VALID and VALIDATE them, and so on. If the statement is safe (say, the \
             table is tiny), say why on the line before it: `-- {} <reason>`.",
            online_migrations::MARKER
        ),
        &problems,
    );
}

// --- The readers themselves --------------------------------------------------

#[test]
fn masking_hides_comments_literals_and_test_items() {
    let src = "// tokio::spawn(\nfn a() { let s = \"tokio::spawn(\"; let c = '{'; let r = r#\"}\"#; }\n\
               fn b<'a>(x: &'a str) { tokio::spawn(x) }\n#[cfg(test)]\nmod tests {\n    fn t() { tokio::spawn(async {}); }\n}\n\
               fn c() { tokio::spawn_blocking(|| {}); }\n";
    let code = non_test_code(src).unwrap_or_default();
    let sites: Vec<usize> = find_path(&code, "tokio::spawn").iter().map(|at| line_of(&code, *at)).collect();
    assert_eq!(sites, vec![3], "only the call in fn b");
    assert!(non_test_code("#![cfg(test)]\nfn x() {}").is_none());
}

#[test]
fn proto_imports_are_found_in_all_their_forms() {
    let code = source::mask(
        "use baton_proto::{trace, worker::v1 as w};\nuse baton_proto::coordinator::v1 as pb;\nfn f(_: wpb::X) {}\n\
         // pb::Y in a comment\nuse baton_proto::trace;\n",
    );
    let lines: Vec<usize> = proto_uses(&code).iter().map(|(at, _)| line_of(&code, *at)).collect();
    assert_eq!(lines, vec![1, 2, 3]);
}

// --- e. Modules import each other in one direction ---------------------------

/// Each crate's source folder; a crate's modules never form a circle.
const CRATE_SOURCES: [&str; 8] = [
    "proto/src",
    "proto/telemetry/src",
    "coordinator/src",
    "coordinator/domain/src",
    "gateway/src",
    "worker/src",
    "src",
    "examples/hello-worker/src",
];

#[test]
fn no_two_modules_of_a_crate_import_each_other_even_through_others() {
    let mut problems = Vec::new();
    for dir in CRATE_SOURCES {
        let mut files = Vec::new();
        for file in rust_files(&[dir]).unwrap_or_else(|e| panic!("{e}")) {
            if is_test_file(&file) {
                continue;
            }
            let rel = relative(&file);
            let Some(code) = non_test_code(&read(&file).unwrap_or_else(|e| panic!("{e}"))) else { continue };
            let under_src = rel.strip_prefix(&format!("{dir}/")).unwrap_or(&rel).to_owned();
            files.push(modules::ModuleFile { module: modules::module_of(&under_src), name: rel, code });
        }
        let edges = modules::edges(&files);
        for circle in modules::circles(files.len(), &edges) {
            let names: Vec<&str> = circle.iter().map(|i| files[*i].name.as_str()).collect();
            problems.push(names.join(" <-> "));
        }
    }
    report(
        "import circles between the modules of a crate",
        "Move what the files share down into a module of its own, which imports none of them.",
        &problems,
    );
}

// --- f. One wall clock -------------------------------------------------------

/// The one place that reads the wall clock; everything else asks it.
const CLOCK: &str = "proto/src/clock.rs";

const WALL_CLOCK_READS: [&str; 2] = ["SystemTime::now", "OffsetDateTime::now_utc"];

#[test]
fn the_wall_clock_is_read_in_one_place() {
    let mut problems = Vec::new();
    for file in rust_files(&SOURCE_DIRS).unwrap_or_else(|e| panic!("{e}")) {
        let rel = relative(&file);
        if is_test_file(&file) || rel == CLOCK {
            continue;
        }
        let Some(code) = non_test_code(&read(&file).unwrap_or_else(|e| panic!("{e}"))) else { continue };
        for read in WALL_CLOCK_READS {
            problems
                .extend(find_path(&code, read).into_iter().map(|at| format!("{rel}:{}: {read}", line_of(&code, at))));
        }
    }
    report(
        "wall-clock reads outside the clock",
        "Ask baton_proto::clock (now, now_ms, unix_seconds); intervals and timeouts use Instant.",
        &problems,
    );
}
