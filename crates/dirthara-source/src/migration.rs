//! What a migration is: version, name, steps, checksum, and where it runs.

use std::fmt;

pub use crate::vocabulary::StepFormat;
use crate::vocabulary::{DirectoryLayout, Layout};

mod checksum;
mod parsed;
pub use checksum::{checksum, hex};
pub use parsed::ParsedStep;
pub(crate) use parsed::ParsedSteps;

/// The connection a migration runs on when it does not name one.
pub const DEFAULT_CONNECTION: &str = "default";

/// Which way a step moves the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Up,
    Down,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Up => "up",
            Direction::Down => "down",
        })
    }
}

/// Where a step's text is in its file, so that an error in the step can be pointed at the
/// file's own line: a dbmate or goose section starts below its marker, and goose's
/// `StatementBegin`/`StatementEnd` lines are left out of the text the step runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StepSource {
    /// The file the step is in (an embedded or code migration: its description).
    pub file: String,
    /// The file's line where the step's text starts; 1 for a whole file.
    pub first_line: usize,
    /// Lines of the file, inside the step, that its text leaves out; ascending.
    pub dropped_lines: Vec<usize>,
    /// The byte ranges of the step's text that goose's `-- +goose ENVSUB ON` covers, where
    /// environment variables are substituted when the step runs
    /// ([`crate::placeholders::envsub`]); ascending, disjoint.
    pub envsub: Vec<std::ops::Range<usize>>,
}

impl StepSource {
    /// A step that is its whole file.
    pub fn whole(file: impl Into<String>) -> Self {
        StepSource {
            file: file.into(),
            first_line: 1,
            dropped_lines: Vec::new(),
            envsub: Vec::new(),
        }
    }

    /// The file's line of line `step_line` (1-based) of the step's text.
    pub fn file_line(&self, step_line: usize) -> usize {
        let mut line = (self.first_line + step_line).saturating_sub(1);
        for dropped in &self.dropped_lines {
            if *dropped <= line {
                line += 1;
            }
        }
        line
    }
}

/// One migration, loaded and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Migration {
    /// 0 ..= i64::MAX. `to 0` means "before the first migration" unless a migration 0
    /// exists (sqlx, golang-migrate and Diesel allow one); then it targets that migration.
    pub version: i64,
    pub name: String,
    /// The forward step (SQL text). Private with the checksum: the checksum is always the
    /// one of this text.
    pub(crate) up: String,
    /// The reverse step; `None` makes the migration irreversible (or, with `down_unread`,
    /// was not looked at).
    pub down: Option<DownStep>,
    /// Loaded for a command that never reverses (`DownSteps::Skip`): the down file was
    /// not read, so `down` is `None` whatever the files hold.
    pub down_unread: bool,
    /// Hex SHA-256 of the normalised up text (see [`checksum`]), computed when first asked:
    /// only a migration that has a history record or is about to be applied needs it.
    pub(crate) checksum: LazyChecksum,
    /// Whether the up step may share one transaction with its history record. The down
    /// step says so for itself ([`DownStep::transactional`]).
    pub transactional: bool,
    /// The named connection the steps run on.
    pub connection: String,
    /// Where it came from (a file path), for messages.
    pub origin: String,
    /// Where the up step's text is in its file.
    pub up_source: StepSource,
    /// The up step's `-- dirthara:table-lock-timeout` directive, as written (`5s`, `off`).
    pub table_lock_timeout: Option<String>,
    /// The up step's `-- dirthara:allow-blocking <reason>`: it may block the application
    /// while it rewrites or scans a big table; the reason is printed when it runs.
    pub allow_blocking: Option<String>,
    pub format: StepFormat,
    /// The up step controls its own transaction (a top-level `BEGIN`, `COMMIT`, ... found by
    /// the SQL tokenizer), described as e.g. `` `COMMIT` at line 3 of the up step``: it runs
    /// exactly as written, never wrapped, and is bracketed by a `running` record. Set by the
    /// runner, which knows each connection's SQL dialect.
    pub own_transaction: Option<String>,
    /// The layout its files are in, so that advice about them (the file that would reverse
    /// it, where its statements go) speaks that layout; `None` for a migration built in code.
    pub layout: Option<DirectoryLayout>,
    /// What the runner parsed each step into at load, for its database ([`ParsedStep`]).
    pub(crate) parsed: ParsedSteps,
    /// A repeatable migration (`R__<name>.sql`): applied again whenever its text changes,
    /// after the versioned ones. Its `version` means nothing (0); it is kept after every
    /// versioned migration of a list ([`split_repeatables`]), never among them.
    pub repeatable: bool,
    /// A baseline migration (`B<V>__<name>.sql`, `.json`, written by `dirthara squash --to
    /// V`): the schema at `version` in one step, which a new database runs instead of the
    /// migrations it stands for, listed here (its `-- dirthara:squashes` header). It is kept
    /// after every versioned migration of a list and before the repeatable ones
    /// ([`split_baselines`]).
    pub squashes: Option<Vec<i64>>,
}

impl Migration {
    /// A baseline migration ([`Migration::squashes`]).
    pub fn is_baseline(&self) -> bool {
        self.squashes.is_some()
    }

    /// Whether this baseline stands for `version`: its own, or one of its list. Never true
    /// of a migration that is not a baseline.
    pub fn stands_for(&self, version: i64) -> bool {
        (self.squashes.as_deref())
            .is_some_and(|list| version == self.version || list.contains(&version))
    }
}

/// The versioned migrations of a loaded list (baselines included, after them), and its
/// repeatable ones (kept at its end, in name order).
pub fn split_repeatables(all: &[Migration]) -> (&[Migration], &[Migration]) {
    all.split_at(all.partition_point(|m| !m.repeatable))
}

/// The versioned migrations of a list without repeatables, and its baselines (kept after
/// them, in version order).
pub fn split_baselines(versioned: &[Migration]) -> (&[Migration], &[Migration]) {
    let (files, baselines) = versioned.split_at(versioned.partition_point(|m| !m.is_baseline()));
    debug_assert!(
        baselines.iter().all(Migration::is_baseline),
        "baselines are kept after every versioned migration"
    );
    (files, baselines)
}

/// Whether a loading run reads the down steps.
///
/// A command that never reverses anything (`migrate`, `fresh`, `status`) has no use for them:
/// skipping them halves the files a no-op start-up opens. A broken down file is then reported
/// by the first command that can reverse, still before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DownSteps {
    /// Read and validate every down step.
    #[default]
    Read,
    /// Leave down files unread; every migration comes back with `down_unread` set.
    Skip,
}

/// A migration's reverse step, and how it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DownStep {
    /// SQL text, or JSON commands.
    pub text: String,
    /// Whether it may share one transaction with its history record.
    pub transactional: bool,
    /// The step controls its own transaction; see [`Migration::own_transaction`].
    pub own_transaction: Option<String>,
    /// Empty or only comments: a deliberate "reverses nothing", recorded without sending
    /// anything. Set by the runner.
    pub is_blank: bool,
    /// Where its text is in its file (the up step's file for a sectioned file).
    pub source: StepSource,
    /// Its `-- dirthara:table-lock-timeout` directive, as written.
    pub table_lock_timeout: Option<String>,
    /// Its `-- dirthara:allow-blocking <reason>`.
    pub allow_blocking: Option<String>,
}

impl DownStep {
    /// A transactional down step of `text`.
    pub fn new(text: impl Into<String>) -> Self {
        DownStep {
            text: text.into(),
            transactional: true,
            own_transaction: None,
            is_blank: false,
            source: StepSource::default(),
            table_lock_timeout: None,
            allow_blocking: None,
        }
    }
}

/// A checksum computed once, when first asked. It is a function of the up text, which
/// `Migration`'s equality already compares, so it never makes two migrations unequal.
#[derive(Debug, Clone, Default)]
pub(crate) struct LazyChecksum(std::sync::OnceLock<String>);

impl PartialEq for LazyChecksum {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LazyChecksum {}

impl Migration {
    /// A migration from its parts; the checksum is computed from `up`.
    pub fn new(version: i64, name: impl Into<String>, up: impl Into<String>) -> Self {
        let up = up.into();
        let name = name.into();
        Migration {
            version,
            origin: format!("{version}_{name}"),
            up_source: StepSource::whole(format!("{version}_{name}")),
            table_lock_timeout: None,
            allow_blocking: None,
            name,
            checksum: LazyChecksum::default(),
            up,
            down: None,
            down_unread: false,
            transactional: true,
            connection: DEFAULT_CONNECTION.to_string(),
            format: StepFormat::Sql,
            own_transaction: None,
            layout: None,
            parsed: ParsedSteps::default(),
            repeatable: false,
            squashes: None,
        }
    }

    /// What `embed_migrations!` expands to: the parts it validated at compile time.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn embedded(
        version: i64,
        name: &str,
        up: &str,
        down: Option<(&str, bool)>,
        transactional: bool,
        connection: &str,
        format: StepFormat,
        origin: &str,
    ) -> Self {
        Migration {
            version,
            name: name.to_string(),
            checksum: LazyChecksum::default(),
            up: up.to_string(),
            down: down.map(|(text, transactional)| DownStep {
                transactional,
                ..DownStep::new(text)
            }),
            down_unread: false,
            transactional,
            connection: connection.to_string(),
            origin: origin.to_string(),
            up_source: StepSource::whole(origin),
            table_lock_timeout: None,
            allow_blocking: None,
            format,
            own_transaction: None,
            layout: None,
            parsed: ParsedSteps::default(),
            repeatable: false,
            squashes: None,
        }
    }

    /// The migration made repeatable (`R__<name>`, what `embed_migrations!` found at compile
    /// time): applied after the versioned ones, and again whenever its text changes.
    pub fn as_repeatable(mut self) -> Self {
        self.repeatable = true;
        self
    }

    /// The migration made a baseline standing for `squashes` (`B<V>__<name>`, what
    /// `embed_migrations!` found at compile time).
    pub fn as_baseline(mut self, squashes: Vec<i64>) -> Self {
        self.squashes = Some(squashes);
        self
    }

    /// The layout its files were detected in (what `embed_migrations!` found at compile
    /// time), for advice that speaks it.
    pub fn in_layout(mut self, layout: Layout) -> Self {
        self.layout = Some(DirectoryLayout {
            layout,
            declared: false,
        });
        self
    }

    /// Where goose's `ENVSUB ON` covers each step's text (what `embed_migrations!` found at
    /// compile time): byte ranges, as [`StepSource::envsub`].
    #[doc(hidden)]
    pub fn with_envsub(mut self, up: &[(usize, usize)], down: &[(usize, usize)]) -> Self {
        let ranges = |r: &[(usize, usize)]| r.iter().map(|&(s, e)| s..e).collect();
        self.up_source.envsub = ranges(up);
        if let Some(step) = &mut self.down {
            step.source.envsub = ranges(down);
        }
        self
    }

    /// The forward step (SQL text, or JSON commands).
    pub fn up(&self) -> &str {
        &self.up
    }

    /// Hex SHA-256 of the normalised up text (see [`checksum`]): what the history records,
    /// and what an applied migration's file is checked against.
    pub fn checksum(&self) -> &str {
        self.checksum.0.get_or_init(|| checksum(&self.up))
    }

    /// Replaces the text `direction`'s step runs with `text`: the step with its placeholders
    /// filled in (see [`crate::placeholders`]). The checksum stays the one of the text as
    /// written, so that a value changed between runs never makes an applied migration
    /// "modified".
    pub fn set_step_text(&mut self, direction: Direction, text: String) {
        self.checksum();
        match direction {
            Direction::Up => self.up = text,
            Direction::Down => {
                if let Some(down) = &mut self.down {
                    down.text = text;
                }
            }
        }
    }

    /// Adds a transactional down step of `down`.
    pub fn with_down(mut self, down: impl Into<String>) -> Self {
        self.down = Some(DownStep::new(down));
        self
    }

    /// The text `direction` runs, if the migration has that step.
    pub fn step(&self, direction: Direction) -> Option<&str> {
        match direction {
            Direction::Up => Some(&self.up),
            Direction::Down => self.down.as_ref().map(|down| down.text.as_str()),
        }
    }

    /// Whether the `direction` step may share one transaction with its history record.
    pub fn transactional_in(&self, direction: Direction) -> bool {
        match direction {
            Direction::Up => self.transactional,
            Direction::Down => self.down.as_ref().is_some_and(|down| down.transactional),
        }
    }

    /// Where the `direction` step's text is in its file.
    pub fn source_of(&self, direction: Direction) -> &StepSource {
        match (direction, &self.down) {
            (Direction::Down, Some(down)) if !down.source.file.is_empty() => &down.source,
            _ => &self.up_source,
        }
    }

    /// The byte ranges of the `direction` step's text under goose's `ENVSUB ON`
    /// ([`StepSource::envsub`]): the step's own, even where its source is not known.
    pub fn envsub_in(&self, direction: Direction) -> &[std::ops::Range<usize>] {
        match (direction, &self.down) {
            (Direction::Down, Some(down)) => &down.source.envsub,
            (Direction::Down, None) => &[],
            (Direction::Up, _) => &self.up_source.envsub,
        }
    }

    /// The `direction` step's `-- dirthara:table-lock-timeout` directive, as written.
    pub fn table_lock_timeout_in(&self, direction: Direction) -> Option<&str> {
        match direction {
            Direction::Up => self.table_lock_timeout.as_deref(),
            Direction::Down => self.down.as_ref()?.table_lock_timeout.as_deref(),
        }
    }

    /// Sets the up step's `-- dirthara:table-lock-timeout` (what `embed_migrations!` read at
    /// compile time); `down` the down step's.
    #[doc(hidden)]
    pub fn with_table_lock_timeouts(mut self, up: Option<&str>, down: Option<&str>) -> Self {
        self.table_lock_timeout = up.map(str::to_string);
        if let Some(step) = &mut self.down {
            step.table_lock_timeout = down.map(str::to_string);
        }
        self
    }

    /// The `direction` step's `-- dirthara:allow-blocking` reason.
    pub fn allow_blocking_in(&self, direction: Direction) -> Option<&str> {
        match direction {
            Direction::Up => self.allow_blocking.as_deref(),
            Direction::Down => self.down.as_ref()?.allow_blocking.as_deref(),
        }
    }

    /// Sets the steps' `-- dirthara:allow-blocking` reasons (what `embed_migrations!` read at
    /// compile time).
    #[doc(hidden)]
    pub fn with_allow_blocking(mut self, up: Option<&str>, down: Option<&str>) -> Self {
        self.allow_blocking = up.map(str::to_string);
        if let Some(step) = &mut self.down {
            step.allow_blocking = down.map(str::to_string);
        }
        self
    }

    /// What the runner parsed the `direction` step into when it loaded the migration; empty
    /// before, and for a step its database takes as the tokenizer splits it.
    pub fn parsed_in(&self, direction: Direction) -> &ParsedStep {
        match direction {
            Direction::Up => &self.parsed.up,
            Direction::Down => &self.parsed.down,
        }
    }

    /// Keeps what the runner parsed the `direction` step into, as it loads the migration.
    #[doc(hidden)]
    pub fn set_parsed(&mut self, direction: Direction, parsed: ParsedStep) {
        match direction {
            Direction::Up => self.parsed.up = parsed,
            Direction::Down => self.parsed.down = parsed,
        }
    }

    /// How the `direction` step controls its own transaction, if it does.
    pub fn own_transaction_in(&self, direction: Direction) -> Option<&str> {
        match direction {
            Direction::Up => self.own_transaction.as_deref(),
            Direction::Down => self.down.as_ref()?.own_transaction.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_lines_map_to_its_files_lines() {
        let whole = StepSource::whole("a.sql");
        assert_eq!(whole.file_line(1), 1);
        assert_eq!(whole.file_line(7), 7);
        // A goose up section starting on line 3, its StatementBegin on 5 and End on 8 left out.
        let goose = StepSource {
            file: "g.sql".into(),
            first_line: 3,
            dropped_lines: vec![5, 8],
            envsub: Vec::new(),
        };
        assert_eq!(
            (1..=5).map(|l| goose.file_line(l)).collect::<Vec<_>>(),
            [3, 4, 6, 7, 9]
        );
    }
}
