//! The settings' flags, made from the library's table of settings (`dirthara::cli_support::SETTINGS`):
//! one flag per row, named, documented and parsed as the row says, so a new setting is a flag
//! without a line here.

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use dirthara::cli_support::{FileForm, SettingRow, SETTINGS};

/// The settings given as flags, in the table's order, each with its text as written.
#[derive(Debug, Clone, Default)]
pub(crate) struct SettingFlags(pub Vec<(&'static SettingRow, String)>);

/// The flag of `row`: `--lock-wait WAIT`, `--strict`.
fn flag(row: &'static SettingRow) -> Arg {
    let help = format!("{} [default: {}]", row.doc, row.default);
    let arg = Arg::new(row.key).long(row.flag).global(true).help(help);
    match row.file_form {
        FileForm::Switch => arg.action(ArgAction::SetTrue),
        _ if !row.values.is_empty() => arg
            .value_name(row.value_name)
            .value_parser(PossibleValuesParser::new(row.values)),
        _ => arg
            .value_name(row.value_name)
            .value_parser(move |text: &str| {
                // Text that is no value of the setting is a usage error (exit 2); a value the
                // setting's checks refuse (a lease too short) is a CONFIG_ERROR naming the flag.
                match (row.parses)(text) {
                    true => Ok(text.to_string()),
                    false => Err(format!("expected {}", row.expected.replace('\'', ""))),
                }
            }),
    }
}

impl Args for SettingFlags {
    fn augment_args(command: Command) -> Command {
        SETTINGS
            .iter()
            .fold(command, |command, row| command.arg(flag(row)))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = SETTINGS.iter().filter_map(|row| match row.file_form {
            FileForm::Switch => matches.get_flag(row.key).then(|| (row, "true".to_string())),
            _ => (matches.get_one::<String>(row.key)).map(|text| (row, text.clone())),
        });
        Ok(SettingFlags(given.collect()))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::Cli;

    #[test]
    fn every_setting_is_a_flag_and_a_value_it_cannot_parse_is_a_usage_error() {
        for row in dirthara::cli_support::SETTINGS {
            let long = format!("--{}", row.flag);
            let args: Vec<&str> = match row.file_form {
                dirthara::cli_support::FileForm::Switch => vec!["dirthara", &long, "status"],
                _ => vec![
                    "dirthara",
                    &long,
                    row.default.split(' ').next().unwrap(),
                    "status",
                ],
            };
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{long}: {e}"));
            assert_eq!(cli.global.settings.0.len(), 1, "{long}");
        }
        let error = Cli::try_parse_from(["dirthara", "--lock-ttl", "soon", "status"]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("expected a duration"), "{error}");
    }

    /// The README's configuration section names every setting by its key, its environment
    /// variable and its flag, and `--help` shows each row's help line: a row added to the
    /// table without its documentation fails here.
    #[test]
    fn every_setting_is_documented_where_users_look() {
        let readme = include_str!("../../../README.md");
        let start = readme
            .find("## Configuration")
            .expect("a Configuration section");
        let section = &readme[start..];
        let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
        let cli_reference = &readme[readme.find("## CLI reference").expect("a CLI reference")..];
        let help = <Cli as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        for row in dirthara::cli_support::SETTINGS {
            assert!(
                section.contains(&format!("{} =", row.key)),
                "README: `{} =`",
                row.key
            );
            assert!(section.contains(row.env), "README: {}", row.env);
            assert!(
                cli_reference.contains(&format!("--{}", row.flag)),
                "README: --{}",
                row.flag
            );
            let first_words: String = row
                .doc
                .split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" ");
            assert!(help.contains(&first_words), "--help: {first_words}");
        }
    }
}
