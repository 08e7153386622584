//! Pairing the steps found on disk into migrations: ups with downs, each step's text and
//! header read, and every inconsistency between the two reported.

use std::collections::BTreeMap;
use std::path::Path;

use super::found::{Findings, Part};
use super::read::read_text;
use crate::commands::{is_blank_commands, parse_commands};
use crate::directives::{parse_directives, Header};
use crate::layout::{empty_up, Layout};
use crate::migration::{
    DownStep, DownSteps, LazyChecksum, Migration, ParsedSteps, StepFormat, StepSource,
    DEFAULT_CONNECTION,
};
use crate::names::Role;

/// Groups parts by version, pairs ups with downs, and reports every inconsistency.
pub(super) fn assemble(
    parts: Vec<Part>,
    downs: DownSteps,
    findings: &mut Findings,
) -> Vec<Migration> {
    let (repeatables, parts): (Vec<Part>, Vec<Part>) =
        parts.into_iter().partition(|p| p.repeatable);
    let (baselines, parts): (Vec<Part>, Vec<Part>) = parts.into_iter().partition(|p| p.baseline);
    let mut by_version: BTreeMap<i64, (Option<Part>, Option<Part>)> = BTreeMap::new();
    for part in parts {
        let slot = by_version.entry(part.version).or_default();
        let place = match part.role {
            Role::Up | Role::UpOnly => &mut slot.0,
            Role::Down => &mut slot.1,
        };
        // An up and a down step of one version are one migration whatever their names, as
        // golang-migrate (whose naming dirthara's is) and Flyway pair them: by version alone
        // (`30_add_x.up.sql` with `30_drop_x.down.sql`). Two ups, or two downs, clash.
        if let Some(existing) = place.as_ref() {
            let reason = duplicate_version(part.version, &existing.path, &part.path);
            findings.problem(&part.path, reason);
            continue;
        }
        *place = Some(part);
    }

    let mut migrations = Vec::with_capacity(by_version.len());
    for (version, pair) in by_version {
        let (up, down) = match pair {
            (Some(up), down) => (up, down),
            (None, Some(down)) => {
                findings.problem(&down.path, down_without_up(version, &down));
                continue;
            }
            (None, None) => continue,
        };
        if let Some(migration) = build(version, up, down, downs, findings) {
            migrations.push(migration);
        }
    }
    migrations.extend(assemble_baselines(baselines, downs, findings));
    migrations.extend(assemble_repeatables(repeatables, downs, findings));
    migrations
}

/// The baseline migrations, in version order; one version twice clashes. Each names the
/// versions it stands for, none above its own.
fn assemble_baselines(
    parts: Vec<Part>,
    downs: DownSteps,
    findings: &mut Findings,
) -> Vec<Migration> {
    let clash = |p: &Part| format!("two baseline migrations have version {}", p.version);
    let by_version = unique_by(parts, |p| p.version, findings, clash, "keep one of them");
    let mut baselines = Vec::new();
    for (version, part) in by_version {
        let path = part.path.clone();
        let Some(migration) = build(version, part, None, downs, findings) else {
            continue;
        };
        match &migration.squashes {
            None => findings.problem(
                &path,
                "a baseline migration names the versions it stands for in its first lines \
                 (`-- dirthara:squashes 1,2,3`, or `\"squashes\": [1, 2, 3]` in JSON); write it \
                 with `dirthara squash --to <version>`",
            ),
            Some(squashed) if squashed.last().is_some_and(|v| *v > version) => findings.problem(
                &path,
                format!(
                    "stands for version {} (`squashes`), above its own version {version}; a \
                     baseline stands for migrations up to its version",
                    squashed.last().unwrap_or(&version)
                ),
            ),
            Some(_) => baselines.push(migration),
        }
    }
    baselines
}

/// The repeatable migrations, in name order (the order they are applied in); one name in
/// two directories clashes, as a version does.
fn assemble_repeatables(
    parts: Vec<Part>,
    downs: DownSteps,
    findings: &mut Findings,
) -> Vec<Migration> {
    let clash = |p: &Part| format!("two repeatable migrations are named `{}`", p.name);
    let by_name = unique_by(
        parts,
        |p| p.name.clone(),
        findings,
        clash,
        "rename one of them",
    );
    (by_name.into_values())
        .filter_map(|part| build(0, part, None, downs, findings))
        .collect()
}

/// The parts by `key`, each key once: a second part with a key is reported (`clash` says
/// what the two share, `fix` what to do) and left out.
fn unique_by<K: Ord>(
    parts: Vec<Part>,
    key: impl Fn(&Part) -> K,
    findings: &mut Findings,
    clash: impl Fn(&Part) -> String,
    fix: &str,
) -> BTreeMap<K, Part> {
    let mut by_key: BTreeMap<K, Part> = BTreeMap::new();
    for part in parts {
        if let Some(existing) = by_key.get(&key(&part)) {
            let reason = format!(
                "{}: `{}` and `{}`; {fix}",
                clash(&part),
                existing.path.display(),
                part.path.display()
            );
            findings.problem(&part.path, reason);
            continue;
        }
        by_key.insert(key(&part), part);
    }
    by_key
}

/// One migration from its up and optional down part, or `None` after reporting why not.
fn build(
    version: i64,
    mut up: Part,
    mut down: Option<Part>,
    downs: DownSteps,
    findings: &mut Findings,
) -> Option<Migration> {
    let before = findings.problems.len();
    if let Some(down) = &down {
        if up.role == Role::UpOnly {
            findings.problem(
                &down.path,
                format!(
                    "`{}` is an up-only migration; rename it to `{version}_{}.up.sql` to pair it \
                     with this down step",
                    file_name(&up.path),
                    up.name
                ),
            );
        } else if down.format != up.format {
            findings.problem(
                &down.path,
                format!(
                    "its up step `{}` is written in another format; both steps of a migration \
                     are `.sql` or both are `.json`",
                    file_name(&up.path)
                ),
            );
        }
    }
    let up_text = read_step(&mut up, false, findings);
    let down_text = (down.as_mut())
        .filter(|_| downs == DownSteps::Read)
        .and_then(|d| read_step(d, true, findings));
    let (up_text, up_header) = up_text?;
    let mut migration = Migration {
        version,
        checksum: LazyChecksum::default(),
        up: up_text,
        down: None,
        down_unread: downs == DownSteps::Skip,
        transactional: !up_header.no_transaction,
        connection: (up_header.connection.clone())
            .unwrap_or_else(|| DEFAULT_CONNECTION.to_string()),
        origin: up.path.display().to_string(),
        up_source: source_of(&up),
        table_lock_timeout: up_header.table_lock_timeout.clone(),
        allow_blocking: up_header.allow_blocking.clone(),
        format: up.format,
        name: up.name,
        own_transaction: None,
        layout: up.layout,
        parsed: ParsedSteps::default(),
        repeatable: up.repeatable,
        squashes: None,
    };
    match (up.baseline, up_header.squashes.clone()) {
        (true, squashes) => migration.squashes = squashes,
        (false, Some(_)) => findings.problem(
            &up.path,
            "declares the versions it stands for (`squashes`), which only a baseline migration \
             `B<version>__<name>.sql` written by `dirthara squash` does; remove the line",
        ),
        (false, None) => {}
    }
    if let (Some(down), Some((down_text, down_header))) = (&down, down_text) {
        if down_header.connection.is_some() && down_header.connection != up_header.connection {
            findings.problem(
                &down.path,
                format!(
                    "declares connection `{}` but its up step runs on `{}`; both steps of a \
                     migration run on one connection",
                    down_header.connection.as_deref().unwrap_or_default(),
                    migration.connection
                ),
            );
        }
        migration.down = Some(DownStep {
            transactional: !down_header.no_transaction,
            source: source_of(down),
            table_lock_timeout: down_header.table_lock_timeout.clone(),
            allow_blocking: down_header.allow_blocking.clone(),
            ..DownStep::new(down_text)
        });
    }
    (findings.problems.len() == before).then_some(migration)
}

/// Where a part's text is in its file.
fn source_of(part: &Part) -> StepSource {
    StepSource {
        file: part.path.display().to_string(),
        first_line: part.lines.0,
        dropped_lines: part.lines.1.clone(),
        envsub: part.envsub.clone(),
    }
}

/// A down step alone, and the up step to add, in its layout's words: a Flyway undo file
/// `U0002__x.sql` wants `V0002__x.sql` (the version spelled as the file spells it).
fn down_without_up(version: i64, down: &Part) -> String {
    let name = file_name(&down.path);
    let up = match down.layout.map(|l| l.layout) {
        Some(Layout::Flyway) => format!("V{}", name.get(1..).unwrap_or_default()),
        _ => {
            let ext = match down.format {
                StepFormat::MongoCommands => "json",
                _ => "sql",
            };
            format!("{version}_{}.up.{ext}", down.name)
        }
    };
    format!("a down step without its up step; add `{up}` beside it or remove it")
}

fn duplicate_version(version: i64, first: &Path, second: &Path) -> String {
    format!(
        "two migrations have version {version}: `{}` and `{}`; give one of them a new version",
        first.display(),
        second.display()
    )
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A step's text and header, or `None` after reporting why not. A blank down step (empty,
/// only comments, or `[]`) is a deliberate "reverses nothing"; a blank up step is an error.
fn read_step(part: &mut Part, down: bool, findings: &mut Findings) -> Option<(String, Header)> {
    let text = match part.text.take().map_or_else(|| read_text(&part.path), Ok) {
        Ok(text) => text,
        Err(reason) => {
            findings.problem(&part.path, reason);
            return None;
        }
    };
    let layout = part.layout.map(|l| l.layout);
    match step_header(part.format, &text, down, layout) {
        Ok(mut header) => {
            header.no_transaction |= part.no_transaction;
            Some((text, header))
        }
        Err(reason) => {
            findings.problem(&part.path, reason);
            None
        }
    }
}

/// A step's header: SQL directives, or what a JSON command file declares about itself.
/// An up step that sends nothing is refused here, where every layout's up step passes.
pub(crate) fn step_header(
    format: StepFormat,
    text: &str,
    down: bool,
    layout: Option<Layout>,
) -> std::result::Result<Header, String> {
    if !down && sends_nothing(format, text) {
        return Err(empty_up(layout));
    }
    match format {
        StepFormat::Sql => {
            let mut header = parse_directives(text)?;
            // sqlx's marker: a first line `-- no-transaction` runs the file outside one.
            header.no_transaction |= matches!(layout, None | Some(Layout::Plain))
                && text
                    .trim_start_matches('\u{feff}')
                    .starts_with("-- no-transaction");
            Ok(header)
        }
        StepFormat::Rust => parse_directives(text),
        StepFormat::MongoCommands if down && is_blank_commands(text) => Ok(Header::default()),
        StepFormat::MongoCommands => {
            let commands = parse_commands(text)?;
            Ok(Header {
                no_transaction: !commands.transaction,
                connection: commands.connection,
                table_lock_timeout: None,
                allow_blocking: None,
                // JSON has no literals to keep apart: its `${…}` are all in strings.
                placeholders: commands
                    .placeholders
                    .then_some(crate::placeholders::Scope::Everywhere),
                squashes: commands.squashes,
            })
        }
    }
}

/// Whether a step sends nothing whichever database reads it: SQL that is only whitespace,
/// comments and `;` to PostgreSQL, MySQL and SQLite alike (the runner, which knows the
/// database, also refuses what is blank to that database alone, such as MySQL `#` comments),
/// or JSON with no commands.
pub(crate) fn sends_nothing(format: StepFormat, text: &str) -> bool {
    use crate::sql::{is_blank, SqlDialect};
    match format {
        StepFormat::Sql => [SqlDialect::Postgres, SqlDialect::MySql, SqlDialect::Sqlite]
            .into_iter()
            .all(|dialect| is_blank(text, dialect)),
        StepFormat::MongoCommands => is_blank_commands(text),
        StepFormat::Rust => false,
    }
}
