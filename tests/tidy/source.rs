//! Reading the source tree: which files there are, which are test code, and
//! each file's text with comments, literals and `#[cfg(test)]` items blanked
//! out (newlines kept, so positions still map to the original lines).

use std::path::{Path, PathBuf};

/// The workspace root (this crate lives in `tests/`).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `path` relative to the workspace root, with `/` separators.
pub(crate) fn relative(path: &Path) -> String {
    let root = root();
    let rel = path.strip_prefix(&root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Every `.rs` file under the workspace-relative `dirs`, sorted; build output
/// and hidden directories are skipped.
pub(crate) fn rust_files(dirs: &[&str]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for dir in dirs {
        let dir = root().join(dir);
        if !dir.is_dir() {
            return Err(format!("{} is not a directory: the tidy rules name a path that moved", relative(&dir)));
        }
        walk(&dir, &mut files)?;
    }
    files.sort();
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", relative(dir)))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", relative(dir)))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().map_err(|e| format!("cannot stat {}: {e}", relative(&path)))?;
        if kind.is_dir() {
            if name != "target" && !name.starts_with('.') {
                walk(&path, files)?;
            }
        } else if name.ends_with(".rs") {
            files.push(path);
        }
    }
    Ok(())
}

pub(crate) fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", relative(path)))
}

/// Test code by its name: `tests.rs`, `*_tests.rs`, or anything in a `tests/` directory.
pub(crate) fn is_test_file(path: &Path) -> bool {
    let rel = relative(path);
    let mut parts: Vec<&str> = rel.split('/').collect();
    let Some(name) = parts.pop() else { return false };
    name == "tests.rs" || name.ends_with("_tests.rs") || parts.contains(&"tests")
}

/// 1-based line of the character index `at` in `text`.
pub(crate) fn line_of(text: &[char], at: usize) -> usize {
    text[..at.min(text.len())].iter().filter(|c| **c == '\n').count() + 1
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Where `needle` occurs in `text` as a whole path: not preceded or followed by
/// an identifier character (so `tokio::spawn` does not match `tokio::spawn_blocking`).
pub(crate) fn find_path(text: &[char], needle: &str) -> Vec<usize> {
    let needle: Vec<char> = needle.chars().collect();
    let mut found = Vec::new();
    if needle.is_empty() || text.len() < needle.len() {
        return found;
    }
    for i in 0..=text.len() - needle.len() {
        if text[i..i + needle.len()] != needle[..] {
            continue;
        }
        let before = i.checked_sub(1).map(|j| text[j]);
        let after = text.get(i + needle.len()).copied();
        let starts_ident = needle.first().copied().is_some_and(is_ident);
        let ends_ident = needle.last().copied().is_some_and(is_ident);
        if (starts_ident && before.is_some_and(is_ident)) || (ends_ident && after.is_some_and(is_ident)) {
            continue;
        }
        found.push(i);
    }
    found
}

fn blank(out: &mut [char], from: usize, to: usize) {
    let to = to.min(out.len());
    for c in &mut out[from.min(to)..to] {
        if *c != '\n' {
            *c = ' ';
        }
    }
}

/// `src` with the contents of comments, string and character literals blanked.
pub(crate) fn mask(src: &str) -> Vec<char> {
    let c: Vec<char> = src.chars().collect();
    let mut out = c.clone();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if at(i + 1) == '/' => {
                let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
                blank(&mut out, i, end);
                i = end;
            }
            '/' if at(i + 1) == '*' => {
                let (mut depth, mut j) = (1, i + 2);
                while j < c.len() && depth > 0 {
                    if c[j] == '/' && at(j + 1) == '*' {
                        depth += 1;
                        j += 2;
                    } else if c[j] == '*' && at(j + 1) == '/' {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            'r' if raw_string_at(&c, i) => {
                let hashes = (i + 1..c.len()).take_while(|&j| c[j] == '#').count();
                let open = i + 1 + hashes;
                let mut j = open + 1;
                let end = loop {
                    if j >= c.len() {
                        break c.len();
                    }
                    if c[j] == '"' && (1..=hashes).all(|h| at(j + h) == '#') {
                        break j;
                    }
                    j += 1;
                };
                blank(&mut out, open + 1, end);
                i = end + 1 + hashes;
            }
            '"' => {
                let mut j = i + 1;
                while j < c.len() && c[j] != '"' {
                    j += if c[j] == '\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            '\'' if at(i + 1) == '\\' => {
                let end = (i + 3..c.len()).find(|&j| c[j] == '\'').unwrap_or(c.len());
                blank(&mut out, i + 1, end);
                i = end + 1;
            }
            '\'' if at(i + 2) == '\'' => {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            }
            _ => i += 1,
        }
    }
    out
}

/// `r"…"`, `r#"…"#`, `br"…"`: an `r` that starts a raw string, not a raw identifier.
fn raw_string_at(c: &[char], i: usize) -> bool {
    let prev = |k: usize| i.checked_sub(k).map(|j| c[j]);
    let starts = match prev(1) {
        None => true,
        Some('b') => !prev(2).is_some_and(is_ident),
        Some(p) => !is_ident(p),
    };
    let after_hashes = c[i + 1..].iter().find(|ch| **ch != '#');
    starts && after_hashes == Some(&'"')
}

/// Masked text with every item under `#[cfg(test)]` blanked too; `None` when
/// the whole file is test code (`#![cfg(test)]`).
pub(crate) fn non_test_code(src: &str) -> Option<Vec<char>> {
    let mut text = mask(src);
    if !find_path(&text, "#![cfg(test)]").is_empty() {
        return None;
    }
    let attr: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + attr.len() <= text.len() {
        if text[i..i + attr.len()] != attr[..] {
            i += 1;
            continue;
        }
        let end = item_end(&text, i + attr.len());
        blank(&mut text, i, end);
        i = end;
    }
    Some(text)
}

/// The end of the item that starts at or after `from` (further attributes
/// included): its closing brace, or its `;` if that comes before any `{`.
fn item_end(text: &[char], from: usize) -> usize {
    let mut j = from;
    while j < text.len() {
        match text[j] {
            '#' if text.get(j + 1) == Some(&'[') => j = matching(text, j + 1, '[', ']'),
            ';' => return j + 1,
            '{' => return matching(text, j, '{', '}'),
            _ => j += 1,
        }
    }
    text.len()
}

/// Just past the bracket closing the one at `open`.
fn matching(text: &[char], open: usize, left: char, right: char) -> usize {
    let mut depth = 0usize;
    for (j, c) in text.iter().enumerate().skip(open) {
        if *c == left {
            depth += 1;
        } else if *c == right {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return j + 1;
            }
        }
    }
    text.len()
}
