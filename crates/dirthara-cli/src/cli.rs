//! The command line, as clap sees it. Nothing here touches a database.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use dirthara::cli_support as config;

use crate::flags::SettingFlags;

#[derive(Debug, Parser)]
#[command(
    name = "dirthara",
    version,
    about = "Database schema migrations that stay correct when two deploys collide",
    long_about = "Database schema migrations that stay correct when two deploys collide.\n\n\
                  Every command that changes the database takes the lock `dirthara:migrations` on \
                  the history connection before reading the history. On PostgreSQL and MySQL/MariaDB \
                  it is a session lock: a second runner waits for it, then finds nothing left to do. \
                  On MongoDB (and with --locking lease anywhere) it is a lease: a second runner fails \
                  at once with MIGRATION_LOCK_HELD unless --lock-wait is given. SQLite has no session \
                  lock: use --locking lease, or --no-lock when a single runner is guaranteed.",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub(crate) struct GlobalArgs {
    /// Database URL of the `default` connection (postgres://, mysql://, mariadb://, sqlite:,
    /// mongodb://, mongodb+srv://)
    #[arg(
        short = 'd',
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    pub database_url: Option<String>,

    /// Migration directory; repeat for several, loaded in order [default: migrations]
    #[arg(long = "dir", value_name = "DIR", global = true)]
    pub dirs: Vec<PathBuf>,

    /// Configuration file [default: ./dirthara.toml when present]
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// Run without the migration lock (same as --locking off); only safe with a single runner
    #[arg(long, global = true, conflicts_with = "locking")]
    pub no_lock: bool,

    /// SQL run on every session opened on the `default` connection, before the lock (e.g.
    /// "SET lock_timeout = '5s'"); other connections: `[init_sql]` in dirthara.toml or
    /// `DIRTHARA_INIT_SQL_<NAME>`
    #[arg(long, value_name = "SQL", global = true)]
    pub init_sql: Option<String>,

    /// A value for `${NAME}` in steps that say `-- dirthara:placeholders`; repeat for several.
    /// Also `[placeholders]` in dirthara.toml and `DIRTHARA_PLACEHOLDER_<NAME>`; this flag wins
    #[arg(long = "placeholder", value_name = "NAME=VALUE", value_parser = placeholder_value, global = true)]
    pub placeholders: Vec<(String, String)>,

    /// Output format: human, json (one document), ndjson (events as they happen)
    #[arg(long, value_enum, default_value_t = OutputFormat::Human, global = true)]
    pub output: OutputFormat,

    /// Print nothing but errors, warnings, the notice that a run takes no lock, and the output
    /// of status, preview and unlock
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Print more (lock and per-step progress)
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// When the command ends, success or failure, write how it ended to FILE as one line of
    /// JSON (outcome, exit code, counts, the error's code and message), at most 4 KiB: for a
    /// Kubernetes Job, /dev/termination-log
    #[arg(long, value_name = "FILE", global = true)]
    pub summary_file: Option<PathBuf>,

    /// Every setting of the library's table as a flag (`--locking`, `--lock-wait`, ...).
    #[command(flatten)]
    pub settings: SettingFlags,

    #[command(flatten)]
    pub fleet: FleetArgs,
}

/// One command over many targets (migrate, rollback, down, to, baseline, resolve, status,
/// preview, wait), each under its own lock: `[fleet]` in dirthara.toml, or these flags.
#[derive(Debug, Args)]
#[command(next_help_heading = "Fleets (many databases or schemas)")]
#[command(group(ArgGroup::new("fleet_source").args(["targets", "schemas", "databases", "targets_sql"])))]
pub(crate) struct FleetArgs {
    /// Every target of FILE: one a line, `name url` or just `url`, `#` comments; - for stdin
    #[arg(long, value_name = "FILE", global = true)]
    pub targets: Option<PathBuf>,

    /// Every schema of the default database whose name matches PATTERN (a glob: tenant_*),
    /// each with its own history and lock there (PostgreSQL)
    #[arg(long, value_name = "PATTERN", global = true)]
    pub schemas: Option<String>,

    /// Every database on the default connection's server whose name matches PATTERN (a glob)
    #[arg(long, value_name = "PATTERN", global = true)]
    pub databases: Option<String>,

    /// The targets a query on the default connection returns: rows of (name, url) or (url)
    #[arg(long, value_name = "QUERY", global = true)]
    pub targets_sql: Option<String>,

    /// Targets run at a time, each with at most two connections [default: 4]
    #[arg(long, value_name = "N", global = true, value_parser = parse_jobs)]
    pub jobs: Option<usize>,

    /// Run these targets first, the first N or the ones named (tenant_a,tenant_b); start the
    /// rest only if all of them succeeded
    #[arg(long, value_name = "N|NAMES", global = true, value_parser = dirthara::fleet::Canary::parse)]
    pub canary: Option<dirthara::fleet::Canary>,

    /// Stop starting targets after K failed; running ones finish [default: 1]
    #[arg(long, value_name = "K", global = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_failures: Option<u64>,

    /// Never stop starting targets, however many fail
    #[arg(long, global = true, conflicts_with = "max_failures")]
    pub keep_going: bool,

    /// Only these targets of the fleet, by name (comma-separated): a name that is no target is
    /// an error
    // Not `target`: that is the version argument of `to` and `baseline`.
    #[arg(
        long = "target",
        value_name = "NAMES",
        global = true,
        value_delimiter = ','
    )]
    pub only_targets: Vec<String>,

    /// Pass when the targets' source names none (FLEET_EMPTY otherwise: a pattern that
    /// matches nothing is usually a typo)
    #[arg(long, global = true)]
    pub allow_empty_fleet: bool,

    /// Only the targets of shard I of N (counted from 1), a stable split by name; auto: I
    /// from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or NOMAD_ALLOC_INDEX, counted
    /// from 0, and N from DIRTHARA_SHARD_COUNT (or auto/N)
    #[arg(long, value_name = "I/N|auto", global = true, value_parser = dirthara::fleet::ShardSpec::parse)]
    pub shard: Option<dirthara::fleet::ShardSpec>,

    /// The search_path of each --schemas target (PostgreSQL), the target's schema first:
    /// {target}, then schemas every tenant shares [default: "{target}, public"]
    #[arg(long, value_name = "SCHEMAS", global = true, value_parser = dirthara::fleet::SearchPath::parse)]
    pub search_path: Option<dirthara::fleet::SearchPath>,

    /// Run on the one database of -d/--database-url (or the configured `default`), whatever
    /// `[fleet]` in dirthara.toml says; every other setting is kept
    #[arg(long, global = true, conflicts_with_all = ["targets", "schemas", "databases", "targets_sql"])]
    pub no_fleet: bool,
}

fn parse_jobs(text: &str) -> Result<usize, String> {
    let jobs: usize = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of targets"))?;
    config::check_jobs(jobs)
}

// Each flag's text is read by its setting's parser in the library (`config::Setting`), the
// one that also reads dirthara.toml and the environment; text it refuses is a usage error
// here (exit code 2). `settings` then applies the setting's checks to the parsed value.

/// A flag taking a duration, read by `setting`'s parser.
fn duration(
    setting: &'static config::Setting<Duration>,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| {
        setting
            .parse(text)
            .ok_or_else(|| format!("`{text}` is not a duration: use e.g. 500ms, 30s, 5m"))
    }
}

fn parse_until(text: &str) -> Result<dirthara::WaitFor, String> {
    match text {
        "latest" => Ok(dirthara::WaitFor::Latest),
        _ => text
            .parse()
            .map(dirthara::WaitFor::Version)
            .map_err(|_| format!("`{text}` is neither a migration version nor `latest`")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    Human,
    Json,
    Ndjson,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Apply every pending migration, in version order, as one new batch
    #[command(visible_alias = "up")]
    Migrate,
    /// Reverse the last batch (or --steps N, --to V, --all), newest first
    Rollback(RollbackArgs),
    /// Reverse the most recently applied migration
    Down,
    /// Move the database to VERSION: up through it, or down until it is the newest applied (0: before the first migration, unless a migration 0 exists)
    To {
        #[arg(value_name = "VERSION")]
        target: i64,
    },
    /// Reverse every applied migration, then apply all, under one lock
    Refresh,
    /// Drop every table of the database, then apply all migrations (destroys data)
    Fresh {
        /// Do not ask for confirmation (required when not on a terminal)
        #[arg(long)]
        force: bool,
    },
    /// Show what a command would run, with its SQL, without taking the lock or changing anything
    Preview {
        #[command(subcommand)]
        command: PreviewCommand,
    },
    /// Show every migration's state, and the lock's
    Status {
        /// Only what is dirty: the dirty migrations with the cause their failing run recorded;
        /// over a fleet, only the targets with one (the totals still count every target)
        #[arg(long)]
        dirty: bool,
    },
    /// Print the database's schema, read from its catalog (dirthara's own tables left out),
    /// with the applied versions; with --check FILE, compare it with a dump and fail with
    /// the differences (SCHEMA_MISMATCH)
    Dump {
        /// A dump written earlier (`dirthara dump > FILE`) the database must match
        #[arg(long, value_name = "FILE")]
        check: Option<std::path::PathBuf>,
    },
    /// Compare the live schema with the snapshot the last command that changed it took (or
    /// with a dump), under the lock; fail with the differences (SCHEMA_DRIFT)
    Drift {
        /// Compare with a dump written earlier (`dirthara dump > FILE`) instead
        #[arg(long, value_name = "FILE", conflicts_with = "accept")]
        against: Option<std::path::PathBuf>,
        /// Take the live schema as the reference from now on (a history with no snapshot yet,
        /// or a change made on purpose outside the migrations)
        #[arg(long)]
        accept: bool,
    },
    /// Write the baseline of the migrations up to V (`B<V>__squash.sql`, `.json` on MongoDB)
    /// from a database at V: a new database runs it in one step instead of them; a database
    /// that applied them goes on from its own history
    Squash {
        /// The newest migration the baseline stands for; the database must have exactly the
        /// migrations up to it applied
        #[arg(long, value_name = "VERSION")]
        to: i64,
    },
    /// Show who holds the migration lock; with --force, release it
    Unlock {
        /// Release the lock unconditionally (ends the holding session)
        #[arg(long)]
        force: bool,
    },
    /// Create the next migration's files, in the directory's layout (dirthara, Diesel, dbmate,
    /// goose or Flyway: detected, or `format` in dirthara.toml)
    New {
        /// Name of the migration: letters, digits, `.`, `_` and `-`
        name: String,
        /// Create only an up file (an irreversible migration)
        #[arg(long)]
        irreversible: bool,
        /// Create a repeatable migration, `R__<name>.sql`: applied after the versioned ones,
        /// and again whenever its text changes (views, functions, grants)
        #[arg(long, conflicts_with = "irreversible")]
        repeatable: bool,
        /// Create MongoDB JSON command files instead of SQL
        #[arg(long)]
        mongo: bool,
    },
    /// Record what you fixed by hand after DIRTY_MIGRATION, or accept an edited file's checksum
    #[command(group(ArgGroup::new("resolution").required(true).args(["applied", "rolled_back", "accept_checksum"])))]
    Resolve {
        #[arg(value_name = "VERSION")]
        migration: i64,
        /// The dirty migration's changes are in place: mark it applied
        #[arg(long)]
        applied: bool,
        /// The dirty migration's changes are not in place: forget it
        #[arg(long)]
        rolled_back: bool,
        /// The applied migration's file was edited on purpose: record its new checksum
        #[arg(long)]
        accept_checksum: bool,
    },
    /// Adopt an existing database: record every migration up to VERSION (or every one another
    /// tool applied, with --from) as applied without running it
    Baseline(BaselineArgs),
    /// Wait, read-only and without the lock, until the database has every migration of the
    /// directories (or migration --until alone) applied: for application start-up while a Job
    /// migrates. A database newer than the files is fine (a rolling deploy); --strict refuses it
    Wait {
        /// The one version to wait for, whatever else is pending or newer, or latest (every
        /// migration of the directories)
        #[arg(long, value_name = "V|latest", default_value = "latest", value_parser = parse_until)]
        until: dirthara::WaitFor,
        /// Give up after this long, connecting included (WAIT_TIMEOUT) [default: wait for ever]
        #[arg(long, value_name = "DURATION", value_parser = duration(&config::WAIT_TIMEOUT))]
        timeout: Option<Duration>,
    },
    /// Say what each migration's statements would do to the tables they touch, without
    /// running them: blocking DDL (table rewrites, scans and index builds under a lock the
    /// application waits for), statements that fail in a transaction, and rolling-deploy
    /// hazards; with a database, on its server version and its tables' sizes
    Lint(LintArgs),
    /// Print a shell completion script
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff), e.g. `dirthara man > /usr/local/share/man/man1/dirthara.1`
    Man,
}

#[derive(Debug, Args)]
pub(crate) struct LintArgs {
    /// Judge by the rules of the oldest supported server, without connecting, even where a
    /// database URL is configured (without one, lint is offline anyway)
    #[arg(long)]
    pub offline: bool,
    /// The database the files are written for, where no URL says: postgres or mysql
    #[arg(long, value_name = "DATABASE", value_parser = ["postgres", "mysql"])]
    pub dialect: Option<String>,
    /// How to write the findings: human, github (GitHub Actions annotations) or sarif (SARIF
    /// 2.1.0, for code-scanning); --output json writes them as one JSON document
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// List the rules (name, severity, lock, what it blocks, why) and exit
    #[arg(long)]
    pub rules: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LintFormat {
    Human,
    Github,
    Sarif,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("scope").args(["steps", "to", "all"])))]
pub(crate) struct RollbackArgs {
    /// Reverse the N most recently applied migrations
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: Option<u64>,
    /// Reverse every migration applied after version V (0: all, unless a migration 0 exists)
    #[arg(long, value_name = "V")]
    pub to: Option<i64>,
    /// Reverse every applied migration
    #[arg(long)]
    pub all: bool,
}

impl RollbackArgs {
    /// How far these arguments reverse: the last batch unless one of them says otherwise.
    pub(crate) fn scope(&self) -> dirthara::RollbackScope {
        use dirthara::RollbackScope;
        match (self.steps, self.to, self.all) {
            (Some(n), _, _) => RollbackScope::Steps(n as usize),
            (_, Some(v), _) => RollbackScope::To(v),
            (_, _, true) => RollbackScope::All,
            _ => RollbackScope::LastBatch,
        }
    }
}

/// `wait --timeout`, held to the setting's bounds: out of them, a `CONFIG_ERROR` naming the
/// flag.
pub(crate) fn wait_timeout(
    timeout: Option<Duration>,
) -> Result<Option<Duration>, crate::error::CliError> {
    let Some(timeout) = timeout else {
        return Ok(None);
    };
    let flag = config::Origin::Named("--timeout");
    Ok(Some(config::WAIT_TIMEOUT.accept(timeout, flag)?))
}

#[derive(Debug, Subcommand)]
pub(crate) enum PreviewCommand {
    #[command(visible_alias = "up")]
    Migrate,
    Rollback(RollbackArgs),
    Down,
    To {
        #[arg(value_name = "VERSION")]
        target: i64,
    },
    Refresh,
    Fresh,
    /// What `baseline --from TOOL` would record
    Baseline(FromArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BaselineArgs {
    /// Record every migration up to this version
    #[arg(
        value_name = "VERSION",
        required_unless_present = "from",
        conflicts_with = "from"
    )]
    pub target: Option<i64>,
    #[command(flatten)]
    pub from: OptionalFromArgs,
}

#[derive(Debug, Args)]
pub(crate) struct OptionalFromArgs {
    /// Adopt another tool's history: record every migration it applied (read from its own
    /// table on the history connection, which is left untouched)
    #[arg(long, value_name = "TOOL", value_parser = clap::builder::PossibleValuesParser::new(dirthara::Tool::NAMES))]
    pub from: Option<String>,
    /// The other tool's history table, when not its default name
    #[arg(long, value_name = "NAME", requires = "from")]
    pub from_table: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct FromArgs {
    /// The tool whose history would be adopted
    #[arg(long, value_name = "TOOL", value_parser = clap::builder::PossibleValuesParser::new(dirthara::Tool::NAMES))]
    pub from: String,
    /// The other tool's history table, when not its default name
    #[arg(long, value_name = "NAME")]
    pub from_table: Option<String>,
}

/// `--placeholder NAME=VALUE`: split at the first `=`, the name checked as in the file.
fn placeholder_value(text: &str) -> Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| {
        format!("`{text}` has no `=`; write `--placeholder NAME=VALUE` (an empty value: `NAME=`)")
    })?;
    dirthara::cli_support::check_placeholder_name(name).map_err(|e| e.to_string())?;
    Ok((name.to_ascii_lowercase(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// README's CLI reference names every flag there is, of every command.
    #[test]
    fn every_flag_is_in_the_readmes_cli_reference() {
        let readme = include_str!("../../../README.md");
        let start = readme.find("## CLI reference").expect("a CLI reference");
        let end = start + readme[start..].find("\n## Configuration").expect("its end");
        let reference = &readme[start..end];
        let mut commands = vec![Cli::command()];
        while let Some(command) = commands.pop() {
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if ["help", "version"].contains(&long) {
                    continue;
                }
                let flag = format!("--{long}");
                let short = arg.get_short().map(|short| format!("`-{short}`"));
                assert!(
                    reference.contains(&flag) || short.is_some_and(|s| reference.contains(&s)),
                    "README's CLI reference does not name {flag} (of `{}`)",
                    command.get_name()
                );
            }
            commands.extend(command.get_subcommands().cloned());
        }
    }
}
