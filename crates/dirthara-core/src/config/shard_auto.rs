//! `--shard auto`: the shard a runner takes, read from what the orchestrator sets in its
//! environment (a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`, Nomad's
//! `NOMAD_ALLOC_INDEX`, both counted from 0) and the count from `DIRTHARA_SHARD_COUNT` or
//! `auto/N`, so a manifest needs no shell to turn a 0-based index into dirthara's 1-based
//! `I/N`.
//!
//! Reading the text ([`ShardSpec::parse`]) and resolving it against the environment
//! ([`ShardSpec::resolve`]) are separate and pure: the environment is passed in, never read
//! here, so every refusal is tested without touching the process.

use std::fmt;

use super::fleet::Shard;
use crate::error::{Error, Result};

/// The variables that give a runner's index, counted from 0, in the order they are read: a
/// Kubernetes Indexed Job's, then Nomad's.
pub const SHARD_INDEX_VARIABLES: [&str; 2] = ["JOB_COMPLETION_INDEX", "NOMAD_ALLOC_INDEX"];

/// How many shards `--shard auto` splits the fleet into, where `auto/N` does not say: the
/// Job's `completions` (Kubernetes does not pass it to the pod).
pub const SHARD_COUNT_VARIABLE: &str = "DIRTHARA_SHARD_COUNT";

/// A shard as asked for: `I/N`, or `auto` / `auto/N` to be resolved from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardSpec {
    /// `I/N`, counted from 1.
    Fixed(Shard),
    /// `auto` (the count from [`SHARD_COUNT_VARIABLE`]) or `auto/N`.
    Auto {
        /// `N` of `auto/N`.
        count: Option<u32>,
    },
}

impl ShardSpec {
    /// `I/N` (1 <= I <= N), `auto` or `auto/N` (N >= 1). Only the text is read here; what
    /// `auto` means comes from [`ShardSpec::resolve`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara_core::config::ShardSpec;
    /// assert_eq!(ShardSpec::parse("auto/4"), Ok(ShardSpec::Auto { count: Some(4) }));
    /// assert!(matches!(ShardSpec::parse("2/3"), Ok(ShardSpec::Fixed(_))));
    /// assert!(ShardSpec::parse("auto/0").is_err());
    /// ```
    pub fn parse(text: &str) -> std::result::Result<ShardSpec, String> {
        let trimmed = text.trim();
        let (head, count) = match trimmed.split_once('/') {
            Some((head, count)) => (head.trim(), Some(count.trim())),
            None => (trimmed, None),
        };
        if !head.eq_ignore_ascii_case("auto") {
            return Shard::parse(text).map(ShardSpec::Fixed).map_err(|_| {
                format!(
                    "`{text}` is not a shard: write I/N, shard I of N counted from 1 (1/3, 2/3, \
                     3/3), or auto in a Kubernetes Indexed Job or a Nomad job (the index from \
                     JOB_COMPLETION_INDEX or NOMAD_ALLOC_INDEX, counted from 0; the count from \
                     {SHARD_COUNT_VARIABLE}, or auto/N)"
                )
            });
        }
        let count =
            match count {
                None => None,
                Some(count) => Some(count.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(
                    || format!("`{text}`: the count of auto/N is a number of shards, 1 or more"),
                )?),
            };
        Ok(ShardSpec::Auto { count })
    }

    /// The shard this runner takes. `Fixed` is itself; `Auto` reads the index from the first
    /// of [`SHARD_INDEX_VARIABLES`] that `env` has (counted from 0, so index 0 is shard 1) and
    /// the count from `auto/N`, else [`SHARD_COUNT_VARIABLE`]. `env` looks a variable up.
    ///
    /// Every refusal is a `CONFIG_ERROR` naming the variable and the fix: no index variable,
    /// no count, an index that is not a whole number or is not below the count.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara_core::config::ShardSpec;
    /// let env = |name: &str| match name {
    ///     "JOB_COMPLETION_INDEX" => Some("0".to_string()),
    ///     "DIRTHARA_SHARD_COUNT" => Some("2".to_string()),
    ///     _ => None,
    /// };
    /// let shard = ShardSpec::parse("auto")?.resolve(env)?;
    /// assert_eq!(shard.to_string(), "1/2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> Result<Shard> {
        let count = match self {
            ShardSpec::Fixed(shard) => return Ok(shard),
            ShardSpec::Auto { count } => count,
        };
        let Some((variable, index)) =
            (SHARD_INDEX_VARIABLES.iter()).find_map(|&name| env(name).map(|value| (name, value)))
        else {
            return Err(Error::config(
                "--shard auto: neither JOB_COMPLETION_INDEX (set in the pods of a Kubernetes Job \
                 with `completionMode: Indexed`) nor NOMAD_ALLOC_INDEX (Nomad) is set; run it in \
                 such a job, or pass --shard I/N",
            ));
        };
        let count = match count {
            Some(count) => count,
            None => count_from(env(SHARD_COUNT_VARIABLE))?,
        };
        let index: u32 = index.trim().parse().map_err(|_| {
            Error::config(format!(
                "--shard auto: {variable} is `{index}`, not a shard index (a whole number \
                 counted from 0, as the orchestrator sets it); check the pod's environment"
            ))
        })?;
        if index >= count {
            return Err(Error::config(format!(
                "--shard auto: {variable} is {index}, but the fleet is split into {count} \
                 shard(s), counted from 0 to {}; set {SHARD_COUNT_VARIABLE} (or auto/N) to the \
                 Job's `completions`",
                count - 1
            )));
        }
        Ok(Shard {
            index: index + 1,
            count,
        })
    }
}

/// The count from [`SHARD_COUNT_VARIABLE`].
fn count_from(value: Option<String>) -> Result<u32> {
    let Some(value) = value else {
        return Err(Error::config(format!(
            "--shard auto: the number of shards is not set; set {SHARD_COUNT_VARIABLE} to the \
             Job's `completions` (Kubernetes does not tell the pod), or pass --shard auto/N"
        )));
    };
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Error::config(format!(
            "--shard auto: {SHARD_COUNT_VARIABLE} is `{value}`, not a number of shards; set it \
             to the Job's `completions`, 1 or more"
        ))
        })
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardSpec::Fixed(shard) => write!(f, "{shard}"),
            ShardSpec::Auto { count: None } => f.write_str("auto"),
            ShardSpec::Auto { count: Some(n) } => write!(f, "auto/{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An environment of exactly `pairs`.
    fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            (pairs.iter())
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    fn resolve(text: &str, pairs: &[(&str, &str)]) -> Result<Shard> {
        ShardSpec::parse(text).unwrap().resolve(env(pairs))
    }

    fn refusal(text: &str, pairs: &[(&str, &str)]) -> String {
        let error = resolve(text, pairs).unwrap_err();
        assert_eq!(error.code(), crate::Code::ConfigError, "{error}");
        error.to_string()
    }

    #[test]
    fn a_zero_based_index_becomes_the_one_based_shard_of_the_count() {
        for (index, shard) in [("0", "1/3"), ("1", "2/3"), ("2", "3/3"), (" 2\n", "3/3")] {
            let found = resolve(
                "auto",
                &[("JOB_COMPLETION_INDEX", index), (SHARD_COUNT_VARIABLE, "3")],
            );
            assert_eq!(found.unwrap().to_string(), shard, "index {index:?}");
        }
        let nomad = resolve("auto/2", &[("NOMAD_ALLOC_INDEX", "1")]).unwrap();
        assert_eq!(nomad, Shard { index: 2, count: 2 });
    }

    #[test]
    fn kubernetes_is_read_before_nomad_and_auto_n_before_the_variable() {
        let both = [
            ("NOMAD_ALLOC_INDEX", "1"),
            ("JOB_COMPLETION_INDEX", "0"),
            (SHARD_COUNT_VARIABLE, "5"),
        ];
        assert_eq!(resolve("auto", &both).unwrap().to_string(), "1/5");
        assert_eq!(resolve("AUTO/ 2", &both).unwrap().to_string(), "1/2");
    }

    #[test]
    fn a_fixed_shard_is_itself_whatever_the_environment() {
        let shard = resolve("2/3", &[("JOB_COMPLETION_INDEX", "0")]).unwrap();
        assert_eq!(shard, Shard { index: 2, count: 3 });
        assert_eq!(resolve("1/1", &[]).unwrap(), Shard { index: 1, count: 1 });
    }

    #[test]
    fn no_index_variable_names_both_and_the_way_out() {
        let error = refusal("auto", &[(SHARD_COUNT_VARIABLE, "2")]);
        assert!(error.contains("neither JOB_COMPLETION_INDEX"), "{error}");
        assert!(error.contains("NOMAD_ALLOC_INDEX"), "{error}");
        assert!(error.contains("--shard I/N"), "{error}");
    }

    #[test]
    fn a_missing_or_bad_count_names_the_variable_and_auto_n() {
        let error = refusal("auto", &[("JOB_COMPLETION_INDEX", "0")]);
        assert!(
            error.contains("set DIRTHARA_SHARD_COUNT to the Job's `completions`"),
            "{error}"
        );
        assert!(error.contains("--shard auto/N"), "{error}");
        for bad in ["0", "two", "", "-1"] {
            let error = refusal(
                "auto",
                &[("JOB_COMPLETION_INDEX", "0"), (SHARD_COUNT_VARIABLE, bad)],
            );
            assert!(
                error.contains(&format!("DIRTHARA_SHARD_COUNT is `{bad}`")),
                "{error}"
            );
        }
    }

    #[test]
    fn an_index_that_is_no_number_or_not_below_the_count_is_refused_naming_the_variable() {
        for bad in ["", "x", "-1", "1.5"] {
            let error = refusal(
                "auto",
                &[("NOMAD_ALLOC_INDEX", bad), (SHARD_COUNT_VARIABLE, "2")],
            );
            assert!(
                error.contains(&format!("NOMAD_ALLOC_INDEX is `{bad}`, not a shard index")),
                "{error}"
            );
        }
        let error = refusal(
            "auto",
            &[("JOB_COMPLETION_INDEX", "2"), (SHARD_COUNT_VARIABLE, "2")],
        );
        assert!(
            error.starts_with(
                "--shard auto: JOB_COMPLETION_INDEX is 2, but the fleet is split into 2 \
                 shard(s), counted from 0 to 1; set DIRTHARA_SHARD_COUNT"
            ),
            "{error}"
        );
        let error = refusal("auto/1", &[("JOB_COMPLETION_INDEX", "1")]);
        assert!(error.contains("JOB_COMPLETION_INDEX is 1"), "{error}");
    }

    #[test]
    fn the_text_is_read_apart_from_the_environment() {
        assert_eq!(
            ShardSpec::parse(" auto "),
            Ok(ShardSpec::Auto { count: None })
        );
        assert_eq!(
            ShardSpec::parse("auto/3"),
            Ok(ShardSpec::Auto { count: Some(3) })
        );
        for bad in ["auto/0", "auto/x", "auto/", "0/3", "4/3", "x", "automatic"] {
            let error = ShardSpec::parse(bad).unwrap_err();
            assert!(error.contains(&format!("`{bad}`")), "{error}");
        }
        assert!(ShardSpec::parse("x").unwrap_err().contains("or auto"));
        for text in ["auto", "auto/3", "2/3"] {
            assert_eq!(ShardSpec::parse(text).unwrap().to_string(), text);
        }
    }
}
