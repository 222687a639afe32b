//! The README's Layout section and the guide's doc tests, checked against
//! the tree: a layout that names a file that moved (as it once named
//! `src/compactor.rs` after it became a folder) or leaves out a module
//! fails here, and so does a guide page that `cargo test` would not run.
//!
//! Seen failing: with the README's compactor line put back as the old
//! `autoshard/src/compactor.rs`, the two layout tests fail with
//! `README Layout names paths that do not exist: ["autoshard/src/compactor.rs"]`
//! and `README Layout leaves out: ["autoshard/src/compactor"]`; before
//! CHANGELOG.md existed, with `... do not exist: ["CHANGELOG.md"]`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The first token of each entry line of the README's Layout block, brace
/// groups expanded (`src/{a,b}.rs` names `src/a.rs` and `src/b.rs`).
fn layout_paths(readme: &str) -> Vec<String> {
    let section = readme
        .split("\n## Layout\n")
        .nth(1)
        .expect("README.md has a `## Layout` section");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the Layout section holds a ```text block");
    block
        .lines()
        .filter(|line| !line.starts_with(char::is_whitespace) && !line.is_empty())
        .flat_map(|line| expand(line.split_whitespace().next().unwrap_or_default()))
        .collect()
}

fn expand(token: &str) -> Vec<String> {
    match (token.find('{'), token.find('}')) {
        (Some(open), Some(close)) if open < close => token[open + 1..close]
            .split(',')
            .map(|part| format!("{}{}{}", &token[..open], part, &token[close + 1..]))
            .collect(),
        _ => vec![token.to_string()],
    }
}

fn readme() -> String {
    fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md")
}

#[test]
fn every_path_the_layout_names_exists() {
    let paths = layout_paths(&readme());
    assert!(paths.len() > 10, "too few layout entries parsed: {paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !Path::new(ROOT).join(p.as_str()).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "README Layout names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_layout_names_every_top_level_module() {
    let named: BTreeSet<String> = layout_paths(&readme())
        .iter()
        .map(|p| p.trim_end_matches('/').to_string())
        .collect();
    let src = Path::new(ROOT).join("autoshard/src");
    let unnamed: Vec<String> = fs::read_dir(&src)
        .expect("autoshard/src")
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .map(|name| format!("autoshard/src/{name}"))
        .filter(|path| !named.contains(path))
        .collect();
    assert!(unnamed.is_empty(), "README Layout leaves out: {unnamed:?}");
}

#[test]
fn the_parser_sees_a_wrong_layout() {
    // The control: the old README's line for a module that became a folder.
    let old = "## Layout\n\n```text\nautoshard/src/compactor.rs   compaction on a thread\n```\n";
    let paths = layout_paths(&format!("x\n{old}"));
    assert_eq!(paths, ["autoshard/src/compactor.rs"]);
    assert!(!Path::new(ROOT).join(&paths[0]).exists());
    assert_eq!(expand("src/{a,b}.rs"), ["src/a.rs", "src/b.rs"]);
}

#[test]
fn every_guide_page_is_a_doc_test() {
    let lib = fs::read_to_string(Path::new(ROOT).join("autoshard/src/lib.rs")).expect("lib.rs");
    let guide = Path::new(ROOT).join("docs/guide");
    let mut pages = 0;
    for entry in fs::read_dir(&guide).expect("docs/guide") {
        let name = entry
            .expect("a directory entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".md") || name == "README.md" {
            continue;
        }
        pages += 1;
        let include = format!("include_str!(\"../../docs/guide/{name}\")");
        assert!(
            lib.contains(&include),
            "docs/guide/{name} is not included in lib.rs's guide module"
        );
    }
    assert!(pages >= 10, "only {pages} guide pages");
}
