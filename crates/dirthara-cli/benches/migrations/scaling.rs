//! e. The no-op as the history grows: `migrate` with 1 applied against 1,000 applied, as CLI
//! processes, alternated so the machine's drift hits both alike (target: 1,000 applied costs at
//! most 1.2x of 1 applied — a no-op compares the history's digest, not its records).
//! f. Round trips per migration, counted on the wire by a proxy: 200 migrations applied, less
//! a no-op run's requests, over 200.

use std::path::Path;

use super::round_trips::{CountingProxy, Wire};
use super::{
    cli, median, ms, run_cli, trivial_migrations, unmeasured, BenchResult, Server, Table, TestDb,
};

const ROUND_TRIP_MIGRATIONS: i64 = 200;
const ROUND_TRIP_REPS: usize = 3;

pub(crate) async fn noop_by_history(
    server: Server,
    bin: &Path,
    table: &mut Table,
) -> BenchResult<()> {
    let small_db = TestDb::try_create(server).await?;
    let large_db = TestDb::try_create(server).await?;
    let small = trivial_migrations(1, true);
    let large = trivial_migrations(super::TRIVIAL, true);
    for (db, dir) in [(&small_db, small.path()), (&large_db, large.path())] {
        run_cli(cli(bin, &db.url, dir, &["-q", "migrate"])).await?;
    }
    let (mut one, mut thousand) = (vec![], vec![]);
    for rep in 1..=2 * super::NOOP_REPS {
        eprintln!("[e] {}: no-op by history size, rep {rep}", server.label());
        let (elapsed, _) =
            run_cli(cli(bin, &small_db.url, small.path(), &["-q", "migrate"])).await?;
        one.push(ms(elapsed));
        let (elapsed, _) =
            run_cli(cli(bin, &large_db.url, large.path(), &["-q", "migrate"])).await?;
        thousand.push(ms(elapsed));
    }
    let ratio = median(&thousand) / median(&one);
    // What reading the files alone costs: `cat` of the up files, 1,000 against 1 (a no-op
    // must read each one, to compare its checksum with the history's).
    let (cat_one, cat_thousand) = (
        read_floor(small.path(), 2 * super::NOOP_REPS)?,
        read_floor(large.path(), 2 * super::NOOP_REPS)?,
    );
    let reading = median(&cat_thousand) - median(&cat_one);
    let gap = median(&thousand) - median(&one);
    table.add(
        format!("e. no-op, 1 applied, {}: CLI", server.label()),
        &one,
        vec![],
    );
    table.add(
        format!("e. floor: cat of the 1 / {} up files", super::TRIVIAL),
        &cat_thousand,
        vec![format!(
            "{:.1} ms more than cat of 1 file ({:.1} ms), against the no-op's {:.1} ms more",
            reading,
            median(&cat_one),
            gap
        )],
    );
    table.add(
        format!(
            "e. no-op, {} applied, {}: CLI",
            super::TRIVIAL,
            server.label()
        ),
        &thousand,
        vec![format!(
            "{ratio:.2}x the no-op with 1 applied (target <= 1.2x), runs alternated"
        )],
    );
    Ok(())
}

/// `cat` of every up file in `dir`, `reps` times: what a process pays to read them.
fn read_floor(dir: &Path, reps: usize) -> BenchResult<Vec<f64>> {
    let mut ups: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.to_string_lossy().ends_with(".up.sql"))
        .collect();
    ups.sort();
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let started = std::time::Instant::now();
        let status = std::process::Command::new("cat")
            .args(&ups)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cat: {e}"))?;
        if !status.success() {
            return Err(format!("cat failed: {status}"));
        }
        times.push(ms(started.elapsed()));
    }
    Ok(times)
}

pub(crate) async fn round_trips(server: Server, bin: &Path, table: &mut Table) -> BenchResult<()> {
    let (wire, no_tls) = match server {
        Server::Postgres => (Wire::Postgres, "sslmode=disable"),
        Server::Mysql => (Wire::Mysql, "ssl-mode=DISABLED"),
        Server::Mongo => return Err(unmeasured(server)),
    };
    let dir = trivial_migrations(ROUND_TRIP_MIGRATIONS, true);
    let mut per_migration = vec![];
    let mut noop_requests = 0;
    for rep in 1..=ROUND_TRIP_REPS {
        eprintln!(
            "[f] {}: round trips, rep {rep}/{ROUND_TRIP_REPS}",
            server.label()
        );
        let db = TestDb::try_create(server).await?;
        let proxy = CountingProxy::start(wire, db.host_port()).await?;
        let url = through(&db.url, &db.host_port(), proxy.port, no_tls);
        run_cli(cli(bin, &url, dir.path(), &["-q", "migrate"])).await?;
        let applied = proxy.requests();
        run_cli(cli(bin, &url, dir.path(), &["-q", "migrate"])).await?;
        let noop = proxy.requests() - applied;
        noop_requests = noop;
        per_migration.push((applied - noop) as f64 / ROUND_TRIP_MIGRATIONS as f64);
    }
    let target = match server {
        Server::Mysql => "target <= 3",
        _ => "one message per migration, with its record",
    };
    table.add(
        format!("f. round trips per migration, {}", server.label()),
        &per_migration,
        vec![format!(
            "requests counted on the wire ({ROUND_TRIP_MIGRATIONS} applied, less a no-op run's \
             {noop_requests}); {target}"
        )],
    );
    Ok(())
}

/// `url` reaching the server through the proxy on `port`, without TLS.
fn through(url: &str, host_port: &str, port: u16, no_tls: &str) -> String {
    let url = url.replacen(host_port, &format!("127.0.0.1:{port}"), 1);
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joiner}{no_tls}")
}
