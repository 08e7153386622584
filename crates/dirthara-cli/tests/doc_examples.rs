//! Every example in README.md and docs/*.md runs as written: each command of a `console`
//! block is run by bash in a scratch project with this build's `dirthara`, and what it prints
//! must be what the page shows (times, durations and ids aside); files the page shows are
//! written where it says; configuration, JSON and Rust blocks are read by what reads them for
//! real. How a page marks its examples: `doc_examples/page.rs`. Examples on a database server
//! run against a fresh database on the test server (`DIRTHARA_TEST_*_URL`), skipped without
//! one unless `DIRTHARA_REQUIRE_SERVERS=1`.

mod support;

#[path = "doc_examples/checks.rs"]
mod checks;
#[path = "doc_examples/compare.rs"]
mod compare;
#[path = "doc_examples/examples.rs"]
mod examples;
#[path = "doc_examples/markdown.rs"]
mod markdown;
#[path = "doc_examples/page.rs"]
mod page;
#[path = "doc_examples/scenario.rs"]
mod scenario;

use page::run_page;

#[test]
fn readme() {
    run_page("README.md");
}

#[test]
fn docs_readme() {
    run_page("docs/README.md");
}

#[test]
fn ddl_safety() {
    run_page("docs/ddl-safety.md");
}

#[test]
fn getting_started() {
    run_page("docs/getting-started.md");
}

#[test]
fn locking() {
    run_page("docs/locking.md");
}

#[test]
fn output() {
    run_page("docs/output.md");
}

#[test]
fn recipes() {
    run_page("docs/recipes.md");
}

#[test]
fn switching() {
    run_page("docs/switching.md");
}

#[test]
fn troubleshooting() {
    run_page("docs/troubleshooting.md");
}

/// No page is left out: every markdown file of docs/ has its test above.
#[test]
fn every_page_is_tested() {
    let source = include_str!("doc_examples.rs");
    let dir = scenario::repo_root().join("docs");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            let call = format!("run_page(\"docs/{name}\")");
            assert!(source.contains(&call), "docs/{name} has no test here");
        }
    }
}
