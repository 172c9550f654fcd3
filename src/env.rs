//! The environment fingerprint stored with every result: host, CPU, kbench build, and the GPU
//! once the CUDA backend has opened one.

use crate::schema::Environment;

/// This machine and this kbench build; the device is filled in once a GPU opens.
pub fn detect() -> Environment {
    Environment {
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
        cpu_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kbench_version: env!("CARGO_PKG_VERSION").into(),
        git_revision: env!("KBENCH_GIT_REVISION").into(),
        command_line: std::env::args().collect(),
        device: None,
        gpu_unavailable: None,
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|m| m.trim().to_string())
}
