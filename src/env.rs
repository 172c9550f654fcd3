//! The environment fingerprint stored with every result: host, CPU, kbench build, and the GPU
//! once the CUDA backend has opened one.

use crate::record::Environment;

/// This machine and this kbench build; the device is filled in once a GPU opens.
pub fn detect() -> Environment {
    Environment {
        host: hostname(),
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
    }
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

#[cfg(test)]
mod tests {
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
