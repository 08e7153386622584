//! Blocks that are not commands, checked by what reads them for real: a `dirthara.toml` by
//! the library's configuration parser, a Cargo dependency by the crate's own manifest, a
//! MongoDB migration by the loader's command parser, Rust by the compiler (as a doctest).

use std::path::Path;

use super::scenario::repo_root;

/// A `dirthara.toml` (or part of one) is read and validated as the CLI reads the file; a
/// Cargo `[dependencies]` fragment must name the library with features it has.
pub(crate) fn toml(at: &str, text: &str) {
    if text.lines().any(|l| l.trim() == "[dependencies]") {
        return cargo_dependencies(at, text);
    }
    // As the CLI reads the file: with a URL from `-d` or the environment, for a fragment
    // that names none.
    let mut config = dirthara::Config::with_url("sqlite:app.db");
    config
        .merge_toml(text, "dirthara.toml", Path::new("."))
        .and_then(|()| config.validate())
        .unwrap_or_else(|e| panic!("{at}: dirthara does not accept this dirthara.toml: {e}"));
}

fn cargo_dependencies(at: &str, text: &str) {
    let fragment: toml::Table = text.parse().unwrap_or_else(|e| panic!("{at}: {e}"));
    let manifest: toml::Table =
        std::fs::read_to_string(repo_root().join("crates/dirthara/Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
    let features = manifest["features"].as_table().unwrap();
    let dependency = fragment["dependencies"]["dirthara"].as_table().unwrap();
    let path = dependency["path"].as_str().unwrap();
    assert!(
        path.ends_with("crates/dirthara"),
        "{at}: the library is crates/dirthara, not {path}"
    );
    for feature in dependency["features"].as_array().unwrap() {
        let feature = feature.as_str().unwrap();
        assert!(
            features.contains_key(feature),
            "{at}: the library has no feature `{feature}`"
        );
    }
}

/// A JSON block with no command before it is a MongoDB migration, as the loader reads one.
pub(crate) fn json_migration(at: &str, text: &str) {
    if let Err(e) = dirthara_source::commands::parse_commands(text) {
        panic!("{at}: not a MongoDB migration dirthara loads: {e}");
    }
}

/// A page with Rust examples is compiled as the library's doctests.
pub(crate) fn rust_is_doctested(at: &str, page: &str) {
    let lib = std::fs::read_to_string(repo_root().join("crates/dirthara/src/lib.rs")).unwrap();
    assert!(
        lib.contains(&format!("include_str!(\"../../../{page}\")")),
        "{at}: a Rust example on a page that crates/dirthara/src/lib.rs does not include as a doctest"
    );
}
