//! The environment fingerprint stored with every result: host, CPU, kbench build, and the GPU
//! once the CUDA backend has opened one.

use serde::{Deserialize, Serialize};

use crate::backend::cuda::DeviceFingerprint;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    pub host: String,
    pub os: String,
    pub arch: String,
    pub cpu_model: String,
    pub cpu_threads: usize,
    pub kbench_version: String,
    pub git_revision: String,
    pub command_line: Vec<String>,
    /// The GPU, when a CUDA case opened one.
    pub device: Option<DeviceFingerprint>,
    /// Why CUDA cases were skipped, when they were.
    pub gpu_unavailable: Option<String>,
}

impl Environment {
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
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|m| m.trim().to_string())
}
