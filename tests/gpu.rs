//! GPU tests: every kernel of every algorithm on the GPU test grid its algorithm declares (the
//! generic harness's GPU half), each scope, the timer's modes, a kernel that does not compile and
//! a size too big for the device. They need a CUDA GPU: ignored by a plain `cargo test`, run on
//! the GPU machine with `--include-ignored`, where a missing GPU fails them.

use crate::common;

use common::{assert_all_passed, gpu_test_grid_manifest, run_study, QUICK};
use kbench::device::KernelSource;
use kbench::record::step_latency::StepLatency;
use kbench::record::{CaseResult, CaseStatus, TimerMethod};
use kbench::vocab::ParamValue;

fn run_manifest(text: &str, kernels: KernelSource) -> Vec<CaseResult> {
    let (_out, results) = run_study(text, kernels);
    let axes = kbench::algos::find(&results.doc.study.algorithm)
        .unwrap()
        .spec()
        .axis_names();
    let style = kbench::report::case_table::TableStyle::Terminal;
    println!(
        "{}",
        kbench::report::case_table::render(&results.doc, &axes, style)
    );
    results.doc.cases
}

fn gpu_timer(case: &CaseResult) -> &kbench::record::GpuTimer {
    let measurement = case.measurement.as_ref().expect("a measured case");
    measurement
        .gpu_timer
        .as_ref()
        .expect("a CUDA case's timer record")
}

/// The algorithms the grid test below runs: every one, or those KBENCH_GPU_TEST_ALGORITHMS names
/// (comma-separated). The whole test takes more than six minutes on an H200, so it can be run in
/// parts where a machine's calls are short; a name kbench does not know fails the test.
fn algorithms_under_test() -> Vec<kbench::algos::AlgorithmRef> {
    match std::env::var("KBENCH_GPU_TEST_ALGORITHMS") {
        Err(_) => kbench::algos::all().to_vec(),
        Ok(names) => names
            .split(',')
            .map(|name| {
                kbench::algos::find(name.trim()).unwrap_or_else(|| {
                    panic!(
                        "KBENCH_GPU_TEST_ALGORITHMS names `{name}`, not one of {:?}",
                        kbench::algos::names()
                    )
                })
            })
            .collect(),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_kernel_of_every_algorithm_passes_on_its_gpu_test_grid() {
    for algorithm in algorithms_under_test() {
        let spec = algorithm.spec();
        // Under compute-sanitizer (KBENCH_SANITIZER=1) the small sizes keep the run short.
        let small_only = std::env::var("KBENCH_SANITIZER").is_ok() && spec.axis("n").is_some();
        let text = gpu_test_grid_manifest(spec, small_only.then_some("n <= 70000"));
        let cases = run_manifest(&text, KernelSource::default());
        assert!(cases.len() >= spec.kernels.len() * 4, "{}", spec.name);
        assert_all_passed(&cases);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfers_and_program_scopes_produce_checked_results() {
    let mut text = String::from(
        "[study]\nname = \"gpu-scopes\"\nalgorithm = \"reduce\"\nseed = 12\n\
         [grid]\nn = [1, 999_999]\ndtype = [\"i32\", \"f64\"]\n",
    );
    for scope in ["kernel", "transfers", "program"] {
        text += &format!("[[variant]]\nname = \"fast_{scope}\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nscope = \"{scope}\"\n");
    }
    text += "[measure]\nwarmup = 1\nmin_samples = 3\nmax_samples = 3\n";
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), 2 * 2 * 3);
    assert_all_passed(&cases);
    // Whole-program time includes allocation and copies, so it cannot be below the kernel's.
    let median = |name: &str| {
        cases
            .iter()
            .find(|c| c.variant == name && c.params["n"] == ParamValue::Int(999_999))
            .unwrap()
            .median_s()
            .unwrap()
    };
    assert!(median("fast_program") > median("fast_kernel"));
    assert!(median("fast_transfers") > median("fast_kernel"));
    for case in &cases {
        let timer = gpu_timer(case);
        let want = match case.variant.as_str() {
            "fast_kernel" => TimerMethod::BlockedEvents,
            _ => TimerMethod::Events,
        };
        assert_eq!(timer.method, want, "{}", case.variant);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfers_split_over_streams_check_out_and_a_kernel_that_cannot_split_says_why() {
    let saxpy = "[study]\nname = \"gpu-streams\"\nalgorithm = \"saxpy\"\nseed = 5\n\
                 [grid]\nn = [0, 1, 257, 1_000_003]\na = -0.5\nblock = 256\n\
                 [[variant]]\nname = \"two\"\nbackend = \"cuda\"\nkernel = \"saxpy_vector\"\n\
                 scope = \"transfers\"\nhost_memory = \"pinned\"\nstreams = 2\n\
                 [[variant]]\nname = \"three\"\nbackend = \"cuda\"\nkernel = \"saxpy_naive\"\n\
                 scope = \"transfers\"\nhost_memory = \"pinned\"\nstreams = 3\n\
                 [measure]\nwarmup = 1\nmin_samples = 3\nmax_samples = 3\n";
    let cases = run_manifest(saxpy, KernelSource::default());
    assert_eq!(cases.len(), 8);
    assert_all_passed(&cases);

    // A reduction's output is not elementwise: its cases fail with the reason, not a wrong sum.
    let reduce = "[study]\nname = \"gpu-streams-reduce\"\nalgorithm = \"reduce\"\nseed = 5\n\
                  [grid]\nn = 1000\ndtype = \"f32\"\n\
                  [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
                  scope = \"transfers\"\nhost_memory = \"pinned\"\nstreams = 2\n\
                  [measure]\nwarmup = 1\nmin_samples = 3\nmax_samples = 3\n";
    let cases = run_manifest(reduce, KernelSource::default());
    assert_eq!(cases.len(), 1);
    assert_ne!(cases[0].status, CaseStatus::Passed);
    let reason = cases[0].reason.as_deref().unwrap_or("");
    assert!(
        reason.contains("different lengths") || reason.contains("cannot be split"),
        "{reason}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_timer_holds_the_stream_batches_short_kernels_and_cross_checks_with_cupti() {
    let text = "[study]\nname = \"gpu-timer\"\nalgorithm = \"reduce\"\nseed = 16\n\
         [grid]\nn = [1000, 16_777_216]\ndtype = \"f32\"\n\
         [[variant]]\nname = \"single\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [[variant]]\nname = \"multi\"\nbackend = \"cuda\"\nkernel = \"reduce_optimized\"\n\
         [measure]\nwarmup = 2\nmin_samples = 10\nmax_samples = 30\n"
        .to_string();
    let batch = text.replace("name = \"gpu-timer\"", "name = \"gpu-timer-batch\"")
        + "mode = \"batch\"\nbatch_min_window_s = 50e-6\n";
    let single = run_manifest(&text, KernelSource::default());
    let batched = run_manifest(&batch, KernelSource::default());
    assert_all_passed(&single);
    assert_all_passed(&batched);
    for case in &single {
        let timer = gpu_timer(case);
        assert_eq!(timer.method, TimerMethod::BlockedEvents);
        assert!(timer.cold_l2);
        assert_eq!(timer.runs_per_sample, 1);
        // CUPTI, where the machine has it, timed traced runs of the same kernels after the
        // (untraced) samples: one span each, at most ten, no more than the samples.
        if let Some(d) = timer.cupti_vs_events {
            let traced = timer.traced_events_s.len();
            assert_eq!(timer.cupti_samples_s.len(), traced, "{timer:?}");
            assert!(traced >= 1 && traced <= 10.min(case.summary.as_ref().unwrap().samples));
            assert!(timer.tracing_slowdown.is_some(), "{timer:?}");
            if case.params["n"] == ParamValue::Int(16_777_216) {
                assert!(d.abs() < 0.05, "{}: CUPTI vs events {d}", case.variant);
            }
        }
    }
    for case in &batched {
        let timer = gpu_timer(case);
        assert_eq!(timer.method, TimerMethod::BatchEvents);
        assert!(!timer.cold_l2);
        // Hot batches are not what the profiler's lone cold kernels measure.
        assert!(timer.profiler_samples_s.is_empty());
        if let Some(why) = &timer.profiler_skipped {
            assert!(why.contains("batch mode"), "{why}");
        }
        if case.params["n"] == ParamValue::Int(1000) {
            assert!(timer.runs_per_sample > 1, "{timer:?}");
        }
    }
    // A 1000-element sum is a few microseconds of launch-free GPU time either way.
    let small = |cases: &[CaseResult]| {
        cases
            .iter()
            .find(|c| c.variant == "single" && c.params["n"] == ParamValue::Int(1000))
            .unwrap()
            .median_s()
            .unwrap()
    };
    assert!(small(&single) < 10e-6, "{}", small(&single));
    assert!(
        small(&batched) < small(&single),
        "hot batches beat cold single runs"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_that_does_not_compile_fails_its_cases_with_the_log_and_the_study_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("reduce.cu"),
        "extern \"C\" __global__ void reduce_fast_f32() { undeclared_thing = 1; }\n",
    )
    .unwrap();
    let text = format!(
        "[study]\nname = \"gpu-broken\"\nalgorithm = \"reduce\"\nseed = 13\n[grid]\nn = [1000]\n\
         [[variant]]\nname = \"cpu\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n{QUICK}"
    );
    let cases = run_manifest(
        &text,
        KernelSource {
            dir: Some(dir.path().to_path_buf()),
        },
    );
    let cpu = cases.iter().find(|c| c.variant == "cpu").unwrap();
    assert_eq!(cpu.status, CaseStatus::Passed);
    let fast = cases.iter().find(|c| c.variant == "fast").unwrap();
    assert_eq!(fast.status, CaseStatus::Error);
    let reason = fast.reason.as_deref().unwrap();
    assert!(
        reason.contains("undeclared_thing") && reason.contains("reduce.cu"),
        "{reason}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_size_too_big_for_the_device_is_skipped_and_the_next_sizes_run() {
    // 2^40 float32 elements: 4 TiB, more than any GPU has.
    let text = format!(
        "[study]\nname = \"gpu-huge\"\nalgorithm = \"reduce\"\nseed = 14\n[grid]\nn = [1_099_511_627_776, 1000]\n\
         [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n{QUICK}"
    );
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases[0].status, CaseStatus::Skipped);
    let reason = cases[0].reason.as_deref().unwrap();
    assert!(
        reason.contains("too big for the device") && reason.contains("GiB"),
        "{reason}"
    );
    assert_eq!(cases[1].status, CaseStatus::Passed, "{:?}", cases[1].reason);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn durbin_persistent_falls_back_to_global_memory_and_other_scopes_check_out() {
    // 227 KiB of shared memory per block: f32 at n = 15000 keeps y and r there, f64 at 15000
    // only y, f32 at 30000 only y, f64 at 30000 neither (y is updated in global memory).
    let text = format!(
        "[study]\nname = \"gpu-durbin-large\"\nalgorithm = \"durbin\"\nseed = 22\n\
         [grid]\nn = [15_000, 30_000]\ndtype = [\"f32\", \"f64\"]\nblock = [256, 1024]\n\
         [[variant]]\nname = \"persistent\"\nbackend = \"cuda\"\nkernel = \"durbin_persistent\"\n\
         [[variant]]\nname = \"persistent_transfers\"\nbackend = \"cuda\"\nkernel = \"durbin_persistent\"\n\
         scope = \"transfers\"\nparams = {{ n = [1000], block = [512] }}\n\
         [[variant]]\nname = \"graph_program\"\nbackend = \"cuda\"\nkernel = \"durbin_graph\"\n\
         scope = \"program\"\nparams = {{ n = [1000], block = [128] }}\n\
         [[variant]]\nname = \"atomic\"\nbackend = \"cuda\"\nkernel = \"durbin_atomic\"\n\
         params = {{ n = [1000], block = [128] }}\n{QUICK}"
    );
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), 2 * 2 * 2 + 2 + 2 + 2);
    assert_all_passed(&cases);
    // 1999 launches per run cannot wait behind a held stream: timed unheld, and said so.
    let atomic = cases.iter().find(|c| c.variant == "atomic").unwrap();
    let timer = gpu_timer(atomic);
    assert_eq!(timer.method, TimerMethod::Events);
    assert!(timer
        .unblocked_reason
        .as_deref()
        .unwrap()
        .contains("1999 launches"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn durbin_schur_reports_its_per_step_latency_from_inside_the_kernel() {
    let text = format!(
        "[study]\nname = \"gpu-durbin-steps\"\nalgorithm = \"durbin\"\nseed = 23\n\
         [grid]\nn = [1, 997, 10_000]\ndtype = \"f64\"\nblock = 256\n\
         [[variant]]\nname = \"schur\"\nbackend = \"cuda\"\nkernel = \"durbin_schur\"\n{QUICK}"
    );
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), 3);
    assert_all_passed(&cases);
    for case in &cases {
        let Some(ParamValue::Int(n)) = case.params.get("n") else {
            panic!("n: {:?}", case.params)
        };
        let steps = StepLatency::from_facts(&case.facts)
            .unwrap_or_else(|| panic!("n = {n}: no step latency in {:?}", case.facts));
        assert_eq!(steps.steps, *n as u64);
        assert_eq!(steps.bins.iter().map(|b| b.2).sum::<u64>(), *n as u64);
        // The steps run inside the timed kernel: together they cannot exceed the median run.
        let median_s = case.summary.as_ref().unwrap().median_s;
        assert!(
            steps.mean_ns * 1e-9 * (*n as f64) <= median_s * 1.05,
            "n = {n}"
        );
        assert!(steps.max_ns * 1e-9 <= median_s, "n = {n}");
        if *n > 100 {
            assert!(steps.mean_ns > 0.0, "n = {n}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuptis_profiler_times_runs_of_one_kernel_as_the_events_do_and_leaves_the_activity_records_on() {
    // Three sizes, so that cases run after profiled ones: their CUPTI activity samples show the
    // tracer came back after the profiler's runs. reduce_fast is one kernel a run.
    let text = "[study]\nname = \"gpu-profiler\"\nalgorithm = \"reduce\"\nseed = 17\n\
         [grid]\nn = [65_537, 1_048_576, 16_777_216]\ndtype = \"f32\"\nblock = 512\n\
         [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [measure]\nwarmup = 2\nmin_samples = 20\nmax_samples = 60\n";
    let (_out, results) = run_study(text, KernelSource::default());
    let device = results.doc.environment.device.as_ref().expect("a device");
    assert_eq!(
        device.cupti_profiler_unavailable, None,
        "the GPU machine has CUPTI's range profiler"
    );
    assert_eq!(device.cupti_unavailable, None, "the GPU machine has CUPTI");
    assert_all_passed(&results.doc.cases);
    for case in &results.doc.cases {
        let timer = gpu_timer(case);
        let events = case.median_s().unwrap();
        assert_eq!(timer.profiler_samples_s.len(), 5, "{timer:?}");
        assert_eq!(timer.profiler_kernels_per_run, Some(1));
        let profiler = kbench::stats::summarize(&timer.profiler_samples_s).median_s;
        // The bound on kbench against Nsight Compute: max(2%, 0.5 µs).
        assert!(
            (profiler - events).abs() <= (0.02 * events).max(0.5e-6),
            "n = {:?}: events {events}, profiler {profiler}",
            case.params["n"]
        );
        assert!(!timer.timers_disagree, "{timer:?}");
        // Ten traced runs after the 20 or more samples, an activity span for each.
        assert_eq!(timer.traced_events_s.len(), 10, "{timer:?}");
        assert_eq!(
            timer.cupti_samples_s.len(),
            10,
            "activity records for every traced run of {:?}: {timer:?}",
            case.params["n"]
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_launches_replay_exact_runs_and_a_launcher_that_cannot_be_replayed_says_why() {
    // reduce's two- and three-kernel runs and its one-kernel run replay from a graph; the
    // single-pass scan passes each launch its own epoch and is launched on the stream.
    let reduce = "[study]\nname = \"graph-reduce\"\nalgorithm = \"reduce\"\nseed = 17\n\
         [grid]\nn = [1, 1000, 1_000_003]\ndtype = [\"i32\", \"f64\"]\nblock = 256\n\
         [[variant]]\nname = \"multi\"\nbackend = \"cuda\"\nkernel = \"reduce_optimized\"\n\
         [[variant]]\nname = \"single\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [measure]\nwarmup = 2\nmin_samples = 10\nmax_samples = 20\nlaunch = \"graph\"\n";
    let cases = run_manifest(reduce, KernelSource::default());
    assert_all_passed(&cases);
    assert_eq!(cases.len(), 12);
    for case in &cases {
        let timer = gpu_timer(case);
        assert!(timer.launched_as_graph, "{}: {timer:?}", case.variant);
        assert_eq!(timer.graph_refused, None);
        assert_eq!(timer.method, TimerMethod::BlockedEvents);
        if let Some(why) = &timer.profiler_skipped {
            assert!(why.contains("CUDA graph"), "{why}");
        }
    }
    let scan = "[study]\nname = \"graph-scan\"\nalgorithm = \"scan\"\nseed = 18\n\
         [grid]\nn = [1, 100_003]\nblock = 256\n\
         [[variant]]\nname = \"lookback\"\nbackend = \"cuda\"\nkernel = \"scan_lookback\"\n\
         params = { block = [512] }\n\
         [[variant]]\nname = \"blelloch\"\nbackend = \"cuda\"\nkernel = \"scan_blelloch\"\n\
         [measure]\nwarmup = 2\nmin_samples = 10\nmax_samples = 20\nlaunch = \"graph\"\n";
    let cases = run_manifest(scan, KernelSource::default());
    assert_all_passed(&cases);
    for case in &cases {
        let timer = gpu_timer(case);
        if case.variant == "lookback" {
            assert!(!timer.launched_as_graph);
            let why = timer.graph_refused.as_deref().unwrap_or_default();
            assert!(why.contains("epoch"), "{why}");
        } else {
            assert!(timer.launched_as_graph, "{timer:?}");
        }
    }
}
