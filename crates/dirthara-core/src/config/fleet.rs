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
    /// Stop *starting* targets after this many failed; `None`: never stop (keep going).
    /// Default `Some(1)`.
    pub max_failures: Option<usize>,
    /// Only the targets of this shard.
    pub shard: Option<Shard>,
    /// Whether a source that names no target passes (an empty list is expected); by default
    /// it is `FLEET_EMPTY`, since a typo in a pattern would otherwise pass on nothing.
    pub allow_empty: bool,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            jobs: 4,
            canary: 0,
            max_failures: Some(1),
            shard: None,
            allow_empty: false,
        }
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
