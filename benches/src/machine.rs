//! What the figures were measured on, printed before any table.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn report(dir: &Path, quick: bool, command: &str) {
    println!("## Run");
    println!();
    println!("| | |");
    println!("|---|---|");
    println!("| command | `{command}` |");
    println!(
        "| mode | {} |",
        if quick {
            "quick (smoke test; figures are rough)"
        } else {
            "full"
        }
    );
    println!("| date (UTC) | {} |", utc_now());
    println!("| cores (`nproc`) | {} |", cores());
    println!("| CPU | {} |", cpu_model());
    println!("| kernel | {} |", read_trim("/proc/sys/kernel/osrelease"));
    println!("| rustc | {} |", env!("BENCH_RUSTC_VERSION"));
    println!(
        "| build | {} |",
        if cfg!(debug_assertions) {
            "DEBUG (figures meaningless: use --release)"
        } else {
            "release"
        }
    );
    println!("| SQLite | {} (bundled by rusqlite) |", rusqlite::version());
    println!(
        "| database files | `{}` on {} |",
        dir.display(),
        mount_of(dir)
    );
    println!("| load average at start | {} |", load_average());
    println!();
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// 1, 5 and 15 minute load averages: other jobs on a shared machine show here.
pub fn load_average() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".into(), |s| s.trim().to_owned())
}

/// The device and file system holding `dir` (longest matching mount point),
/// so a reader can tell a real disk from tmpfs.
fn mount_of(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.next()?, f.next()?))
        })
        .filter(|(_, point, _)| dir.starts_with(point))
        .max_by_key(|(_, point, _)| point.len())
        .map_or_else(
            || "unknown mount".into(),
            |(dev, point, fs)| format!("`{dev}` ({fs}, mounted at `{point}`)"),
        )
}

fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3_600,
        rem % 3_600 / 60
    )
}

/// Howard Hinnant's days-to-civil algorithm: avoids a date crate for one line.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(19_782), (2024, 2, 29));
    }
}
