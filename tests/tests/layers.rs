//! The layer rules ARCHITECTURE.md states, checked against the code: no crate depends on one
//! above it or on a sibling, zookeeper-client stays inside the runtime, and no crate's modules
//! form a circle.
//!
//! A module circle is found level by level. At every module, each of its child modules counts
//! with its whole subtree as one node, and an edge A → B means code in A's subtree names a path
//! into B's subtree: through `crate::`, `super::`, `self::`, a `use` of a child module, or a
//! name a facade re-exports (`pub use`). A parent naming its own children is how a facade is
//! built, and a child using its parent's items is what a parent is for: neither is an edge.
//! `#[cfg(test)]` modules are left out: a unit test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

/// A module's path from its crate root, e.g. `["handle", "cache"]`.
type ModPath = Vec<String>;

struct Module {
    file: PathBuf,
    /// Its source with comments, strings and `#[cfg(test)]` modules blanked out.
    text: String,
    /// Where the module's own text starts and ends in `text` (an inline module is part of its
    /// file's text).
    span: (usize, usize),
    children: BTreeSet<String>,
    /// Every name a `use` brings into this module, to the path it names.
    imports: BTreeMap<String, ModPath>,
}

struct Crate {
    name: String,
    modules: BTreeMap<ModPath, Module>,
}

/// Blanks comments, string and character literals (keeping newlines, so offsets keep their
/// lines).
fn clean(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank =
        |out: &mut Vec<u8>, s: &[u8]| out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }));
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j]);
            i += j;
        } else if (rest[0] == b'r' || rest.starts_with(b"br"))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && {
                let s = if rest[0] == b'b' { 2 } else { 1 };
                let hashes = rest[s..].iter().take_while(|&&c| c == b'#').count();
                rest.get(s + hashes) == Some(&b'"')
            }
        {
            let s = if rest[0] == b'b' { 2 } else { 1 };
            let hashes = rest[s..].iter().take_while(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let start = s + hashes + 1;
            let end = rest[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map(|p| start + p + close.len())
                .unwrap_or(rest.len());
            out.push(b'"');
            blank(&mut out, &rest[1..end]);
            i += end;
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            out.push(b'"');
            blank(&mut out, &rest[1..end]);
            i += end;
        } else if rest[0] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), left as it is.
            if rest.get(1) == Some(&b'\\') {
                let end = rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3).unwrap_or(rest.len());
                blank(&mut out, &rest[..end]);
                i += end;
            } else {
                let ch = std::str::from_utf8(&rest[1..])
                    .ok()
                    .or_else(|| std::str::from_utf8(&rest[1..rest.len().min(5)]).ok());
                let len = ch.and_then(|s| s.chars().next()).map(|c| c.len_utf8()).unwrap_or(1);
                if rest.get(1 + len) == Some(&b'\'') {
                    blank(&mut out, &rest[..len + 2]);
                    i += len + 2;
                } else {
                    out.push(b'\'');
                    i += 1;
                }
            }
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The offset just past the `}` matching the `{` at `open`.
fn matching(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in text[open..].bytes().enumerate() {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// `mod NAME;` and `mod NAME { … }` items directly in `text[span]` (not inside an inline module):
/// (name, Some(body span) for inline ones, whether it is `#[cfg(test)]`).
fn mod_items(text: &str, span: (usize, usize)) -> Vec<(String, Option<(usize, usize)>, bool)> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = span.0;
    while i < span.1 {
        if text[i..].starts_with("mod ") && (i == 0 || !is_ident(b[i - 1])) {
            let name_start = i + 4;
            let name_end = name_start + text[name_start..].bytes().take_while(|&c| is_ident(c)).count();
            let name = text[name_start..name_end].to_string();
            let after = name_start + text[name_start..].find(|c: char| c == ';' || c == '{').unwrap_or(0);
            let before = &text[span.0.max(i.saturating_sub(200))..i];
            let is_test = before.rfind("#[cfg(test)]").is_some_and(|p| {
                let between = &before[p + "#[cfg(test)]".len()..];
                !between.contains(';') && !between.contains('}') && !between.contains('{')
            });
            if b.get(after) == Some(&b'{') {
                let end = matching(text, after);
                found.push((name, Some((after + 1, end - 1)), is_test));
                i = end;
                continue;
            }
            found.push((name, None, is_test));
            i = after + 1;
            continue;
        }
        if b[i] == b'{' && text[span.0..i].trim_end().ends_with("macro_rules!") {
            i = matching(text, i);
            continue;
        }
        i += 1;
    }
    found
}

/// The paths of a use tree, e.g. `a::{b, c::{d as e, self}}`: (the name it binds, the path).
fn use_paths(tree: &str) -> Vec<(String, Vec<String>)> {
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<(String, Vec<String>)>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let close = tree.rfind('}').unwrap_or(tree.len());
            let mut path = prefix.to_vec();
            path.extend(tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
            let inner = &tree[open + 1..close];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&path, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            walk(&path, &inner[start..], out);
            return;
        }
        if tree.is_empty() {
            return;
        }
        let (tree, alias) = match tree.split_once(" as ") {
            Some((t, a)) => (t.trim(), Some(a.trim().to_string())),
            None => (tree, None),
        };
        let mut path = prefix.to_vec();
        path.extend(tree.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        if path.last().map(String::as_str) == Some("self") {
            path.pop();
        }
        let name = alias.or_else(|| path.last().cloned()).unwrap_or_default();
        if name != "*" && name != "_" {
            out.push((name, path));
        }
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out
}

/// `use …;` statements directly in `text[span]`, with their offsets.
fn uses(text: &str, span: (usize, usize), skip: &[(usize, usize)]) -> Vec<(usize, String)> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = span.0;
    while let Some(p) = text[i..span.1].find("use ") {
        let at = i + p;
        i = at + 4;
        if (at > 0 && is_ident(b[at - 1])) || skip.iter().any(|&(s, e)| at >= s && at < e) {
            continue;
        }
        let end = at + text[at..span.1].find(';').unwrap_or(span.1 - at);
        found.push((at, text[at + 4..end].to_string()));
        i = end;
    }
    found
}

fn load(name: &str, root_file: &Path) -> Crate {
    let mut krate = Crate { name: name.to_string(), modules: BTreeMap::new() };
    let mut todo: Vec<(ModPath, PathBuf, Option<(String, (usize, usize))>)> =
        vec![(vec![], root_file.to_path_buf(), None)];
    while let Some((path, file, inline)) = todo.pop() {
        let (text, span) = match inline {
            Some((text, span)) => (text, span),
            None => {
                let text = clean(
                    &std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())),
                );
                let len = text.len();
                (text, (0, len))
            }
        };
        let dir = if path.is_empty() || file.file_name().is_some_and(|f| f == "mod.rs") {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        let mut children = BTreeSet::new();
        for (child, body, is_test) in mod_items(&text, span) {
            if is_test {
                continue;
            }
            children.insert(child.clone());
            let mut child_path = path.clone();
            child_path.push(child.clone());
            match body {
                Some(body) => todo.push((child_path, file.clone(), Some((text.clone(), body)))),
                None => {
                    let direct = dir.join(format!("{child}.rs"));
                    let file = if direct.exists() { direct } else { dir.join(&child).join("mod.rs") };
                    if file.exists() {
                        todo.push((child_path, file, None));
                    }
                }
            }
        }
        krate.modules.insert(path, Module { file, text, span, children, imports: BTreeMap::new() });
    }
    // What each `use` binds, resolved to an absolute path where it starts inside the crate.
    let paths: Vec<ModPath> = krate.modules.keys().cloned().collect();
    for path in paths {
        let module = &krate.modules[&path];
        let skip = inline_spans(module);
        let mut imports = BTreeMap::new();
        for (_, tree) in uses(&module.text, module.span, &skip) {
            for (bound, used) in use_paths(&tree) {
                if let Some(abs) = absolute(&krate, &path, &used) {
                    imports.insert(bound, abs);
                }
            }
        }
        krate.modules.get_mut(&path).unwrap().imports = imports;
    }
    krate
}

/// The spans of the inline modules directly inside a module (their text is their own).
fn inline_spans(module: &Module) -> Vec<(usize, usize)> {
    mod_items(&module.text, module.span).into_iter().filter_map(|(_, body, _)| body).collect()
}

/// A path as named from module `from`, made absolute if it starts inside the crate.
fn absolute(krate: &Crate, from: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut segs = path.iter().map(String::as_str).peekable();
    let mut base: ModPath = match *segs.peek()? {
        "crate" | "$crate" => {
            segs.next();
            vec![]
        }
        "self" => {
            segs.next();
            from.clone()
        }
        "super" => {
            let mut base = from.clone();
            while segs.peek() == Some(&"super") {
                segs.next();
                base.pop();
            }
            base
        }
        first if krate.modules.get(from).is_some_and(|m| m.children.contains(first)) => from.clone(),
        _ => return None,
    };
    base.extend(segs.map(String::from));
    Some(base)
}

/// The module an absolute path lands in: down through child modules, and through a module's
/// imports (a facade's re-exports) to where a name really lives.
fn target(krate: &Crate, path: &[String], depth: usize) -> ModPath {
    let mut at: ModPath = vec![];
    for (i, seg) in path.iter().enumerate() {
        let module = &krate.modules[&at];
        if module.children.contains(seg) {
            at.push(seg.clone());
            continue;
        }
        if let Some(to) = module.imports.get(seg) {
            if depth < 16 && to.as_slice() != &path[..=i] {
                let mut rest = to.clone();
                rest.extend(path[i + 1..].iter().cloned());
                return target(krate, &rest, depth + 1);
            }
        }
        break;
    }
    at
}

/// Every path into the crate a module names: (offset, path as written).
fn references(module: &Module, skip: &[(usize, usize)]) -> Vec<(usize, Vec<String>)> {
    let text = &module.text;
    let b = text.as_bytes();
    let mut found: Vec<(usize, Vec<String>)> = Vec::new();
    for (at, tree) in uses(text, module.span, skip) {
        for (_, path) in use_paths(&tree) {
            found.push((at, path));
        }
    }
    let mut i = module.span.0;
    while i < module.span.1 {
        if skip.iter().any(|&(s, e)| i >= s && i < e) {
            i += 1;
            continue;
        }
        let starts = ["crate::", "super::", "self::"].into_iter().find(|p| text[i..].starts_with(p));
        if let Some(start) = starts.filter(|_| i == 0 || !is_ident(b[i - 1]) || b[i - 1] == b'$') {
            let mut j = i;
            let mut segs = Vec::new();
            loop {
                let n = text[j..].bytes().take_while(|&c| is_ident(c)).count();
                if n == 0 {
                    break;
                }
                segs.push(text[j..j + n].to_string());
                j += n;
                if text[j..].starts_with("::") && text[j + 2..].bytes().next().is_some_and(is_ident) {
                    j += 2;
                } else {
                    break;
                }
            }
            let _ = start;
            found.push((i, segs));
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
    found
}

struct Edge {
    from: ModPath,
    to: ModPath,
    evidence: String,
}

/// Methods of a type defined in a module other than the type's own (`impl HostState { … }` in
/// `znode`, say): a call `.name(` or `Type::name(` anywhere depends on that module though it
/// names no path. Only names that no other such impl and no type's own impl defines count, so
/// a call resolves to one module.
fn spread_methods(krate: &Crate) -> BTreeMap<String, ModPath> {
    let own_module = |ty: &str| {
        krate.modules.iter().find_map(|(path, m)| {
            let text = &m.text[m.span.0..m.span.1];
            ["struct ", "enum "]
                .iter()
                .any(|k| {
                    text.match_indices(&format!("{k}{ty}")).any(|(at, found)| {
                        text[at + found.len()..].bytes().next().is_some_and(|c| !is_ident(c))
                    })
                })
                .then(|| path.clone())
        })
    };
    let mut found: BTreeMap<String, Vec<ModPath>> = BTreeMap::new();
    let mut own: BTreeSet<String> = BTreeSet::new();
    for (path, module) in &krate.modules {
        let text = &module.text;
        let mut i = module.span.0;
        while let Some(p) = text[i..module.span.1].find("impl") {
            let at = i + p;
            i = at + 4;
            if (at > 0 && is_ident(text.as_bytes()[at - 1]))
                || text[at + 4..].bytes().next().is_some_and(is_ident)
            {
                continue;
            }
            let Some(open) = text[at..module.span.1].find('{').map(|o| at + o) else { break };
            let head = &text[at + 4..open];
            if head.contains(" for ") || head.contains(';') {
                continue;
            }
            let ty: String = head
                .trim()
                .trim_start_matches(|c| c == '<')
                .rsplit(|c: char| c.is_whitespace() || c == '>')
                .find(|w| !w.is_empty())
                .unwrap_or("")
                .rsplit("::")
                .next()
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let close = matching(text, open);
            let spread = !ty.is_empty() && own_module(&ty).is_some_and(|m| &m != path);
            let body = &text[open..close];
            for (f, _) in body.match_indices("fn ") {
                let name: String =
                    body[f + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if name.is_empty() {
                    continue;
                }
                if spread {
                    found.entry(name).or_default().push(path.clone());
                } else {
                    own.insert(name);
                }
            }
            i = close;
        }
    }
    found
        .into_iter()
        .filter(|(name, at)| at.len() == 1 && !own.contains(name))
        .map(|(name, mut at)| (name, at.remove(0)))
        .collect()
}

fn edges(krate: &Crate) -> Vec<Edge> {
    let mut out = Vec::new();
    let methods = spread_methods(krate);
    for (path, module) in &krate.modules {
        let text = &module.text[module.span.0..module.span.1];
        for (name, to) in &methods {
            if to.starts_with(path) || path.starts_with(to) {
                continue;
            }
            let call = [format!(".{name}("), format!("::{name}(")];
            if let Some(at) = call.iter().filter_map(|c| text.find(c.as_str())).min() {
                let at = module.span.0 + at;
                let line = module.text[..at].matches('\n').count() + 1;
                let rel = module.file.strip_prefix(root()).unwrap_or(&module.file).display().to_string();
                out.push(Edge {
                    from: path.clone(),
                    to: to.clone(),
                    evidence: format!("{rel}:{line} calls {name}"),
                });
            }
        }
    }
    for (path, module) in &krate.modules {
        let skip = inline_spans(module);
        for (at, named) in references(module, &skip) {
            let Some(abs) = absolute(krate, path, &named) else { continue };
            let to = target(krate, &abs, 0);
            // A parent naming its children, a child naming its parent: not edges.
            if to.starts_with(path) || path.starts_with(&to) {
                continue;
            }
            let line = module.text[..at].matches('\n').count() + 1;
            let rel = module.file.strip_prefix(root()).unwrap_or(&module.file).display().to_string();
            out.push(Edge {
                from: path.clone(),
                to,
                evidence: format!("{rel}:{line} names {}", named.join("::")),
            });
        }
    }
    out
}

fn show(path: &[String]) -> String {
    if path.is_empty() {
        "(crate root)".to_string()
    } else {
        path.join("/")
    }
}

/// Every circle among siblings, at every level, each with the references that make it.
fn circles(krate: &Crate) -> Vec<String> {
    // Per parent module: sibling → sibling → evidence.
    let mut levels: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for edge in edges(krate) {
        let common = edge.from.iter().zip(&edge.to).take_while(|(a, b)| a == b).count();
        let parent = edge.from[..common].to_vec();
        let (a, b) = (edge.from[common].clone(), edge.to[common].clone());
        levels.entry(parent).or_default().entry(a).or_default().entry(b).or_insert(edge.evidence);
    }
    let mut found = Vec::new();
    for (parent, graph) in &levels {
        // Strongly connected components (Tarjan), each of more than one sibling is a circle.
        struct Tarjan<'a> {
            graph: &'a BTreeMap<String, BTreeMap<String, String>>,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on: BTreeSet<&'a str>,
            next: usize,
            sccs: Vec<Vec<&'a str>>,
        }
        impl<'a> Tarjan<'a> {
            fn visit(&mut self, v: &'a str) {
                self.index.insert(v, self.next);
                self.low.insert(v, self.next);
                self.next += 1;
                self.stack.push(v);
                self.on.insert(v);
                let graph = self.graph;
                for w in graph.get(v).into_iter().flat_map(|m| m.keys()) {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut scc = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on.remove(w);
                        scc.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if scc.len() > 1 {
                        scc.sort();
                        self.sccs.push(scc);
                    }
                }
            }
        }
        let mut t = Tarjan {
            graph,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: vec![],
            on: BTreeSet::new(),
            next: 0,
            sccs: vec![],
        };
        for v in graph.keys() {
            if !t.index.contains_key(v.as_str()) {
                t.visit(v);
            }
        }
        for scc in t.sccs {
            let names: Vec<String> = scc
                .iter()
                .map(|s| {
                    let mut p = parent.clone();
                    p.push(s.to_string());
                    show(&p)
                })
                .collect();
            let mut text = format!("{}: circle among {}", krate.name, names.join(", "));
            for a in &scc {
                for (b, evidence) in graph.get(*a).into_iter().flatten() {
                    if scc.contains(&b.as_str()) {
                        text.push_str(&format!("\n    {a} → {b}: {evidence}"));
                    }
                }
            }
            found.push(text);
        }
    }
    found
}

/// Every crate root of the workspace: libraries, binaries (`main.rs`, `src/bin/*.rs`).
fn crate_roots() -> Vec<(String, PathBuf)> {
    let root = root();
    let mut dirs: Vec<PathBuf> = ["host", "recipes", "guest"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).into_iter().flatten().flatten().map(|e| e.path()))
        .collect();
    dirs.push(root.join("tests"));
    dirs.push(root.join("tests/guests/misbehave"));
    let mut roots = Vec::new();
    for dir in dirs {
        if !dir.join("Cargo.toml").exists() || dir.ends_with("patches") {
            continue;
        }
        let name = dir.strip_prefix(&root).unwrap().display().to_string();
        for file in ["src/lib.rs", "src/main.rs"] {
            if dir.join(file).exists() {
                roots.push((format!("{name} ({file})"), dir.join(file)));
            }
        }
        for bin in std::fs::read_dir(dir.join("src/bin")).into_iter().flatten().flatten() {
            if bin.path().extension().is_some_and(|e| e == "rs") {
                roots.push((format!("{name} ({})", bin.file_name().to_string_lossy()), bin.path()));
            }
        }
    }
    roots.sort();
    roots
}

#[test]
fn no_module_circle_in_any_crate() {
    let roots = crate_roots();
    assert!(roots.iter().any(|(n, _)| n.starts_with("host/runtime")), "found the crates: {roots:?}");
    let mut found = Vec::new();
    for (name, file) in roots {
        found.extend(circles(&load(&name, &file)));
    }
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}

/// The checker itself: a circle it must find, and a parent/child pair it must not count.
#[test]
fn the_check_finds_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\npub use a::Thing;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use super::b::Other;\npub struct Thing;\n").unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod c;\npub use c::Other;\n").unwrap();
    // Reached through the root's re-export of `a::Thing`, from a grandchild of the root.
    std::fs::write(
        src.join("b/c.rs"),
        "// crate::a in a comment is not a reference\npub struct Other(crate::Thing);\nuse super::*;\n",
    )
    .unwrap();
    let found = circles(&load("example", &src.join("lib.rs")));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("a → b") && found[0].contains("b → a"), "{}", found[0]);
    assert!(found[0].contains("src/b/c.rs:2 names crate::Thing"), "{}", found[0]);

    std::fs::write(src.join("a.rs"), "pub struct Thing;\n").unwrap();
    assert!(circles(&load("example", &src.join("lib.rs"))).is_empty());
    // A method of `Thing` defined in `b`, called from `a`, where `b` names `a`: a circle no
    // path shows.
    std::fs::write(src.join("a.rs"), "pub struct Thing;\nfn f(t: &Thing) { t.helper_only_b_has(); }\n")
        .unwrap();
    std::fs::write(
        src.join("b/c.rs"),
        "pub struct Other;\nimpl crate::Thing { pub fn helper_only_b_has(&self) {} }\n",
    )
    .unwrap();
    let found = circles(&load("example", &src.join("lib.rs")));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("src/a.rs:2 calls helper_only_b_has"), "{}", found[0]);
}

/// The crates' own arrows, as ARCHITECTURE.md's table states them: each crate's wazoo
/// dependencies, and who may name zookeeper-client (the runtime keeps its engine inside).
#[test]
fn crates_depend_only_downwards() {
    let allowed: &[(&str, &[&str])] = &[
        ("host/runtime", &["zookeeper-client"]),
        ("host/proto", &[]),
        ("host/client", &["wazoo-proto"]),
        ("host/daemon", &["wazoo-runtime", "wazoo-proto"]),
        ("host/testkit", &[]),
        ("host/cli", &["wazoo-runtime", "wazoo-proto", "wazoo-client", "wazoo-daemon", "wazoo-testkit"]),
    ];
    let mut wrong = Vec::new();
    for (krate, deps) in allowed {
        let manifest = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
        let mut section = String::new();
        for line in manifest.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line.to_string();
                continue;
            }
            // What the crate's code may use: its dependencies (dev and build ones aside).
            if section != "[dependencies]" {
                continue;
            }
            let name = line.split(['=', '.', ' ']).next().unwrap_or("");
            let watched = name.starts_with("wazoo-") || name == "zookeeper-client";
            if watched && !deps.contains(&name) {
                wrong.push(format!("{krate} depends on {name}"));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies ARCHITECTURE.md does not allow: {wrong:?}");
}
