//! The rooms of this crate import downward only: no module imports its parent (or any
//! other ancestor, the crate root included), and the imports between modules form no
//! loop. Read from the sources, so a change that breaks the map fails here, naming the
//! import.
//!
//! An import is any `crate::…` or `super::…` path outside comments and test modules,
//! `use` lists included; it points at the deepest module its path names (an item is
//! counted as its module). Run with `--nocapture` and `CROSSDOCK_PRINT_LAYERS=1` to
//! print every module's imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every source file of the crate, by module path (`[]` is the crate root).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let mut m: Module = rel
                .iter()
                .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
                m.pop();
            }
            out.insert(m, path);
        }
    }
    out
}

/// The code of a file without comments and without its test module.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::…`/`super::…` path in `code`, with `{a, b::c}` lists expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < code.len() {
        let starts = ["crate::", "super::"]
            .iter()
            // Bytes, not str: `i` may fall inside a multi-byte character of a string.
            .find(|p| bytes[i..].starts_with(p.as_bytes()))
            .filter(|_| i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':');
        if starts.is_none() {
            i += 1;
            continue;
        }
        let end = path_end(code, i);
        expand(&code[i..end], &mut out);
        i = end;
    }
    out
}

/// Where the path starting at `i` ends (after a closing `}` of a list).
fn path_end(code: &str, i: usize) -> usize {
    let bytes = code.as_bytes();
    let mut j = i;
    let mut depth = 0;
    while j < code.len() {
        let c = bytes[j];
        match c {
            b'{' => depth += 1,
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ if depth > 0 => {}
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b':' => {}
            _ => return j,
        }
        j += 1;
    }
    j
}

/// `a::{b, c::d}` → `a::b`, `a::c::d`.
fn expand(path: &str, out: &mut Vec<Vec<String>>) {
    match path.find('{') {
        None => out.push(
            path.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        ),
        Some(open) => {
            let prefix = &path[..open];
            let inner = &path[open + 1..path.len() - 1];
            let (mut depth, mut start) = (0, 0);
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&format!("{prefix}{}", inner[start..k].trim()), out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            let last = inner[start..].trim();
            if !last.is_empty() {
                expand(&format!("{prefix}{last}"), out);
            }
        }
    }
}

/// The module a path used in module `from` points at.
fn resolve(from: &Module, path: &[String], known: &BTreeMap<Module, PathBuf>) -> Module {
    let mut at: Module = Vec::new();
    let mut rest = path;
    if path.first().map(String::as_str) == Some("crate") {
        rest = &path[1..];
    } else {
        at = from.clone();
        while rest.first().map(String::as_str) == Some("super") {
            at.pop();
            rest = &rest[1..];
        }
    }
    for seg in rest {
        let mut next = at.clone();
        next.push(seg.clone());
        if known.contains_key(&next) {
            at = next;
        } else {
            break;
        }
    }
    at
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn modules_import_downward_only() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let known = modules(&src);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut upward = Vec::new();
    for (m, path) in &known {
        // Test modules (`tests`, `*_tests`) test their parent from inside it.
        if m.last()
            .is_some_and(|n| n == "tests" || n.ends_with("_tests"))
        {
            continue;
        }
        for p in paths(&code(path)) {
            let target = resolve(m, &p, &known);
            if &target == m {
                continue;
            }
            if m.starts_with(&target) {
                upward.push(format!(
                    "{} imports its ancestor {} ({})",
                    name(m),
                    name(&target),
                    p.join("::")
                ));
            }
            edges.entry(m.clone()).or_default().insert(target);
        }
    }
    if std::env::var_os("CROSSDOCK_PRINT_LAYERS").is_some() {
        for (m, to) in &edges {
            let to: Vec<String> = to.iter().map(name).collect();
            println!("{} -> {}", name(m), to.join(", "));
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
    let loops = cycles(&edges);
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
    assert!(
        edges.len() > 30,
        "the check read the sources ({} modules import others)",
        edges.len()
    );
}

/// The loops of the import graph (strongly connected components of more than one
/// module), each as a list of modules.
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    // Reachability by depth-first search from every module: small graph, plain code.
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(m) = stack.pop() {
            for t in edges.get(&m).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let mut out = BTreeSet::new();
    for m in edges.keys() {
        let from_m = reach(m);
        if from_m.contains(m) {
            let mut group: Vec<String> = from_m
                .iter()
                .filter(|t| reach(t).contains(m))
                .map(name)
                .collect();
            group.sort();
            out.insert(group.join(" <-> "));
        }
    }
    out.into_iter().collect()
}

#[test]
fn paths_are_read_as_written() {
    let mut out = Vec::new();
    expand("super::{a, b::{c, d}, e}", &mut out);
    assert_eq!(
        out,
        vec![
            vec!["super", "a"],
            vec!["super", "b", "c"],
            vec!["super", "b", "d"],
            vec!["super", "e"],
        ]
    );
    let found = paths("use crate::x::Y;\nlet z = super::super::w::f(); // crate::not");
    assert_eq!(found.len(), 3, "{found:?}");
    let me = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/layers.rs");
    let code_only = code(&me);
    let phrase = ["this crate import", " downward only"].concat();
    assert!(!code_only.contains(&phrase), "comments are skipped");
}
