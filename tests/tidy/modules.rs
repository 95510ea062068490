//! The import graph between the module files of one crate, read from the
//! code: a file names another through a `use` (groups expanded) or a path in
//! code that starts with `crate`, `super`, `self` or one of its child modules.
//! A module's children are part of it, so a child naming the module that
//! holds it (`super::Engine`) is no tie; the module naming its child is.
//! Test code is left out. Other crates never count: Cargo forbids circles
//! between them already.

use std::collections::{BTreeMap, BTreeSet};

/// A module file: its path from the crate root (`[]` for lib.rs/main.rs) and
/// its code with comments, literals and test items blanked.
pub(crate) struct ModuleFile {
    pub name: String,
    pub module: Vec<String>,
    pub code: Vec<char>,
}

/// The module path of a file, given its path under the crate's `src/`.
pub(crate) fn module_of(under_src: &str) -> Vec<String> {
    let mut parts: Vec<String> = under_src.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod")) || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier starting at `i`, if one does and nothing joins it to what
/// comes before (a letter, or `::`).
fn ident_at(code: &[char], i: usize) -> Option<String> {
    let joined = i > 0 && (is_ident(code[i - 1]) || (i > 1 && code[i - 1] == ':' && code[i - 2] == ':'));
    if joined || !code.get(i).is_some_and(|c| c.is_alphabetic() || *c == '_') {
        return None;
    }
    Some(code[i..].iter().take_while(|c| is_ident(**c)).collect())
}

/// Every path of a use tree (`a::{b, c::{d as e}, self}` → `a::b`, `a::c::d`, `a`).
fn expand(tree: &str) -> Vec<Vec<String>> {
    let segments = |s: &str| -> Vec<String> {
        s.split("::").map(str::trim).filter(|s| !s.is_empty() && *s != "*").map(str::to_owned).collect()
    };
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        // `a::b as c` names `a::b`.
        return vec![segments(tree.split_whitespace().next().unwrap_or_default())];
    };
    let prefix = segments(&tree[..open]);
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut out = Vec::new();
    for item in crate::split_group(inner) {
        for tail in expand(&item) {
            let mut path = prefix.clone();
            path.extend(tail.into_iter().filter(|s| s != "self"));
            out.push(path);
        }
    }
    out
}

/// The paths `code` names: use trees, and paths in code whose first segment
/// is `crate`, `super`, `self` or one of `children`.
fn paths(code: &[char], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let Some(word) = ident_at(code, i) else {
            i += 1;
            continue;
        };
        if word == "use" {
            let end = code[i..].iter().position(|c| *c == ';').map_or(code.len(), |p| i + p);
            out.extend(expand(&code[i + 3..end].iter().collect::<String>()));
            i = end;
            continue;
        }
        let mut j = i + word.len();
        if ["crate", "super", "self"].contains(&word.as_str()) || children.contains(&word) {
            let mut path = vec![word.clone()];
            while code.get(j) == Some(&':') && code.get(j + 1) == Some(&':') {
                let Some(next) = code.get(j + 2..).and_then(|rest| {
                    let s: String = rest.iter().take_while(|c| is_ident(**c)).collect();
                    (!s.is_empty()).then_some(s)
                }) else {
                    break;
                };
                j += 2 + next.len();
                path.push(next);
            }
            if path.len() > 1 {
                out.push(path);
            }
        }
        i = j;
    }
    out
}

/// The child modules a file declares (`mod x;`, `pub mod x;`).
fn children(code: &[char]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for i in 0..code.len() {
        if ident_at(code, i).as_deref() != Some("mod") {
            continue;
        }
        let rest: String = code[i + 3..].iter().take_while(|c| **c != ';' && **c != '{').collect();
        let name = rest.trim();
        if !name.is_empty() && name.chars().all(is_ident) && code.get(i + 3 + rest.len()) == Some(&';') {
            out.insert(name.to_owned());
        }
    }
    out
}

/// `path` as seen from `module`, made absolute; None when it leaves the crate.
fn absolute(module: &[String], children: &BTreeSet<String>, path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module.to_vec(),
        c if children.contains(c) => module.to_vec(),
        _ => return None,
    };
    let mut rest = if first == "crate" || first == "self" { &path[1..] } else { path };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// What a file re-exports (`pub use a::b::X;`): `X` → the absolute path of `X`.
fn reexports(f: &ModuleFile) -> BTreeMap<String, Vec<String>> {
    let kids = children(&f.code);
    let mut out = BTreeMap::new();
    for i in 0..f.code.len() {
        if ident_at(&f.code, i).as_deref() != Some("pub") {
            continue;
        }
        let rest: String = f.code[i + 3..].iter().take_while(|c| **c != ';').collect();
        let Some(tree) = rest.trim_start().strip_prefix("use ").or_else(|| {
            let after_vis = rest.trim_start().strip_prefix('(')?.split_once(')')?.1;
            after_vis.trim_start().strip_prefix("use ")
        }) else {
            continue;
        };
        for path in expand(tree) {
            if let (Some(name), Some(abs)) = (path.last(), absolute(&f.module, &kids, &path)) {
                out.insert(name.clone(), abs);
            }
        }
    }
    out
}

/// Who names whom: file index → the indexes of the files it names. A name a
/// module re-exports leads to the file that defines it.
pub(crate) fn edges(files: &[ModuleFile]) -> BTreeMap<usize, BTreeSet<usize>> {
    let by_module: BTreeMap<&[String], usize> = files.iter().enumerate().map(|(i, f)| (&f.module[..], i)).collect();
    let handed_on: Vec<BTreeMap<String, Vec<String>>> = files.iter().map(reexports).collect();
    // The module file that defines what `abs` names (the longest prefix that
    // is a module, through at most a few re-exports).
    let resolve = |mut abs: Vec<String>| {
        for _ in 0..8 {
            let n = (0..=abs.len()).rev().find(|n| by_module.contains_key(&abs[..*n]))?;
            let file = by_module[&abs[..n]];
            match abs.get(n).and_then(|name| handed_on[file].get(name)) {
                Some(origin) if origin[..] != abs[..n + 1] => {
                    abs = origin.iter().chain(&abs[n + 1..]).cloned().collect();
                }
                _ => return Some(file),
            }
        }
        None
    };
    let mut out: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (from, f) in files.iter().enumerate() {
        let kids = children(&f.code);
        for path in paths(&f.code, &kids) {
            let Some(abs) = absolute(&f.module, &kids, &path) else { continue };
            let target = resolve(abs);
            // A module's children are part of it: what they take from it
            // (or from any module that holds them) ties nothing together.
            let inside = |to: &usize| f.module.starts_with(&files[*to].module);
            if let Some(to) = target.filter(|to| !inside(to)) {
                out.entry(from).or_default().insert(to);
            }
        }
    }
    out
}

/// The circles: every strongly connected set of more than one file (Tarjan).
pub(crate) fn circles(n: usize, edges: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let targets: Vec<usize> = s.edges.get(&v).map(|t| t.iter().copied().collect()).unwrap_or_default();
        for w in targets {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort_unstable();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, code: &str) -> ModuleFile {
        ModuleFile { name: name.into(), module: module_of(name), code: crate::source::mask(code) }
    }

    #[test]
    fn module_paths_come_from_file_paths() {
        assert_eq!(module_of("lib.rs"), Vec::<String>::new());
        assert_eq!(module_of("mcp/mod.rs"), ["mcp"]);
        assert_eq!(module_of("mcp/http.rs"), ["mcp", "http"]);
    }

    #[test]
    fn use_trees_expand_to_every_path() {
        let got = expand("super::{context::{Caller, Ctx as C}, self, error}");
        assert_eq!(
            got,
            [
                vec!["super", "context", "Caller"],
                vec!["super", "context", "Ctx"],
                vec!["super"],
                vec!["super", "error"]
            ]
        );
    }

    #[test]
    fn a_circle_through_use_super_and_a_child_path_is_found() {
        let files = [
            file("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            file("a/mod.rs", "mod inner;\nfn f() { inner::go(); }\n"),
            file("a/inner.rs", "use crate::b::{self, B};\n"),
            file("b.rs", "pub struct B;\nfn g() -> crate::a::A { todo!() }\n"),
            // Naming the module that holds it ties a child to nothing.
            file("d/mod.rs", "mod e;\npub use e::E;\npub struct D;\n"),
            file("d/e.rs", "use super::D;\npub struct E;\n"),
            file("c.rs", "// crate::a::x in a comment\nfn h() { let s = \"crate::b::y\"; }\n"),
        ];
        let e = edges(&files);
        let names = |c: &[usize]| c.iter().map(|i| files[*i].name.clone()).collect::<Vec<_>>();
        let found: Vec<Vec<String>> = circles(files.len(), &e).iter().map(|c| names(c)).collect();
        assert_eq!(found, [vec!["a/mod.rs", "a/inner.rs", "b.rs"]]);
        assert!(!e.contains_key(&6), "comments and literals name nothing");
        assert_eq!(e.get(&4).map(|t| t.iter().copied().collect::<Vec<_>>()), Some(vec![5]), "d names d::e");
        assert!(!e.contains_key(&5), "d::e naming d is no tie");
    }
}
