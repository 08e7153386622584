//! The settings of a fleet (`[fleet]` in `dirthara.toml`, the CLI's fleet flags): where its
//! targets come from and how it runs. What a fleet does with them is in [`crate::fleet`].

use std::fmt;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::redact::redact_url;

/// `[fleet]`: the targets every command runs over, and how. No source: no fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetSettings {
    /// Where the targets come from; `None`: commands run on the `default` connection alone.
    pub targets: Option<TargetSource>,
    /// How the fleet runs.
    pub options: FleetOptions,
    /// `[fleet] shard = "auto"` (or `"auto/N"`): the shard to read from the orchestrator's
    /// environment when the command runs ([`ShardSpec::resolve`](super::ShardSpec::resolve)),
    /// unless `options.shard` is set by then (`--shard I/N`). The library's `Fleet::targets`
    /// resolves it from the process's environment; the CLI from its own (`.env` included).
    pub shard_auto: Option<super::ShardSpec>,
}

/// One database (or PostgreSQL schema) of a fleet.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Target {
    /// How the target is named in reports, events and shards: unique in its fleet.
    pub name: String,
    /// The database's URL (never printed: see [`Target::shown_url`]).
    pub url: String,
    /// PostgreSQL: the schema the target is, in the URL's database; `None`: the URL's own.
    pub schema: Option<String>,
}

impl Target {
    /// The database at `url`, named `name`.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Target {
            name: name.into(),
            url: url.into(),
            schema: None,
        }
    }

    /// The schema `schema` of the PostgreSQL database at `url`, named as the schema is.
    pub fn schema(url: impl Into<String>, schema: impl Into<String>) -> Self {
        let schema = schema.into();
        Target {
            name: schema.clone(),
            url: url.into(),
            schema: Some(schema),
        }
    }

    /// The URL without its password, as every message shows it.
    pub fn shown_url(&self) -> String {
        redact_url(&self.url)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("url", &self.shown_url())
            .field("schema", &self.schema)
            .finish()
    }
}

/// One share of a fleet, for runners that split it between them (CI shards, a Kubernetes
/// Indexed Job, whose 0-based index `--shard auto` reads: [`ShardSpec`](super::ShardSpec)):
/// shard `index` of `count`, counted from 1. A target belongs to the shard its name hashes
/// to, so the split is stable: the same targets land in the same shard on every host and
/// every run, however the list is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shard {
    /// From 1 to `count`.
    pub index: u32,
    /// How many shards the fleet is split into.
    pub count: u32,
}

impl Shard {
    /// `I/N`, with 1 <= I <= N.
    ///
    /// # Examples
    ///
    /// ```
    /// let shard = dirthara_core::config::Shard::parse("2/3").unwrap();
    /// assert_eq!((shard.index, shard.count), (2, 3));
    /// assert!(dirthara_core::config::Shard::parse("0/3").is_err());
    /// ```
    pub fn parse(text: &str) -> std::result::Result<Shard, String> {
        let bad = || {
            format!(
                "`{text}` is not a shard: write I/N, shard I of N counted from 1 (1/3, 2/3, 3/3)"
            )
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = index.trim().parse().map_err(|_| bad())?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether the target named `name` is this shard's: the first 8 bytes of its name's
    /// SHA-256, as a number, modulo `count`.
    pub fn holds(&self, name: &str) -> bool {
        let hash = Sha256::digest(name.as_bytes());
        let number = u64::from_be_bytes(hash[..8].try_into().expect("8 bytes"));
        number % u64::from(self.count) == u64::from(self.index - 1)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Where a fleet's targets come from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetSource {
    /// A file of one target a line, `name url` or just `url`, `#` comments; `-` is stdin.
    File(PathBuf),
    /// Every schema of the `default` database whose name matches the glob (`tenant_*`), each
    /// with its own history and lock there (PostgreSQL).
    Schemas(String),
    /// Every database on the `default` connection's server whose name matches the glob.
    Databases(String),
    /// The rows of a query run on the `default` connection: `(name, url)` or `(url)`.
    Query(String),
    /// Targets given in code.
    List(Vec<Target>),
}

impl TargetSource {
    /// How the source is written in messages: `--schemas 'tenant_*'`, ...
    pub fn describe(&self) -> String {
        match self {
            TargetSource::File(path) => format!("--targets {}", path.display()),
            TargetSource::Schemas(glob) => format!("--schemas '{glob}'"),
            TargetSource::Databases(glob) => format!("--databases '{glob}'"),
            TargetSource::Query(sql) => format!("--targets-sql \"{sql}\""),
            TargetSource::List(targets) => format!("{} targets given in code", targets.len()),
        }
    }
}

/// How a fleet runs: how many targets at a time, the canary, when to stop starting, and
/// which share of the targets is this runner's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetOptions {
    /// Targets migrated at a time (each uses at most two connections). Default 4.
    pub jobs: usize,
    /// Run the first `canary` targets first; start the rest only if every one succeeded.
    pub canary: usize,
    /// The canary by name (`--canary tenant_a,tenant_b`): these targets first, instead of
    /// the first `canary`. A name that is not a target of the fleet is an error.
    pub canary_names: Vec<String>,
    /// Stop *starting* targets after this many failed; `None`: never stop (keep going).
    /// Default `Some(1)`.
    pub max_failures: Option<usize>,
    /// Only the targets of this shard.
    pub shard: Option<Shard>,
    /// Only these targets, by name (`--target tenant_05`): how a command printed for one
    /// target of a targets file or query runs on it alone. A name that is not a target of
    /// the fleet is an error. Empty: every target.
    pub only: Vec<String>,
    /// Whether a source that names no target passes (an empty list is expected); by default
    /// it is `FLEET_EMPTY`, since a typo in a pattern would otherwise pass on nothing.
    pub allow_empty: bool,
    /// PostgreSQL: the `search_path` of a `--schemas` target's sessions, the target's own
    /// schema first. Default `{target}, public`.
    pub search_path: SearchPath,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            jobs: 4,
            canary: 0,
            canary_names: Vec::new(),
            max_failures: Some(1),
            shard: None,
            only: Vec::new(),
            allow_empty: false,
            search_path: SearchPath::default(),
        }
    }
}

/// The canary, as `--canary` and `[fleet] canary` write it: a number of targets (the first
/// by name) or the targets' names, comma-separated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Canary {
    /// The first N targets.
    Count(usize),
    /// These targets, by name.
    Names(Vec<String>),
}

impl Canary {
    /// `3`, or `tenant_a,tenant_b`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara_core::config::Canary;
    /// assert_eq!(Canary::parse("2").unwrap(), Canary::Count(2));
    /// assert_eq!(
    ///     Canary::parse("tenant_a, tenant_b").unwrap(),
    ///     Canary::Names(vec!["tenant_a".into(), "tenant_b".into()])
    /// );
    /// assert!(Canary::parse("a,,b").is_err());
    /// ```
    pub fn parse(text: &str) -> std::result::Result<Canary, String> {
        let text = text.trim();
        if let Ok(count) = text.parse::<usize>() {
            return Ok(Canary::Count(count));
        }
        Canary::names(text.split(',').map(str::trim))
    }

    /// The targets named, each once and none empty.
    pub fn names<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> std::result::Result<Canary, String> {
        let mut seen = Vec::new();
        for name in names {
            if name.is_empty() || name.chars().any(char::is_whitespace) {
                return Err(format!(
                    "`{name}` is no target name: give a number of targets (2) or target names \
                     separated by commas (tenant_a,tenant_b)"
                ));
            }
            if !seen.iter().any(|n| n == name) {
                seen.push(name.to_string());
            }
        }
        if seen.is_empty() {
            return Err(
                "no target named: give a number of targets (2) or target names \
                        separated by commas (tenant_a,tenant_b)"
                    .into(),
            );
        }
        Ok(Canary::Names(seen))
    }

    /// Into `options`, replacing the canary they had.
    pub fn apply(self, options: &mut FleetOptions) {
        match self {
            Canary::Count(count) => {
                options.canary = count;
                options.canary_names.clear();
            }
            Canary::Names(names) => {
                options.canary = 0;
                options.canary_names = names;
            }
        }
    }
}

/// PostgreSQL: the `search_path` a `--schemas` target's sessions get (`[fleet] search_path`,
/// `--search-path`): `{target}` (the target's schema) first, then schemas every tenant shares,
/// such as `public`, where extensions and types are installed. The target comes first so that
/// what a migration creates without a schema, and dirthara's history, land in the target's
/// schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    /// The schemas after the target's, as they are named in the catalog.
    after: Vec<String>,
}

impl Default for SearchPath {
    fn default() -> Self {
        SearchPath {
            after: vec!["public".to_string()],
        }
    }
}

impl SearchPath {
    /// Where the target's own schema goes.
    pub const TARGET: &'static str = "{target}";

    /// `{target}, public, extensions`: comma-separated, `{target}` first and once, then
    /// schema names (letters, digits and `_`, as the catalog spells them), each once.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara_core::config::SearchPath;
    /// let path = SearchPath::parse("{target}, public, extensions").unwrap();
    /// assert_eq!(path.schemas("tenant_1"), ["tenant_1", "public", "extensions"]);
    /// assert_eq!(SearchPath::parse("{target}").unwrap().schemas("t"), ["t"]);
    /// assert!(SearchPath::parse("public, {target}").is_err());
    /// ```
    pub fn parse(text: &str) -> std::result::Result<SearchPath, String> {
        let entries: Vec<&str> = text.split(',').map(str::trim).collect();
        if entries[0] != Self::TARGET && entries[0].starts_with(Self::TARGET) {
            return Err(format!(
                "`{text}`: separate the schemas with commas: \"{{target}}, public\""
            ));
        }
        if entries[0] != Self::TARGET {
            return Err(format!(
                "`{text}` does not start with {{target}}: the target's own schema comes first, \
                 so that what migrations create without a schema (and the history) lands there; \
                 write e.g. \"{{target}}, public\""
            ));
        }
        let mut after: Vec<String> = Vec::new();
        for entry in &entries[1..] {
            if *entry == Self::TARGET {
                return Err(format!(
                    "`{text}` names {{target}} twice; name it once, first"
                ));
            }
            if !crate::config::is_plain_identifier(entry, 63) {
                return Err(format!(
                    "`{text}`: `{entry}` is not a schema name (letters, digits and _, as the \
                     catalog spells it); separate schemas with commas: \"{{target}}, public\""
                ));
            }
            if !after.iter().any(|a| a == entry) {
                after.push(entry.to_string());
            }
        }
        Ok(SearchPath { after })
    }

    /// The schemas of `target`'s sessions, in order: `target`, then the shared ones (a shared
    /// schema that is the target itself is left out).
    pub fn schemas(&self, target: &str) -> Vec<String> {
        std::iter::once(target.to_string())
            .chain(self.after.iter().filter(|s| *s != target).cloned())
            .collect()
    }
}

impl fmt::Display for SearchPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::TARGET)?;
        for schema in &self.after {
            write!(f, ", {schema}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_a_fleet_stably_and_completely() {
        let names: Vec<String> = (0..3000).map(|i| format!("tenant_{i}")).collect();
        let shards: Vec<Shard> = (1..=3).map(|i| Shard { index: i, count: 3 }).collect();
        for name in &names {
            let owners = shards.iter().filter(|s| s.holds(name)).count();
            assert_eq!(owners, 1, "{name} belongs to exactly one shard");
        }
        for shard in &shards {
            let mine = names.iter().filter(|n| shard.holds(n)).count();
            assert!((900..1100).contains(&mine), "shard {shard}: {mine} of 3000");
        }
        assert_eq!(Shard::parse(" 3/3 ").unwrap(), shards[2]);
        for bad in ["0/3", "4/3", "1/0", "x/3", "3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
