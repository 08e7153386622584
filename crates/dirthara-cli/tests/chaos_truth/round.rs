//! One chaos round: runners started, killed and restarted around for a window; then the
//! first checkpoint, the dirty records resolved by looking at their effects, a clean run,
//! and the last checkpoint. The violations found are the result.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::runners::{End, Runner, RunnerRecord};
use super::snapshot::{self, Snapshot};
use super::verdict::{self, Rule, Violation};
use super::{workload, Kind, Settings, Target};
use crate::support::{dirthara, text, wait_with_watchdog};

/// What a round found, and what happened in it.
#[derive(Debug, Default)]
pub(crate) struct RoundReport {
    pub violations: Vec<Violation>,
    pub tally: Tally,
}

/// Counts over one round or many.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub rounds: u64,
    pub kills: u64,
    pub restarts: u64,
    /// How the round's runners ended: `0`, an error code, `killed`, `abnormal`.
    pub exits: BTreeMap<String, u64>,
    /// Migrations applied / pending / dirty at the first checkpoint.
    pub applied: u64,
    pub pending: u64,
    pub dirty: u64,
    pub resolved_applied: u64,
    pub resolved_rolled_back: u64,
    /// Executions the migrations counted, and attempts cut off by a kill or restart.
    pub executions: u64,
    pub cut_off: u64,
}

impl Tally {
    pub(crate) fn add(&mut self, other: &Tally) {
        self.rounds += other.rounds;
        self.kills += other.kills;
        self.restarts += other.restarts;
        for (k, n) in &other.exits {
            *self.exits.entry(k.clone()).or_default() += n;
        }
        self.applied += other.applied;
        self.pending += other.pending;
        self.dirty += other.dirty;
        self.resolved_applied += other.resolved_applied;
        self.resolved_rolled_back += other.resolved_rolled_back;
        self.executions += other.executions;
        self.cut_off += other.cut_off;
    }
}

fn fastrand() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The lease flags of this backend's runners (a lease at the 5 s minimum, so a killed holder
/// blocks only briefly), or none for a session lock.
fn lease(kind: Kind) -> &'static [&'static str] {
    if kind.leases() {
        &["--locking", "lease", "--lock-ttl", "5s"]
    } else {
        &[]
    }
}

/// The lease flags of the checker's own resolve and clean runs, which nobody kills: a lease
/// long enough that a loaded machine cannot make it lapse under them (the runners' 5 s lease
/// can, by design: a stalled holder loses it).
fn patient_lease(kind: Kind) -> &'static [&'static str] {
    if kind.leases() {
        &["--locking", "lease", "--lock-ttl", "120s"]
    } else {
        &[]
    }
}

/// Runs one round on `target`; `None` when its server is missing (the test is skipped).
pub(crate) async fn round(target: &mut Target, settings: &Settings) -> Option<RoundReport> {
    let kind = target.kind;
    let place = target.place().await?;
    let url = place.url();
    let n = settings.migrations;
    workload::prepare(kind, &place, n).await;
    let m = workload::migrations(kind, n);
    let mut report = RoundReport::default();
    let tally = &mut report.tally;
    tally.rounds = 1;

    let mut next_id = 0;
    let mut spawn_runner = || {
        let id = next_id;
        next_id += 1;
        // On a lease backend every third runner takes the lease's default: no wait, so
        // MIGRATION_LOCK_HELD at once while another holds it.
        let lease_without_wait = kind.leases() && id % 3 == 2;
        let mut args = vec!["migrate", "--output", "ndjson", "--connect-timeout", "30s"];
        if !lease_without_wait {
            args.extend(["--lock-wait", "60s"]);
        }
        args.extend_from_slice(lease(kind));
        let mut cmd = dirthara(&url, m.path(), &args);
        cmd.envs(settings.runner_env.iter().map(|(k, v)| (k, v)));
        Runner::spawn(id, cmd, lease_without_wait)
    };

    let mut records: Vec<RunnerRecord> = Vec::new();
    let mut restart_at = target
        .restarts()
        .then(|| settings.window.mul_f64(0.2 + fastrand() * 0.6));
    let mut runners: Vec<Runner> = (0..settings.runners).map(|_| spawn_runner()).collect();
    let started = Instant::now();
    while started.elapsed() < settings.window {
        tokio::time::sleep(Duration::from_millis(100 + (fastrand() * 500.0) as u64)).await;
        let mut alive = Vec::new();
        for mut runner in runners.drain(..) {
            match runner.try_finish() {
                Some(_) => records.push(runner.kill()),
                None => alive.push(runner),
            }
        }
        runners = alive;
        if !runners.is_empty() {
            let victim = runners.swap_remove((fastrand() * runners.len() as f64) as usize);
            records.push(victim.kill());
        }
        while runners.len() < settings.runners {
            runners.push(spawn_runner());
        }
        if restart_at.is_some_and(|at| started.elapsed() >= at) {
            restart_at = None;
            // Those that ended before the restart are not its victims.
            let mut alive = Vec::new();
            for mut runner in runners.drain(..) {
                match runner.try_finish() {
                    Some(_) => records.push(runner.kill()),
                    None => alive.push(runner),
                }
            }
            runners = alive;
            for runner in &mut runners {
                runner.hit_by_restart = true;
            }
            target.restart();
            tally.restarts += 1;
        }
    }
    records.extend(runners.into_iter().map(Runner::kill));
    for r in &records {
        let key = match r.end {
            End::Exited(0) => "0".to_string(),
            End::Exited(_) => r.error_code().unwrap_or_else(|| "no code".into()),
            End::Killed => "killed".into(),
            End::Abnormal => "abnormal".into(),
        };
        *tally.exits.entry(key).or_default() += 1;
        tally.kills += u64::from(r.end == End::Killed);
    }

    // The first checkpoint: once every runner's session has ended, one snapshot.
    let violations = &mut report.violations;
    let pids: Vec<u32> = records.iter().map(|r| r.pid).collect();
    if let Err(e) = snapshot::wait_for_sessions_to_end(kind, &place, &pids).await {
        violations.push(Violation::new(Rule::SessionsLingering, e));
        return Some(report);
    }
    let first = snapshot::read(kind, &place).await;
    violations.extend(verdict::truth(&first, n, None));
    violations.extend(verdict::exits(&records, &first));
    violations.extend(verdict::reports(&records, &first, kind == Kind::Mysql));
    let tally = &mut report.tally;
    for v in 1..=n {
        match first.state(v) {
            "applied" => tally.applied += 1,
            "running" => tally.dirty += 1,
            _ => tally.pending += 1,
        }
    }

    // Resolve each dirty record by looking: the marker exists, so the step ran; else not.
    let mut resolved_applied = BTreeSet::new();
    for (&v, state) in &first.states {
        if state != "running" {
            continue;
        }
        let verdict = if first.markers.contains(&v) {
            resolved_applied.insert(v);
            tally.resolved_applied += 1;
            "--applied"
        } else {
            tally.resolved_rolled_back += 1;
            "--rolled-back"
        };
        let version = v.to_string();
        let mut args = vec!["resolve", version.as_str(), verdict, "--lock-wait", "60s"];
        args.extend_from_slice(patient_lease(kind));
        let out = wait_with_watchdog(
            crate::support::spawn(dirthara(&url, m.path(), &args)),
            Duration::from_secs(90),
        );
        if !out.status.success() {
            report.violations.push(Violation::new(
                Rule::CleanUpFailed,
                format!("resolve {v} {verdict}: {:?}", text(&out)),
            ));
            return Some(report);
        }
    }

    // A clean run finishes the work; its steps count with the round's for the executions.
    let mut args = vec!["migrate", "--output", "ndjson", "--lock-wait", "60s"];
    args.extend_from_slice(patient_lease(kind));
    let clean = Runner::spawn(usize::MAX, dirthara(&url, m.path(), &args), false)
        .finish(Duration::from_secs(120));
    if clean.end != End::Exited(0) {
        report.violations.push(Violation::new(
            Rule::CleanUpFailed,
            format!(
                "the clean run failed: {}\n{}",
                clean.describe(),
                clean.stderr
            ),
        ));
        return Some(report);
    }
    if let Err(e) = snapshot::wait_for_sessions_to_end(kind, &place, &[clean.pid]).await {
        report
            .violations
            .push(Violation::new(Rule::SessionsLingering, e));
        return Some(report);
    }
    let last: Snapshot = snapshot::read(kind, &place).await;
    let violations = &mut report.violations;
    violations.extend(verdict::truth(&last, n, Some(&resolved_applied)));
    violations.extend(verdict::reports(std::slice::from_ref(&clean), &last, false));
    records.push(clean);
    violations.extend(verdict::executions(&records, &last, n));
    let tally = &mut report.tally;
    if let Some(executions) = &last.executions {
        tally.executions += executions.values().sum::<u64>();
    }
    tally.cut_off += records
        .iter()
        .filter(|r| r.unfinished().is_some() && (r.end == End::Killed || r.hit_by_restart))
        .count() as u64;
    Some(report)
}
