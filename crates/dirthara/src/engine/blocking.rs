//! Before a locked command runs anything: the statements it would run that block the
//! application while they rewrite, scan or index a big table are refused (`BLOCKING_DDL`),
//! with each table's size read from the catalog of the connection it is on. `preview` shows
//! the same findings. The analysis and the policy are `dirthara_core::blocking`'s (pure);
//! this is their I/O.

use super::session::Session;
use crate::backend::Backend;
use crate::blocking::{Judge, Severity, StepFinding, StepLocks};
use crate::config::Config;
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::{EventKind, Warning};
use crate::plan::{Command, Plan};
use crate::report::RunReport;

/// Where the judge finds each step's connection.
pub(super) trait Backends {
    /// The open connection named `name`, opened when first asked for.
    async fn backend(&mut self, name: &str) -> Result<&mut (dyn Backend + 'static)>;
}

impl Backends for Session<'_> {
    async fn backend(&mut self, name: &str) -> Result<&mut (dyn Backend + 'static)> {
        self.connection_named(name).await
    }
}

/// What the judge said of a plan.
pub(super) struct Judged {
    /// Every finding on its steps, each blocking one with its table's size.
    pub findings: Vec<StepFinding>,
    /// The table locks each step takes that the application can queue behind.
    pub step_locks: Vec<StepLocks>,
}

/// Every finding on the steps of `planned`, each blocking one with its table's size as the
/// catalog of its connection has it, and each step's table locks, counted with the
/// partitions and children of the tables it locks.
pub(super) async fn judge_plan(
    config: &Config,
    planned: &Plan<'_>,
    backends: &mut impl Backends,
) -> Result<Judged> {
    let mut judge = Judge::new(&config.lint_disabled, config.allow_blocking);
    for step in &planned.steps {
        if step.reverses_nothing() {
            continue;
        }
        let connection = step.migration.connection.as_str();
        let backend = backends.backend(connection).await?;
        let capabilities = backend.capabilities();
        let version = backend.server_version().map(str::to_string);
        judge.analyze(
            step.migration,
            step.direction,
            connection,
            &capabilities,
            version.as_deref(),
        );
    }
    ask_servers(&mut judge, backends).await?;
    for (connection, tables) in judge.tables() {
        let sizes = backends
            .backend(&connection)
            .await?
            .table_sizes(&tables)
            .await?;
        judge.sized(&connection, &tables, &sizes);
    }
    let limit = config.blocking_table_size;
    let step_locks = judge.step_locks();
    let findings = (judge.findings().into_iter())
        .map(|finding| finding.judged_for_run(limit))
        .collect();
    Ok(Judged {
        findings,
        step_locks,
    })
}

/// Where a connection is available, the server that will run a flagged statement is the
/// oracle: each statement a rule says rewrites or copies its table is rehearsed on an empty
/// copy of it, and a statement the server runs online is no finding.
pub(super) async fn ask_servers(judge: &mut Judge, backends: &mut impl Backends) -> Result<()> {
    // A name no table of the application has, and no other runner's rehearsal either.
    let copy = format!("dirthara_rehearsal_{:08x}", fastrand::u32(..));
    for ask in judge.rehearsals(&copy) {
        let backend = backends.backend(&ask.connection).await?;
        if let Some(blocks) = backend.rehearse(&ask.rehearsal).await {
            judge.rehearsed(ask.finding, blocks);
        }
    }
    Ok(())
}

impl Backends for std::collections::BTreeMap<String, Box<dyn Backend>> {
    async fn backend(&mut self, name: &str) -> Result<&mut (dyn Backend + 'static)> {
        match self.get_mut(name) {
            Some(backend) => Ok(backend.as_mut()),
            None => Err(Error::config(format!("connection `{name}` is not open"))),
        }
    }
}

impl Session<'_> {
    /// Refuses the plan when a step would block the application on a table larger than
    /// `blocking_table_size` (or fail wherever it runs); says so of the smaller ones, and of
    /// those a directive or `--allow-blocking` lets run.
    pub(super) async fn refuse_blocking_ddl(
        &mut self,
        planned: &Plan<'_>,
        command: Command,
        report: &mut RunReport,
    ) -> Result<()> {
        // `fresh` drops every table first: nothing it runs meets a table with rows.
        if command == Command::Fresh || planned.steps.is_empty() {
            return Ok(());
        }
        let config = &self.migrator.config;
        let Judged {
            findings,
            step_locks,
        } = judge_plan(config, planned, self).await?;
        self.step_locks = (step_locks.into_iter())
            .map(|step| ((step.version, step.direction), step.locks))
            .collect();
        let (refused, said): (Vec<StepFinding>, Vec<StepFinding>) =
            findings.into_iter().partition(|f| f.refuses);
        for finding in said.iter().filter(|f| f.severity == Severity::Blocking) {
            let warning = Warning::new(
                Code::BlockingDdl,
                match &finding.allowed {
                    Some(reason) => format!(
                        "migration {} ({}) {} runs a blocking statement, allowed ({reason}): \
                         {finding}",
                        finding.version, finding.name, finding.direction
                    ),
                    None => format!(
                        "migration {} ({}) {}: {finding} (under blocking_table_size)",
                        finding.version, finding.name, finding.direction
                    ),
                },
            );
            self.migrator
                .events
                .emit(EventKind::Warning(warning.clone()));
            report.warnings.push(warning);
        }
        match refused.is_empty() {
            true => Ok(()),
            false => Err(Error::new(ErrorKind::BlockingDdl { findings: refused })),
        }
    }
}
