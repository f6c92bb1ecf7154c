//! What the bench reads off a run: percentiles, CPU and I/O from `/proc`, peak memory.

use std::time::Duration;

pub(crate) fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// What a process has used so far: CPU time (user and system, every thread, in the kernel's
/// ticks of 10 ms), write calls (`write`, `pwrite`, `writev`: sockets and files), the bytes
/// they wrote and its threads' context switches, from `/proc/<pid>/stat`, `/proc/<pid>/io` and
/// each `/proc/<pid>/task/*/status`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Usage {
    pub(crate) cpu: Duration,
    pub(crate) write_calls: u64,
    pub(crate) written: u64,
    pub(crate) switches: u64,
}

impl Usage {
    pub(crate) fn of(pid: &str) -> Usage {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command's name (which may hold spaces) in parentheses.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let ticks = |n: usize| fields.get(n).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        let counter = |name: &str| {
            io.lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0)
        };
        // Every thread's context switches, voluntary or not, the exited ones' lost with them
        // (a blocking pool's idle threads live for seconds).
        let switches = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|task| {
                let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
                status
                    .lines()
                    .filter(|line| line.contains("ctxt_switches:"))
                    .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .sum::<u64>()
            })
            .sum();
        Usage {
            switches,
            // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
            cpu: Duration::from_millis((ticks(11) + ticks(12)) * 10),
            write_calls: counter("syscw:"),
            written: counter("wchar:"),
        }
    }

    pub(crate) fn own() -> Usage {
        Usage::of("self")
    }

    /// What was used since `before`, per one of `count` things done.
    pub(crate) fn each_since(&self, before: Usage, count: usize) -> (f64, f64, f64, f64) {
        let n = count as f64;
        (
            (self.cpu - before.cpu).as_secs_f64() * 1e6 / n,
            (self.write_calls - before.write_calls) as f64 / n,
            (self.written - before.written) as f64 / n,
            self.switches.saturating_sub(before.switches) as f64 / n,
        )
    }
}

/// Peak resident memory of this process (server, pipeline and clients together).
pub(crate) fn peak_memory_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The peak resident memory of this process so far (KiB): the server runs in it.
pub(crate) fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
