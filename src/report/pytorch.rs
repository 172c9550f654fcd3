//! The PyTorch OSS benchmark database's record (the `oss_ci_benchmark_v3` table that PyTorch's
//! HUD dashboards and `pytorch/test-infra`'s `upload-benchmark-results` action read; see
//! https://github.com/pytorch/pytorch/wiki/PyTorch-OSS-benchmark-infra): a list of records,
//! one metric each, `{ benchmark: { name, mode, dtype, extra_info }, model: { name, type,
//! backend, origins, extra_info }, metric: { name, benchmark_values, target_value, extra_info },
//! runners: [{ name, type, cpu_info, cpu_count, gpu_info, gpu_count, avail_gpu_mem_in_gb,
//! extra_info }] }`.
//!
//! How kbench's words map onto the table's: the benchmark is the study (`mode` the case's timed
//! scope, `dtype` its dtype axis), the model is the case (variant and parameters, the name the
//! other dashboard formats give it), and the runner is the machine it ran on (its GPU, for a
//! CUDA case, the one the case records). Each passed case gives a `median_ns` record (the median
//! in nanoseconds, as BMF and github-action-benchmark give it, with its 95% CI in `extra_info`)
//! and, where the algorithm counts its bytes, a `gbytes_per_s` record. The table types every
//! `extra_info` as a map of strings, so every value there is a string. Failed and skipped cases
//! have no time to track and are left out.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::format::{case_name, timing, Format, Report, Timing};
use crate::record::{CaseResult, DeviceFingerprint, Environment, ResultsDoc};
use crate::vocab::{describe_params, Backend};

pub const FORMAT: Format = Format {
    name: "pytorch-oss-benchmark",
    help: "the PyTorch OSS benchmark database's records: each passed case's median (ns) and GB/s",
    render,
};

/// Where the records say they come from (`model.origins`).
const ORIGIN: &str = "kbench";

fn render(report: &Report) -> anyhow::Result<String> {
    let doc = report.doc;
    let mut records = Vec::new();
    for case in &doc.cases {
        let Some(t) = timing(case) else { continue };
        let base = CaseRecord {
            benchmark: benchmark(doc, case),
            model: model(doc, case),
            runners: vec![runner(&doc.environment, case)],
        };
        records.push(base.with_metric(median_metric(&t)));
        if let Some(gbytes_per_s) = case.gbytes_per_s {
            records.push(base.with_metric(json!({
                "name": "gbytes_per_s",
                "benchmark_values": [gbytes_per_s],
                "target_value": 0.0,
                "extra_info": strings([("bytes_moved", case.bytes_moved.to_string())]),
            })));
        }
    }
    Ok(serde_json::to_string_pretty(&Value::Array(records))? + "\n")
}

/// The parts of a case's records that every metric of it shares.
struct CaseRecord {
    benchmark: Value,
    model: Value,
    runners: Vec<Value>,
}

impl CaseRecord {
    fn with_metric(&self, metric: Value) -> Value {
        json!({
            "benchmark": self.benchmark,
            "model": self.model,
            "metric": metric,
            "runners": self.runners,
        })
    }
}

/// The study, as the table's benchmark: `mode` is what was timed (kernel, transfers, program;
/// CPU cases: `cpu`), `dtype` the case's dtype axis (empty where the algorithm has none).
fn benchmark(doc: &ResultsDoc, case: &CaseResult) -> Value {
    let mode = match (case.backend, case.scope) {
        (Backend::Cuda, Some(scope)) => scope.name().to_string(),
        _ => case.backend.to_string(),
    };
    let dtype = case.params.get("dtype").map(|d| d.to_string());
    json!({
        "name": doc.study.name,
        "mode": mode,
        "dtype": dtype.unwrap_or_default(),
        "extra_info": strings([
            ("title", doc.study.title.clone()),
            ("algorithm", doc.study.algorithm.clone()),
            ("seed", doc.study.seed.to_string()),
            ("kbench_version", doc.environment.kbench_version.clone()),
            ("git_revision", doc.environment.git_revision.clone()),
            ("started_at", doc.started_at.clone()),
        ]),
    })
}

/// The case, as the table's model: named as BMF and github-action-benchmark name it, typed by
/// what runs it (a CUDA kernel or a CPU implementation), its parameters one by one.
fn model(doc: &ResultsDoc, case: &CaseResult) -> Value {
    let kind = match case.backend {
        Backend::Cuda => "cuda kernel",
        Backend::Cpu => "cpu implementation",
    };
    let mut extra = BTreeMap::from([
        ("variant".to_string(), case.variant.clone()),
        ("implementation".to_string(), case.implementation.clone()),
        ("params".to_string(), describe_params(&case.params)),
    ]);
    for (axis, value) in &case.params {
        extra.insert(format!("param.{axis}"), value.to_string());
    }
    json!({
        "name": case_name(doc, case),
        "type": kind,
        "backend": case.backend.to_string(),
        "origins": [ORIGIN],
        "extra_info": extra,
    })
}

/// The median in nanoseconds, and what backs it (the 95% CI of the median where there are
/// enough samples for one, and the sample count).
fn median_metric(t: &Timing) -> Value {
    let mut extra = BTreeMap::from([("samples".to_string(), t.samples.to_string())]);
    if let Some((lower, upper)) = t.ci95_ns {
        extra.insert("ci95_lower_ns".into(), lower.to_string());
        extra.insert("ci95_upper_ns".into(), upper.to_string());
    }
    json!({
        "name": "median_ns",
        "benchmark_values": [t.median_ns],
        // kbench sets no target: its verdicts come from `kbench compare` against baselines.
        "target_value": 0.0,
        "extra_info": extra,
    })
}

/// The machine a case ran on: the host and its CPU, and for a CUDA case its GPU (the one the
/// case records, else the run's first).
fn runner(env: &Environment, case: &CaseResult) -> Value {
    let mut runner = json!({
        "name": env.host,
        "type": env.cpu_model,
        "cpu_info": env.cpu_model,
        "cpu_count": env.cpu_threads,
        "gpu_info": "",
        "gpu_count": 0,
        "avail_gpu_mem_in_gb": 0,
        "extra_info": strings([("os", env.os.clone()), ("arch", env.arch.clone())]),
    });
    let gpu = match case.backend {
        Backend::Cuda => case_gpu(env, case),
        Backend::Cpu => None,
    };
    if let Some(gpu) = gpu {
        const GIB: u64 = 1 << 30;
        runner["type"] = gpu.name.clone().into();
        runner["gpu_info"] = gpu.name.clone().into();
        runner["gpu_count"] = 1.into();
        runner["avail_gpu_mem_in_gb"] = (gpu.total_memory_bytes / GIB).into();
        let extra = &mut runner["extra_info"];
        extra["pci_bus_id"] = gpu.pci_bus_id.clone().into();
        extra["compute_capability"] = gpu.compute_capability.clone().into();
        extra["driver_version"] = gpu.driver_version.clone().into();
        if let Some(mock) = &gpu.mock {
            extra["mock"] = mock.clone().into();
        }
    }
    runner
}

/// The fingerprint of the GPU a CUDA case ran on: by host and bus id among the run's GPUs,
/// else (files from before cases recorded their GPU) the run's first GPU.
fn case_gpu<'a>(env: &'a Environment, case: &CaseResult) -> Option<&'a DeviceFingerprint> {
    let recorded = case.device.as_ref().and_then(|d| {
        let host = if d.host.is_empty() {
            &env.host
        } else {
            &d.host
        };
        (env.devices.iter()).find(|g| g.pci_bus_id == d.pci_bus_id && gpu_host(env, g) == host)
    });
    recorded.or(env.device.as_ref())
}

/// A fingerprint's host (empty in files from one host: the run's).
fn gpu_host<'a>(env: &'a Environment, gpu: &'a DeviceFingerprint) -> &'a str {
    if gpu.host.is_empty() {
        &env.host
    } else {
        &gpu.host
    }
}

/// A map of strings, as the table types every `extra_info`.
fn strings<const N: usize>(pairs: [(&str, String); N]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
