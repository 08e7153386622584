//! `embed_migrations!`: reads a migration directory at compile time, validates it with the
//! same rules as `dirthara` at run time (`dirthara-source`), and expands to the migrations
//! as values. A bad file name, two migrations with one version, an unreadable or malformed
//! file is a compile error naming the file, never a panic at run time.
//!
//! Use it through `dirthara::embed_migrations!`.

use std::path::{Path, PathBuf};

use proc_macro::TokenStream;

use dirthara_source::files::Layout;
use dirthara_source::migration::StepFormat;

/// Embeds the migrations of a directory (relative to the crate's `Cargo.toml`; default
/// `migrations`) as a `Vec<dirthara::Migration>`.
#[proc_macro]
pub fn embed_migrations(input: TokenStream) -> TokenStream {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let code = match expand(&input.to_string(), &root) {
        Ok(code) => code,
        Err(message) => format!("::core::compile_error!({message:?})"),
    };
    code.parse().expect("the expansion is valid Rust")
}

/// The directory literal: `"dir"`, or nothing for `migrations`.
fn directory(input: &str) -> Result<String, String> {
    let input = input.trim();
    if input.is_empty() {
        return Ok("migrations".to_string());
    }
    input
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .filter(|dir| !dir.contains(['"', '\\']))
        .map(str::to_string)
        .ok_or_else(|| {
            format!("embed_migrations!: expected a directory as a plain string literal, e.g. embed_migrations!(\"migrations\"), got `{input}`")
        })
}

fn expand(input: &str, root: &Path) -> Result<String, String> {
    let dir = root.join(directory(input)?);
    // Every bad file at once, as at run time (the error lists one per line).
    let migrations = dirthara_source::files::load_directories(std::slice::from_ref(&dir))
        .map_err(|e| format!("embed_migrations!: {e}"))?;
    let mut code = String::from("{\n");
    // Rebuild when a migration file changes. (A file added to the directory is not seen
    // until something else triggers a rebuild: add `println!("cargo:rerun-if-changed=DIR")`
    // to a build script to catch that too.)
    for file in migration_files(&dir) {
        code.push_str(&format!(
            "const _: &[u8] = ::core::include_bytes!({:?});\n",
            file.display().to_string()
        ));
    }
    code.push_str("::std::vec![\n");
    for m in &migrations {
        let format = match m.format {
            StepFormat::Sql => "Sql",
            StepFormat::MongoCommands => "MongoCommands",
            // Files hold SQL or MongoDB commands, never Rust (nor a format added later).
            _ => unreachable!("files never hold Rust migrations"),
        };
        // The layout travels with each migration, so that advice about it speaks it.
        let layout = match m.layout.map(|l| l.layout) {
            Some(Layout::Diesel) => ".in_layout(::dirthara::Layout::Diesel)",
            Some(Layout::Dbmate) => ".in_layout(::dirthara::Layout::Dbmate)",
            Some(Layout::Goose) => ".in_layout(::dirthara::Layout::Goose)",
            Some(Layout::Flyway) => ".in_layout(::dirthara::Layout::Flyway)",
            _ => "",
        };
        // A step's `-- dirthara:table-lock-timeout`, checked by the runner's own parser at load.
        let down_timeout = m
            .down
            .as_ref()
            .and_then(|d| d.table_lock_timeout.as_deref());
        let timeouts = match (m.table_lock_timeout.as_deref(), down_timeout) {
            (None, None) => String::new(),
            (up, down) => format!(".with_table_lock_timeouts({up:?}, {down:?})"),
        };
        // A step's `-- dirthara:allow-blocking <reason>`.
        let down_allow = m.down.as_ref().and_then(|d| d.allow_blocking.as_deref());
        let allow = match (m.allow_blocking.as_deref(), down_allow) {
            (None, None) => String::new(),
            (up, down) => format!(".with_allow_blocking({up:?}, {down:?})"),
        };
        // goose's `ENVSUB ON` regions: substituted from the environment at run time.
        let down_envsub = m.down.as_ref().map(|d| &d.source.envsub[..]).unwrap_or(&[]);
        let envsub = match (&m.up_source.envsub[..], down_envsub) {
            ([], []) => String::new(),
            (up, down) => {
                let pairs = |r: &[std::ops::Range<usize>]| {
                    r.iter()
                        .map(|r| format!("({}, {})", r.start, r.end))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(".with_envsub(&[{}], &[{}])", pairs(up), pairs(down))
            }
        };
        let envsub = match (m.repeatable, &m.squashes) {
            (true, _) => format!("{envsub}.as_repeatable()"),
            (false, Some(squashes)) => format!("{envsub}.as_baseline(::std::vec!{squashes:?})"),
            (false, None) => envsub,
        };
        code.push_str(&format!(
            "::dirthara::Migration::embedded({}i64, {:?}, {:?}, {}, {}, {:?}, ::dirthara::StepFormat::{format}, {:?}){layout}{timeouts}{allow}{envsub},\n",
            m.version,
            m.name,
            m.up(),
            match &m.down {
                Some(down) => format!(
                    "::core::option::Option::Some(({:?}, {}))",
                    down.text, down.transactional
                ),
                None => "::core::option::Option::None".to_string(),
            },
            m.transactional,
            m.connection,
            relative(&m.origin, root),
        ));
    }
    code.push_str("]\n}");
    Ok(code)
}

fn migration_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "sql" || ext == "json")
        })
        .collect();
    files.sort();
    files
}

/// Origins are shown in messages; keep them relative to the crate, not the build machine.
fn relative(origin: &str, root: &Path) -> String {
    Path::new(origin)
        .strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| origin.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
    }

    #[test]
    fn a_good_directory_expands_to_every_migration_in_version_order() {
        let code = expand("\"fixtures/good\"", &fixtures()).unwrap();
        let first = code
            .find("Migration::embedded(1i64, \"create_users\"")
            .unwrap();
        let second = code.find("Migration::embedded(2i64, \"seed\"").unwrap();
        assert!(first < second, "{code}");
        assert!(code.contains("include_bytes!"), "{code}");
        assert!(
            code.contains("\"fixtures/good/1_create_users.up.sql\""),
            "origins are relative: {code}"
        );
    }

    #[test]
    fn each_migration_carries_its_layout_for_the_advice_about_it() {
        let code = expand("\"fixtures/diesel\"", &fixtures()).unwrap();
        assert!(
            code.contains("\"fixtures/diesel/2024-01-01-000001_create_users/up.sql\").in_layout(::dirthara::Layout::Diesel)"),
            "{code}"
        );
        // dirthara's own layout is what a migration without one is advised in.
        let code = expand("\"fixtures/good\"", &fixtures()).unwrap();
        assert!(!code.contains("in_layout"), "{code}");
    }

    #[test]
    fn bad_input_is_a_compile_error_naming_the_file() {
        let err = expand("\"fixtures/bad-name\"", &fixtures()).unwrap_err();
        assert!(err.contains("create-users.sql"), "{err}");
        assert!(err.contains("does not parse"), "{err}");
        let err = expand("\"fixtures/duplicate\"", &fixtures()).unwrap_err();
        assert!(err.contains("two migrations have version 1"), "{err}");
        let err = expand("\"fixtures/missing\"", &fixtures()).unwrap_err();
        assert!(err.contains("cannot read migration directory"), "{err}");
        let err = expand("\"fixtures/several-bad\"", &fixtures()).unwrap_err();
        for needle in [
            "4 problems",
            "2_empty.up.sql: empty up",
            "3_orphan.down.sql: a down step without its up step",
            "4_directive.sql: unknown directive",
            "x_bad.sql: the version `x` is not a number",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        let err = expand("migrations", &fixtures()).unwrap_err();
        assert!(err.contains("plain string literal"), "{err}");
    }

    #[test]
    fn a_nul_byte_is_a_compile_error_naming_the_file_and_offset() {
        // Written here, not kept as a fixture: a NUL byte makes a file binary to git.
        let root = std::env::temp_dir().join(format!("dirthara-macros-nul-{}", std::process::id()));
        std::fs::create_dir_all(root.join("nul")).unwrap();
        std::fs::write(root.join("nul/1_a.sql"), "SELECT 1;\n\0").unwrap();
        std::fs::write(root.join("nul/2_b.up.json"), "[\0]").unwrap();
        let err = expand("\"nul\"", &root).unwrap_err();
        std::fs::remove_dir_all(&root).unwrap();
        assert!(err.contains("2 problems"), "{err}");
        assert!(
            err.contains("1_a.sql: holds a NUL byte at byte offset 10 (line 2)"),
            "{err}"
        );
        assert!(
            err.contains("2_b.up.json: holds a NUL byte at byte offset 1"),
            "{err}"
        );
    }

    #[test]
    fn no_argument_means_the_migrations_directory() {
        assert_eq!(directory("").unwrap(), "migrations");
        assert_eq!(directory("\"db/migrations\"").unwrap(), "db/migrations");
    }
}
