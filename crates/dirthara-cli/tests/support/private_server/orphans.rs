//! Private instances whose test process died without dropping them (SIGKILL, abort): found
//! by their `owner` file and stopped by the next instance started anywhere on the machine.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::{signal, PREFIX};

/// `<pid> <start time>`: the start time (field 22 of `/proc/<pid>/stat`) tells a live owner
/// from a new process that happens to have an old owner's pid.
pub(super) fn owner_token(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let start_time = after_name.split(' ').nth(19)?;
    Some(format!("{pid} {start_time}"))
}

/// Stops and removes the private instances whose test process died without dropping them.
pub(super) fn reap_orphans() {
    // A chrooted server's instances live in the chroot's /tmp (see `Binaries`).
    let chroot_tmp = std::env::var_os("DIRTHARA_TEST_MYSQL_CHROOT")
        .map(|dir| std::path::PathBuf::from(dir).join("tmp"));
    let entries = [Some(std::env::temp_dir()), chroot_tmp]
        .into_iter()
        .flatten()
        .filter_map(|dir| fs::read_dir(dir).ok())
        .flatten();
    for entry in entries.flatten() {
        let root = entry.path();
        let is_ours = entry.file_name().to_string_lossy().starts_with(PREFIX);
        let Ok(owner) = fs::read_to_string(root.join("owner")) else {
            continue;
        };
        let owner_pid = owner.split(' ').next().and_then(|p| p.parse::<u32>().ok());
        let alive = owner_pid.is_some_and(|pid| owner_token(pid).as_deref() == Some(owner.trim()));
        if !is_ours || alive {
            continue;
        }
        if let Some(pid) = fs::read_to_string(root.join("server.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
        {
            // PostgreSQL's immediate shutdown also ends its backends; mariadbd is one
            // process, and its data is thrown away anyway.
            let postgres = root.to_string_lossy().contains("-postgres-");
            // The data directory as the server was told it: a chrooted one sees only the
            // part inside the chroot, which ends with the instance's own (unique) name.
            let data = Path::new(&entry.file_name()).join("data");
            for sig in [if postgres { "-QUIT" } else { "-KILL" }, "-KILL"] {
                // Only a process started on this very directory (a pid may be reused).
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                if !String::from_utf8_lossy(&cmdline).contains(&*data.to_string_lossy()) {
                    break;
                }
                signal(pid, sig);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        let _ = fs::remove_dir_all(&root);
    }
}
