//! The environment fingerprint stored with every result: host, CPU, kbench build, the GPU
//! once the CUDA backend has opened one, and the host's load over the run.

use crate::record::{Environment, HostLoad, LoadSample};

/// This machine and this kbench build; the device is filled in once a GPU opens.
pub fn detect() -> Environment {
    Environment {
        host: hostname(),
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|id| id.trim().to_string())
            .filter(|id| !id.is_empty()),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
        cpu_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kbench_version: env!("CARGO_PKG_VERSION").into(),
        git_revision: env!("KBENCH_GIT_REVISION").into(),
        command_line: std::env::args().collect(),
        device: None,
        devices: Vec::new(),
        gpu_unavailable: None,
        load: load_sample().map(|start| HostLoad {
            cpu_count: online_cpu_count(),
            start,
            end: None,
            other_busy_cpus: None,
        }),
        cuda_headers: None,
    }
}

/// Reads the host's load counters now (None where /proc cannot be read: not Linux).
pub fn load_sample() -> Option<LoadSample> {
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let (busy_ticks, total_ticks) = cpu_ticks(&stat)?;
    Some(LoadSample {
        loadavg_1m: loadavg.split_whitespace().next()?.parse().ok()?,
        busy_ticks,
        total_ticks,
        own_ticks: own_ticks(),
        cpu_mhz: std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| mean_cpu_mhz(&info)),
    })
}

/// Closes the run's load record: the counters now, and how many CPUs other processes kept busy
/// since it started. Called when the run finishes.
pub fn finish_load(env: &mut Environment) {
    let Some(load) = &mut env.load else { return };
    let Some(end) = load_sample() else { return };
    load.other_busy_cpus = other_busy_cpus(&load.start, &end, load.cpu_count);
    load.end = Some(end);
}

/// Starts the load record again, for a run picked up by `--resume` in a new process (its
/// own-time counters start afresh): the record then covers the resumed part.
pub fn restart_load(env: &mut Environment) {
    env.load = load_sample().map(|start| HostLoad {
        cpu_count: online_cpu_count(),
        start,
        end: None,
        other_busy_cpus: None,
    });
}

/// The CPUs other processes kept busy on average between two samples of one process: the host's
/// busy time less this process's (and its children's), over the wall time (total time / CPUs).
pub fn other_busy_cpus(start: &LoadSample, end: &LoadSample, cpu_count: usize) -> Option<f64> {
    let total = end.total_ticks.checked_sub(start.total_ticks)?;
    let busy = end.busy_ticks.checked_sub(start.busy_ticks)?;
    let own = end.own_ticks.saturating_sub(start.own_ticks);
    if total == 0 {
        return None;
    }
    // Own time is counted per process, host time per CPU tick: they can disagree by a tick or two.
    let other = busy.saturating_sub(own) as f64;
    Some(other / total as f64 * cpu_count.max(1) as f64)
}

/// (busy, total) clock ticks from /proc/stat's aggregate `cpu` line: user nice system idle
/// iowait irq softirq steal (guest time is already inside user).
fn cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = fields.iter().sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// CPU time of this process and its children, waited for or still running (a study's worker
/// lives until the study ends), in clock ticks.
fn own_ticks() -> u64 {
    let me = std::process::id();
    let mut ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| process_ticks(&s))
        .map_or(0, |(_, t)| t);
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return ticks;
    };
    for entry in procs.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if let Some((parent, t)) = process_ticks(&stat) {
            if parent == me {
                ticks += t;
            }
        }
    }
    ticks
}

/// (parent pid, utime + stime + cutime + cstime) from a /proc/PID/stat line. The command name
/// (field 2, in parentheses) may hold spaces: fields are counted after its closing parenthesis.
fn process_ticks(stat: &str) -> Option<(u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
    let parent = fields.get(1)?.parse().ok()?;
    let times: Option<Vec<i64>> = fields.get(11..15)?.iter().map(|f| f.parse().ok()).collect();
    Some((parent, times?.iter().map(|t| (*t).max(0) as u64).sum()))
}

/// The mean of /proc/cpuinfo's `cpu MHz` lines (absent on some architectures and VMs).
fn mean_cpu_mhz(info: &str) -> Option<f64> {
    let mhz: Vec<f64> = info
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
        .collect();
    (!mhz.is_empty()).then(|| mhz.iter().sum::<f64>() / mhz.len() as f64)
}

/// The host's online CPUs, as /proc/stat lists them (`cpu0`, `cpu1`, ...): the load counters
/// cover all of them, whatever this process's affinity.
fn online_cpu_count() -> usize {
    std::fs::read_to_string("/proc/stat")
        .map(|stat| {
            stat.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count()
        })
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// This machine's name: with the PCI bus id, what names a GPU among several hosts' (shards).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|m| m.trim().to_string())
}

/// How much host memory a case may still take: MemAvailable, plus what the machine can still
/// grow to where its memory grows with use. A virtual machine whose memory grows as it is used
/// reports a MemTotal below the memory limit of its cgroup (`memory.max` in v2,
/// `memory.limit_in_bytes` in v1), so MemAvailable read at the start understates what an
/// allocation will get: the room between MemTotal and that limit counts as available. (A limit
/// above MemTotal is the only sign of such a machine kbench reads; on a machine whose memory does
/// not grow, such a limit overstates the room by the difference.) None where /proc/meminfo
/// cannot be read.
pub fn host_memory_headroom_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = info.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    };
    let available = field("MemAvailable:")?;
    let total = field("MemTotal:").unwrap_or(0);
    Some(headroom(available, total, cgroup_limit_bytes()))
}

/// MemAvailable, plus the room between MemTotal and a larger memory limit (see above).
fn headroom(available: u64, total: u64, limit: Option<u64>) -> u64 {
    match limit {
        Some(limit) if limit > total => available.saturating_add(limit - total),
        _ => available,
    }
}

/// This process's cgroup memory limit, where one is set (None: unlimited or unknown).
fn cgroup_limit_bytes() -> Option<u64> {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .and_then(|text| text.trim().parse::<u64>().ok())
    // cgroup v1 writes "no limit" as a number near 2^63.
    .filter(|&limit| limit < 1 << 60)
}

/// `program` in a folder of PATH, as a shell would find it: the first executable file of that
/// name.
pub fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file() && is_executable(candidate))
    })
}

/// Whether the file at `path` has an execute bit set.
pub fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use crate::record::LoadSample;

    #[test]
    fn proc_counters_parse_and_give_the_other_processes_busy_cpus() {
        let stat = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n";
        assert_eq!(super::cpu_ticks(stat), Some((160, 980)));
        // A command name with spaces and a parenthesis: fields count after the last ')'.
        let line = "42 (kbench (w) x) S 7 42 42 0 -1 4194560 1 0 0 0 11 22 33 44 20 0 1 0";
        assert_eq!(super::process_ticks(line), Some((7, 110)));
        let info = "cpu MHz\t\t: 2000.0\nother: 1\ncpu MHz\t\t: 3000.0\n";
        assert_eq!(super::mean_cpu_mhz(info), Some(2500.0));
        let sample = |busy, total, own| LoadSample {
            loadavg_1m: 0.0,
            busy_ticks: busy,
            total_ticks: total,
            own_ticks: own,
            cpu_mhz: None,
        };
        // 4 CPUs, 1000 ticks of wall time each: 4000 ticks in all; 2500 busy, 500 of them ours:
        // others kept 2000 / 1000 = 2 CPUs busy.
        let other = super::other_busy_cpus(&sample(0, 0, 0), &sample(2500, 4000, 500), 4);
        assert_eq!(other, Some(2.0));
        // Counters that went backwards (another boot) give nothing.
        assert_eq!(
            super::other_busy_cpus(&sample(10, 10, 0), &sample(5, 5, 0), 4),
            None
        );
    }

    #[test]
    fn this_host_s_load_is_read() {
        let env = super::detect();
        let load = env.load.expect("Linux has /proc");
        assert!(load.cpu_count >= 1);
        assert!(load.start.total_ticks > 0);
        let mut env = super::detect();
        // Some busy time of our own, which must not count as the others'.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 50 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        super::finish_load(&mut env);
        let load = env.load.unwrap();
        assert!(load.end.is_some());
        let other = load.other_busy_cpus.expect("counters moved");
        assert!(other >= 0.0 && other <= load.cpu_count as f64, "{other}");
    }

    #[test]
    fn a_memory_limit_above_memtotal_counts_as_room_to_grow() {
        let gib = 1u64 << 30;
        assert_eq!(super::headroom(3 * gib, 4 * gib, None), 3 * gib);
        assert_eq!(super::headroom(3 * gib, 4 * gib, Some(2 * gib)), 3 * gib);
        assert_eq!(
            super::headroom(3 * gib, 4 * gib, Some(256 * gib)),
            255 * gib
        );
    }
}
