//! The book under `docs/` builds with mdBook, and no link in it or in `README.md` is broken:
//! every relative link reaches a file, and every `#anchor` an id on the page it names. The book is
//! checked as mdBook writes it (every page, the print page and the table of contents), so a link
//! is judged the way a reader's browser follows it. Links with a scheme (`https:`, `mailto:`,
//! `man:`) are not followed. The second test shows the check failing on a book with broken links.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

#[test]
fn the_book_builds_and_no_link_in_it_or_the_readme_is_broken() {
    let root = wazoo_tests::root();
    let out = tempfile::tempdir().unwrap();
    build(&root.join("docs"), out.path());
    let pages = Pages::read(out.path());
    assert!(pages.ids.len() > 20, "the book has only {} pages", pages.ids.len());
    let mut broken = pages.broken_links();
    broken.extend(readme_broken_links(&root, &pages));
    assert!(broken.is_empty(), "{} broken links:\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn a_broken_link_or_anchor_is_found() {
    let book = tempfile::tempdir().unwrap();
    let src = book.path().join("src");
    std::fs::create_dir_all(src.join("part")).unwrap();
    std::fs::write(book.path().join("book.toml"), "[book]\ntitle = \"t\"\n[build]\ncreate-missing = false\n")
        .unwrap();
    std::fs::write(src.join("SUMMARY.md"), "# Summary\n\n- [One](one.md)\n- [Two](part/two.md)\n").unwrap();
    std::fs::write(
        src.join("one.md"),
        "# One\n\n[fine](part/two.md#a-section) [no page](part/three.md) [no anchor](part/two.md#nowhere) \
         [not here](#gone) [external](https://example.com/x.md) `[in code](nothing.md)`\n",
    )
    .unwrap();
    std::fs::write(src.join("part/two.md"), "# Two\n\n## A section\n\n[back](../one.md#one)\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    build(book.path(), out.path());
    let broken = Pages::read(out.path()).broken_links();
    let from_one: Vec<&str> =
        broken.iter().map(String::as_str).filter(|b| b.starts_with("one.html: ")).collect();
    assert_eq!(from_one, ["one.html: #gone", "one.html: part/three.html", "one.html: part/two.html#nowhere"]);
    // mdBook writes the first chapter again as index.html, and every chapter into print.html,
    // where a link to another chapter's anchor becomes an anchor of the print page: each broken
    // link is found there too.
    assert_eq!(broken.len(), 9, "{broken:#?}");

    // The README's links: a file that is missing, an anchor that is not a heading.
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(
        repo.path().join("README.md"),
        "# R\n\n## Two words\n\n[ok](#two-words) [bad](#three-words) [file](missing.md) \
         [ok](README.md#r)\n\n```sh\n[not a link](nothing.md)\n```\n",
    )
    .unwrap();
    let broken = readme_broken_links(repo.path(), &Pages::read(out.path()));
    assert_eq!(broken.len(), 2, "{broken:#?}");
}

/// The mdBook to run: `MDBOOK`, else `mdbook` on PATH, else cargo's bin directory.
fn mdbook() -> PathBuf {
    if let Some(path) = std::env::var_os("MDBOOK") {
        return path.into();
    }
    let on_path = Command::new("mdbook").arg("--version").output().is_ok_and(|o| o.status.success());
    if on_path {
        return "mdbook".into();
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    match cargo_home.map(|home| home.join("bin/mdbook")) {
        Some(path) if path.exists() => path,
        _ => panic!("mdbook not found: `bash .ci/setup` installs it (cargo install mdbook)"),
    }
}

/// Builds the book at `book` into `out`, failing on any warning or error mdBook reports.
fn build(book: &Path, out: &Path) {
    let output = Command::new(mdbook())
        .arg("build")
        .arg(book)
        .arg("--dest-dir")
        .arg(out)
        .output()
        .expect("running mdbook");
    let log =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "mdbook build failed:\n{log}");
    let complaints: Vec<&str> =
        log.lines().filter(|line| line.contains("WARN") || line.contains("ERROR")).collect();
    assert!(complaints.is_empty(), "mdbook build complained:\n{}", complaints.join("\n"));
}

/// The built book: each HTML page's ids and links, by path relative to the output directory.
struct Pages {
    out: PathBuf,
    ids: HashMap<PathBuf, HashSet<String>>,
    links: Vec<(PathBuf, String)>,
}

impl Pages {
    fn read(out: &Path) -> Pages {
        let mut pages = Pages { out: out.to_path_buf(), ids: HashMap::new(), links: Vec::new() };
        let mut dirs = vec![out.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let page = path.strip_prefix(out).unwrap().to_path_buf();
                // 404.html is served from any depth and names its assets from the site's root.
                if path.extension().is_none_or(|e| e != "html") || page == Path::new("404.html") {
                    continue;
                }
                let html = std::fs::read_to_string(&path).unwrap();
                pages.ids.insert(page.clone(), attributes(&html, "id").into_iter().collect());
                for link in attributes(&html, "href").into_iter().chain(attributes(&html, "src")) {
                    pages.links.push((page.clone(), link));
                }
            }
        }
        pages.links.sort();
        pages
    }

    /// Every link that does not resolve, as `PAGE: LINK`.
    fn broken_links(&self) -> Vec<String> {
        let mut broken = Vec::new();
        for (page, link) in &self.links {
            if has_scheme(link) {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((link, ""));
            let path = path.split('?').next().unwrap();
            let target = if path.is_empty() {
                page.clone()
            } else {
                match normalize(&page.parent().unwrap().join(percent_decode(path))) {
                    Some(target) => target,
                    None => {
                        broken.push(format!("{}: {link}", page.display()));
                        continue;
                    }
                }
            };
            if !self.resolves(&target, &percent_decode(anchor)) {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
        broken
    }

    /// Whether `target` (relative to the output directory) exists and holds `anchor` as an id.
    fn resolves(&self, target: &Path, anchor: &str) -> bool {
        let target =
            if self.out.join(target).is_dir() { target.join("index.html") } else { target.to_path_buf() };
        if !self.out.join(&target).is_file() {
            return false;
        }
        anchor.is_empty() || self.ids.get(&target).is_some_and(|ids| ids.contains(anchor))
    }
}

/// The broken links of `README.md` at `root`, as `README.md: LINK`: a relative link must reach a
/// file of the repository; an anchor into the book an id on the built page (`docs/src/X.md` is
/// `X.html`), an anchor into another Markdown file one of its headings, as GitHub names them.
fn readme_broken_links(root: &Path, book: &Pages) -> Vec<String> {
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut broken = Vec::new();
    for link in markdown_links(&readme) {
        if has_scheme(&link) {
            continue;
        }
        let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
        let ok = if path.is_empty() {
            heading_slugs(&readme).contains(anchor)
        } else {
            let file = root.join(percent_decode(path));
            let in_book = Path::new(path).strip_prefix("docs/src").ok().map(|page| {
                let page = if page.file_name().is_some_and(|n| n == "README.md") {
                    page.with_file_name("index.html")
                } else {
                    page.with_extension("html")
                };
                book.resolves(&page, anchor)
            });
            match (file.exists(), anchor, in_book) {
                (false, _, _) => false,
                (true, "", _) => true,
                (true, anchor, Some(resolves)) => resolves && !anchor.is_empty(),
                (true, anchor, None) => {
                    std::fs::read_to_string(&file).is_ok_and(|text| heading_slugs(&text).contains(anchor))
                }
            }
        };
        if !ok {
            broken.push(format!("README.md: {link}"));
        }
    }
    broken
}

/// The values of every `NAME="…"` attribute in `html` (`&amp;` decoded).
fn attributes(html: &str, name: &str) -> Vec<String> {
    let needle = format!(" {name}=\"");
    let mut values = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&needle) {
        rest = &rest[start + needle.len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        values.push(rest[..end].replace("&amp;", "&"));
        rest = &rest[end..];
    }
    values
}

/// The targets of the inline links and link definitions of a Markdown text, outside fenced code
/// blocks and code spans.
fn markdown_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
            continue;
        }
        // A link definition: `[label]: target`.
        if let Some(rest) = trimmed.strip_prefix('[').and_then(|r| r.split_once("]:")) {
            if let Some(target) = rest.1.split_whitespace().next() {
                links.push(target.trim_matches(['<', '>']).to_string());
            }
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            links.push(target.trim_matches(['<', '>']).to_string());
            rest = &rest[end..];
        }
    }
    links
}

/// `line` with every code span (text between matching runs of backticks) taken out.
fn without_code_spans(line: &str) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        kept.push_str(&rest[..start]);
        let run = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let after = &rest[start + run..];
        match after.find(&"`".repeat(run)) {
            Some(end) => rest = &after[end + run..],
            None => {
                kept.push_str(&rest[start..]);
                return kept;
            }
        }
    }
    kept.push_str(rest);
    kept
}

/// The anchors GitHub gives a Markdown text's headings: lower case, punctuation dropped, spaces
/// as `-`, a repeated one numbered `-1`, `-2`, ….
fn heading_slugs(text: &str) -> HashSet<String> {
    let mut slugs = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else { continue };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let slug: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        slugs.insert(if *count == 0 { slug.clone() } else { format!("{slug}-{count}") });
        *count += 1;
    }
    slugs
}

/// Whether a link names a scheme (`https:`, `mailto:`, `man:`): not a file of the book.
fn has_scheme(link: &str) -> bool {
    link.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// `path` with `.` and `..` applied; `None` if it climbs out of the top.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<Component> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| {
                std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .flatten();
        match hex {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}
