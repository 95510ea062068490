//! Just enough SQL to know which tables and columns a migration sequence
//! leaves behind: `CREATE TABLE`, `ALTER TABLE … ADD/DROP/RENAME`, `DROP
//! TABLE`. Types, constraints and every other statement are ignored.

use std::collections::{BTreeMap, BTreeSet};

/// Table name → column names, all lower case.
pub(crate) type Schema = BTreeMap<String, BTreeSet<String>>;

/// Applies the statements of `sql` (the file `file`) to `schema`.
pub(crate) fn apply(schema: &mut Schema, file: &str, sql: &str) -> Result<(), String> {
    for statement in statements(&strip_comments(sql)) {
        let words: Vec<&str> = statement.split_whitespace().collect();
        let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        let starts = |prefix: &[&str]| upper.len() >= prefix.len() && prefix.iter().zip(&upper).all(|(p, u)| p == u);
        let fail = |why: &str| format!("{file}: {why}: {}", words.join(" "));
        if starts(&["CREATE", "TABLE"]) && upper.windows(2).any(|w| w[0] == "PARTITION" && w[1] == "OF") {
            // A partition holds its parent's columns; it is not a table of its own.
            continue;
        } else if starts(&["CREATE", "TABLE"]) {
            let (name, columns) =
                create_table(schema, &statement).ok_or_else(|| fail("cannot read this CREATE TABLE"))?;
            if schema.insert(name, columns).is_some() {
                return Err(fail("the table already exists"));
            }
        } else if starts(&["ALTER", "TABLE"]) {
            alter_table(schema, &statement).map_err(|why| fail(&why))?;
        } else if starts(&["DROP", "TABLE"]) {
            let skip = if starts(&["DROP", "TABLE", "IF", "EXISTS"]) { 4 } else { 2 };
            for name in words[skip..].join(" ").split(',') {
                let name = name.split_whitespace().next().map(identifier).unwrap_or_default();
                if schema.remove(&name).is_none() && skip == 2 {
                    return Err(fail("dropping a table never created"));
                }
            }
        }
    }
    Ok(())
}

/// A bare, lower-case name: quotes and any schema qualifier removed.
pub(crate) fn identifier(word: &str) -> String {
    let word = word.rsplit('.').next().unwrap_or(word);
    word.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']').to_ascii_lowercase()
}

/// `sql` without `--` and `/* */` comments (quoted text kept).
pub(crate) fn strip_comments(sql: &str) -> String {
    let c: Vec<char> = sql.chars().collect();
    let mut out = String::with_capacity(sql.len());
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\'' => {
                let end = (i + 1..c.len()).find(|&j| c[j] == '\'').unwrap_or(c.len());
                out.extend(&c[i..(end + 1).min(c.len())]);
                i = end + 1;
            }
            '-' if c.get(i + 1) == Some(&'-') => {
                i = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                i = (i + 2..c.len()).find(|&j| c[j] == '*' && c.get(j + 1) == Some(&'/')).map_or(c.len(), |j| j + 2);
                out.push(' ');
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    out
}

/// Splits `sql` at `;` outside quotes, dropping empty statements.
fn statements(sql: &str) -> Vec<String> {
    split_top_level(sql, ';').into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// Splits at `sep` outside quotes and parentheses.
fn split_top_level(text: &str, sep: char) -> Vec<String> {
    let (mut parts, mut current, mut depth, mut quoted) = (Vec::new(), String::new(), 0usize, false);
    for ch in text.chars() {
        match ch {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            c if c == sep && !quoted && depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    parts.push(current);
    parts
}

const TABLE_CONSTRAINTS: [&str; 6] = ["CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "EXCLUDE"];

/// The index of the `)` closing the `(` at `open` (quoted text skipped).
fn closing(text: &str, open: usize) -> Option<usize> {
    let (mut depth, mut quoted) = (0usize, false);
    for (i, ch) in text.char_indices().skip_while(|(i, _)| *i < open) {
        match ch {
            '\'' => quoted = !quoted,
            _ if quoted => {}
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn create_table(schema: &Schema, statement: &str) -> Option<(String, BTreeSet<String>)> {
    let open = statement.find('(')?;
    let head: Vec<&str> = statement[..open].split_whitespace().collect();
    let upper: Vec<String> = head.iter().map(|w| w.to_ascii_uppercase()).collect();
    let name = match upper.as_slice() {
        [c, t, name] if c == "CREATE" && t == "TABLE" => name,
        [c, t, i, n, e, name] if c == "CREATE" && t == "TABLE" && i == "IF" && n == "NOT" && e == "EXISTS" => name,
        _ => return None,
    };
    let close = closing(statement, open)?;
    let mut columns = BTreeSet::new();
    for item in split_top_level(statement.get(open + 1..close)?, ',') {
        let mut words = item.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first.eq_ignore_ascii_case("LIKE") {
            columns.extend(schema.get(&identifier(words.next()?))?.iter().cloned());
        } else if !TABLE_CONSTRAINTS.contains(&first.to_ascii_uppercase().as_str()) {
            columns.insert(identifier(first));
        }
    }
    Some((identifier(name), columns))
}

fn alter_table(schema: &mut Schema, statement: &str) -> Result<(), String> {
    let words: Vec<&str> = statement.split_whitespace().collect();
    let mut rest = &words[2..];
    let is = |w: Option<&&str>, k: &str| w.is_some_and(|w| w.eq_ignore_ascii_case(k));
    if is(rest.first(), "IF") && is(rest.get(1), "EXISTS") {
        rest = &rest[2..];
    }
    if is(rest.first(), "ONLY") {
        rest = &rest[1..];
    }
    let Some((name, actions)) = rest.split_first() else { return Err("no table named".into()) };
    let mut table = identifier(name);
    for action in split_top_level(&actions.join(" "), ',') {
        let a: Vec<&str> = action.split_whitespace().collect();
        let columns = schema.get_mut(&table).ok_or("altering a table never created")?;
        let mut i = 1;
        // Steps over the keyword `k` at `i`, if it is there.
        let skip = |i: &mut usize, k: &str| {
            let hit = is(a.get(*i), k);
            if hit {
                *i += 1;
            }
            hit
        };
        match a.first().map(|w| w.to_ascii_uppercase()).as_deref() {
            Some("ADD") => {
                skip(&mut i, "COLUMN");
                if skip(&mut i, "IF") {
                    skip(&mut i, "NOT");
                    skip(&mut i, "EXISTS");
                }
                let column = a.get(i).ok_or("ADD without a column")?;
                if !TABLE_CONSTRAINTS.contains(&column.to_ascii_uppercase().as_str()) {
                    columns.insert(identifier(column));
                }
            }
            Some("DROP") if !is(a.get(1), "CONSTRAINT") => {
                skip(&mut i, "COLUMN");
                if skip(&mut i, "IF") {
                    skip(&mut i, "EXISTS");
                }
                let column = a.get(i).ok_or("DROP without a column")?;
                columns.remove(&identifier(column));
            }
            Some("RENAME") if is(a.get(1), "TO") => {
                let new = identifier(a.get(2).ok_or("RENAME TO without a name")?);
                let moved = schema.remove(&table).unwrap_or_default();
                schema.insert(new.clone(), moved);
                table = new;
            }
            Some("RENAME") => {
                skip(&mut i, "COLUMN");
                let (old, to, new) = (a.get(i), a.get(i + 1), a.get(i + 2));
                let (Some(old), true, Some(new)) = (old, is(to, "TO"), new) else {
                    return Err("cannot read this RENAME".into());
                };
                if !columns.remove(&identifier(old)) {
                    return Err(format!("renaming a column never created: {old}"));
                }
                columns.insert(identifier(new));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod reader {
    use super::*;

    fn schema(sql: &str) -> Result<Schema, String> {
        let mut s = Schema::new();
        apply(&mut s, "t.sql", sql)?;
        Ok(s)
    }

    fn columns(s: &Schema, table: &str) -> Vec<String> {
        s.get(table).map(|c| c.iter().cloned().collect()).unwrap_or_default()
    }

    #[test]
    fn reads_tables_columns_and_changes_ignoring_constraints_comments_and_types() -> Result<(), String> {
        let s = schema(
            "-- a; comment\nCREATE TABLE IF NOT EXISTS \"T\" (\n  id TEXT PRIMARY KEY, -- the id\n  n NUMERIC(10, 2) DEFAULT '(;,)',\n  CONSTRAINT t_pk PRIMARY KEY (id, n)\n);\n\
             CREATE INDEX t_n ON t (n);\n/* x; */ ALTER TABLE t ADD COLUMN IF NOT EXISTS extra BLOB;\n\
             ALTER TABLE t RENAME COLUMN n TO amount, DROP COLUMN id;\nCREATE TABLE gone (a INT);\nDROP TABLE gone;",
        )?;
        assert_eq!(s.keys().cloned().collect::<Vec<_>>(), vec!["t".to_owned()]);
        assert_eq!(columns(&s, "t"), vec!["amount".to_owned(), "extra".to_owned()]);
        Ok(())
    }

    #[test]
    fn a_partitioned_table_like_another_has_its_columns_and_its_partitions_are_not_tables() -> Result<(), String> {
        let s = schema(
            "CREATE TABLE old (a INT, b TEXT DEFAULT ')');\n\
             CREATE TABLE new (LIKE old INCLUDING DEFAULTS, c INT) PARTITION BY RANGE (a);\n\
             CREATE TABLE new_p1 PARTITION OF new FOR VALUES FROM (1) TO (2);\n\
             CREATE TABLE new_default PARTITION OF new DEFAULT;\nDROP TABLE old;",
        )?;
        assert_eq!(s.keys().cloned().collect::<Vec<_>>(), vec!["new".to_owned()]);
        assert_eq!(columns(&s, "new"), vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]);
        Ok(())
    }

    #[test]
    fn altering_an_unknown_table_is_an_error() {
        assert!(schema("ALTER TABLE nowhere ADD COLUMN x TEXT;").is_err());
    }
}
