//! A migration's text cut into its statements, at each `;` that is SQL rather
//! than text: not inside a quoted literal or identifier, a comment, or a
//! dollar-quoted body (`$$ … $$`, `$fn$ … $fn$`, as plpgsql functions use).
//! A migration that runs without a transaction needs it, since Postgres runs
//! the statements of one multi-statement query in one implicit transaction,
//! where `CREATE INDEX CONCURRENTLY` is refused; `baton migrate --plan` shows
//! each statement by its first line. The tidy rule on migrations compiles
//! this file too (it links no workspace crate), so it reads the statements
//! the runner runs; keep it free of imports.

/// The statements of `sql` in order, each trimmed; comments before a
/// statement stay with it, and pieces holding only comments are dropped.
pub(super) fn split(sql: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut start = 0;
    let mut rest = sql;
    let mut at = 0;
    while let Some(ch) = rest.chars().next() {
        let skip = match ch {
            '\'' | '"' => closing_quote(rest, ch),
            '-' if rest.starts_with("--") => rest.find('\n').map_or(rest.len(), |n| n + 1),
            '/' if rest.starts_with("/*") => rest[2..].find("*/").map_or(rest.len(), |n| n + 4),
            '$' => dollar_body(rest).unwrap_or(1),
            ';' => {
                push(&mut statements, &sql[start..at]);
                start = at + 1;
                1
            }
            other => other.len_utf8(),
        };
        at += skip;
        rest = &sql[at..];
    }
    push(&mut statements, &sql[start..]);
    statements
}

/// The first line of `statement` that is not a comment, for a listing.
pub(super) fn first_line(statement: &str) -> &str {
    statement.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("--")).unwrap_or_default()
}

fn push(statements: &mut Vec<String>, piece: &str) {
    if has_code(piece) {
        statements.push(piece.trim().to_owned());
    }
}

/// Whether `piece` holds anything but whitespace and comments.
fn has_code(piece: &str) -> bool {
    let mut rest = piece.trim_start();
    loop {
        if rest.starts_with("--") {
            rest = rest.find('\n').map_or("", |n| &rest[n + 1..]).trim_start();
        } else if rest.starts_with("/*") {
            rest = rest[2..].find("*/").map_or("", |n| &rest[n + 4..]).trim_start();
        } else {
            return !rest.is_empty();
        }
    }
}

/// Bytes from `text`'s opening quote past its closing one; a doubled quote
/// inside is the quote character itself, so it toggles twice and stays in.
fn closing_quote(text: &str, quote: char) -> usize {
    text[1..].find(quote).map_or(text.len(), |n| n + 2)
}

/// Bytes from a `$tag$` at the start of `text` past its matching close, if
/// `text` opens a dollar-quoted body (`$1`, a parameter, does not).
fn dollar_body(text: &str) -> Option<usize> {
    let tag_len = text[1..].find('$')? + 2;
    let tag = &text[..tag_len];
    let inner = &tag[1..tag_len - 1];
    let is_tag = inner.chars().next().is_none_or(|c| c.is_alphabetic() || c == '_')
        && inner.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !is_tag {
        return None;
    }
    let close = text[tag_len..].find(tag).map_or(text.len() - tag_len, |n| n + tag_len);
    Some(tag_len + close)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_semicolons_that_are_sql_only() {
        let sql = "-- a; header\nCREATE TABLE t (a TEXT DEFAULT ';', \"b;\" INT);\n\
                   /* c; */ CREATE FUNCTION f() RETURNS INT LANGUAGE plpgsql AS $$\nBEGIN\n  RETURN 1;\nEND\n$$;\n\
                   CREATE FUNCTION g() RETURNS TEXT AS $body$ SELECT 'x;'; $body$ LANGUAGE sql;\n\
                   INSERT INTO t (a) VALUES ('it''s; fine');\n-- only a comment; at the end\n";
        let got = split(sql);
        assert_eq!(got.len(), 4, "{got:#?}");
        assert!(got[0].starts_with("-- a; header\nCREATE TABLE t"), "{}", got[0]);
        assert!(got[1].contains("RETURN 1;\nEND\n$$"), "{}", got[1]);
        assert!(got[2].ends_with("$body$ LANGUAGE sql"), "{}", got[2]);
        assert_eq!(got[3], "INSERT INTO t (a) VALUES ('it''s; fine')");
        assert_eq!(first_line(&got[0]), "CREATE TABLE t (a TEXT DEFAULT ';', \"b;\" INT)");
    }

    #[test]
    fn a_parameter_is_not_a_dollar_quote_and_a_last_statement_needs_no_semicolon() {
        let got = split("SELECT $1; SELECT 2");
        assert_eq!(got, vec!["SELECT $1".to_owned(), "SELECT 2".to_owned()]);
        assert!(split("-- nothing\n/* at all */\n").is_empty());
    }
}
