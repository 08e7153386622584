//! Flags, environment and `dirthara.toml` merged into one validated [`Config`], in that
//! order of precedence: flags over environment over file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use dirthara::cli_support::{is_setting_variable, Origin};
use dirthara::fleet::{FleetSettings, TargetSource};
use dirthara::{Config, Error, Locking};

use crate::cli::{FleetArgs, GlobalArgs};
use crate::render::Renderer;

const DEFAULT_CONFIG_FILE: &str = "dirthara.toml";

/// The configuration the command runs with. A `DIRTHARA_*` variable that is no setting is
/// named on stderr with the one it most likely meant, and ignored.
pub(crate) fn build_config(args: &GlobalArgs, renderer: &Renderer) -> Result<Config, Error> {
    let mut config = Config::default();
    match &args.config {
        Some(path) => config.merge_file(path)?,
        None if Path::new(DEFAULT_CONFIG_FILE).is_file() => {
            config.merge_file(Path::new(DEFAULT_CONFIG_FILE))?
        }
        None => {}
    }
    let environment = environment()?;
    for unknown in dirthara::cli_support::unknown_variables(&environment) {
        renderer.unknown_setting(&unknown);
    }
    // `--shard` over `[fleet] shard`; `shard = "auto"` read from this environment, `.env`
    // included, as `--shard auto` is.
    let shard_auto = config.fleet.shard_auto.take();
    let shard = match (args.fleet.shard, shard_auto) {
        (Some(spec), _) => Some(spec.resolve(|name| variable(&environment, name))?),
        (None, Some(auto)) => Some(auto.resolve(|name| variable(&environment, name))?),
        (None, None) => None,
    };
    config.merge_env(environment)?;
    if let Some(url) = &args.database_url {
        config
            .connections
            .insert(dirthara::DEFAULT_CONNECTION.to_string(), url.clone());
    }
    if !args.dirs.is_empty() {
        config.directories = args.dirs.clone();
    }
    if args.no_lock {
        config.locking = Locking::Off;
    }
    // clap let through only text each setting's parser reads; what a well-formed value must
    // also be (a lease long enough, a table name safe in SQL) is checked here by the same
    // row, so that it is a CONFIG_ERROR naming the flag, as from the file or environment.
    for (row, text) in &args.settings.0 {
        let flag = format!("--{}", row.flag);
        (row.apply)(&mut config, text, Origin::Named(&flag))?;
    }
    if let Some(init_sql) = &args.init_sql {
        config
            .init_sql
            .insert(dirthara::DEFAULT_CONNECTION.to_string(), init_sql.clone());
    }
    config
        .placeholders
        .extend(args.placeholders.iter().cloned());
    apply_fleet_flags(&args.fleet, &mut config.fleet);
    if let Some(shard) = shard {
        config.fleet.options.shard = Some(shard);
    }
    Ok(config)
}

/// The variable `name`: a setting's from the environment as read (the process's, then
/// `.env`), any other (`--shard auto`'s `JOB_COMPLETION_INDEX`) from the process's.
fn variable(environment: &[(String, String)], name: &str) -> Option<String> {
    match environment.iter().find(|(key, _)| key == name) {
        Some((_, value)) => Some(value.clone()),
        None => std::env::var_os(name).map(|value| value.to_string_lossy().into_owned()),
    }
}

/// The fleet flags over `[fleet]`: a source named by a flag replaces the file's, and
/// `--no-fleet` removes it (the rest of `[fleet]` is then unused). `--shard`,
/// resolved against the environment, is applied by the caller.
fn apply_fleet_flags(args: &FleetArgs, fleet: &mut FleetSettings) {
    let source = [
        args.targets.clone().map(TargetSource::File),
        args.schemas.clone().map(TargetSource::Schemas),
        args.databases.clone().map(TargetSource::Databases),
        args.targets_sql.clone().map(TargetSource::Query),
    ];
    // clap lets one of them through at most, and none with --no-fleet.
    if let Some(source) = source.into_iter().flatten().next() {
        fleet.targets = Some(source);
    }
    if args.no_fleet {
        fleet.targets = None;
    }
    let options = &mut fleet.options;
    if let Some(jobs) = args.jobs {
        options.jobs = jobs;
    }
    if let Some(canary) = args.canary.clone() {
        canary.apply(options);
    }
    if let Some(search_path) = args.search_path.clone() {
        options.search_path = search_path;
    }
    if let Some(max) = args.max_failures {
        options.max_failures = Some(usize::try_from(max).unwrap_or(usize::MAX));
    }
    if args.keep_going {
        options.max_failures = None;
    }
    if args.allow_empty_fleet {
        options.allow_empty = true;
    }
    let named = args.only_targets.iter().map(|name| name.trim());
    options.only = named
        .filter(|name| !name.is_empty())
        .map(String::from)
        .collect();
}

/// The process environment, with `.env` (when present) filling in what is not already set.
/// The file is read with the configuration files' cap (1 MiB, so a `.env` that is a device or
/// a huge file is refused at once), then as `dotenvy` reads it (quotes, escapes, `export`,
/// `${VAR}`); a line it cannot read is an error naming the file, not silently skipped.
fn environment() -> Result<Vec<(String, String)>, Error> {
    let mut vars = setting_variables(std::env::vars_os())?;
    let text = match dirthara::cli_support::read_config_file(Path::new(".env")) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vars),
        Err(e) => {
            return Err(Error::new(dirthara::ErrorKind::Config {
                message: format!("cannot read .env: {e}"),
            }))
        }
    };
    let bad = |e: dotenvy::Error| {
        Error::new(dirthara::ErrorKind::Config {
            message: format!(".env: {e}; fix or remove that line"),
        })
    };
    for entry in dotenvy::from_read_iter(text.as_bytes()) {
        let (key, value) = entry.map_err(bad)?;
        if !vars.iter().any(|(k, _)| *k == key) {
            vars.push((key, value));
        }
    }
    Ok(vars)
}

/// The variables [`Config::merge_env`] reads, as text. Not `std::env::vars`, which panics on
/// any variable that is not UTF-8, even one dirthara never reads: such a variable is refused
/// only when it is a setting, by name.
fn setting_variables(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<(String, String)>, Error> {
    let mut settings = Vec::new();
    for (name, value) in vars {
        let Some(name) = name.to_str().filter(|name| is_setting_variable(name)) else {
            continue;
        };
        let value = value.into_string().map_err(|_| {
            Error::new(dirthara::ErrorKind::Config {
                message: format!("environment variable {name} is not valid UTF-8"),
            })
        })?;
        settings.push((name.to_string(), value));
    }
    Ok(settings)
}

/// Where `new` writes: the first configured directory.
pub(crate) fn new_migration_dir(config: &Config) -> Result<PathBuf, Error> {
    config.directories.first().cloned().ok_or_else(|| {
        dirthara::Error::new(dirthara::ErrorKind::Config {
            message: "no migration directory is configured (`directories` is empty); pass --dir"
                .into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_variable_that_is_not_utf8_is_skipped_unless_it_is_a_setting() {
        use std::os::unix::ffi::OsStringExt;
        let not_utf8 = || OsString::from_vec(vec![b'x', 0xff]);
        let vars = setting_variables([
            (
                OsString::from("DATABASE_URL"),
                OsString::from("sqlite:x.db"),
            ),
            (OsString::from("LESSOPEN"), not_utf8()),
            (not_utf8(), OsString::from("y")),
            (OsString::from("HOME"), OsString::from("/root")),
        ])
        .unwrap();
        assert_eq!(vars, [("DATABASE_URL".into(), "sqlite:x.db".into())]);

        let error =
            setting_variables([(OsString::from("DIRTHARA_LOCK_WAIT"), not_utf8())]).unwrap_err();
        assert_eq!(error.code(), dirthara::Code::ConfigError);
        assert!(
            error
                .to_string()
                .contains("DIRTHARA_LOCK_WAIT is not valid UTF-8"),
            "{error}"
        );
    }
}
