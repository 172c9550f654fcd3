//! Kernels that misbehave on the GPU cost only their own case: one that faults fails with the
//! CUDA error, one that never returns is killed past its time limit, and the CUDA cases after
//! either run in a new worker with a fresh context. Needs a CUDA GPU: ignored by a plain
//! `cargo test`, run on the GPU machine with `--include-ignored`.

use crate::common;

use kbench::device::KernelSource;
use kbench::record::CaseStatus;
use kbench::results::ResultsFile;

/// Runs reduce_fast (and a CPU variant) at n = `bad_n` and n = 1000 with reduce.cu's kernel
/// changed to run `misbehaviour` when n is `bad_n`.
fn run_with_faulty_kernel(
    bad_n: u64,
    misbehaviour: &str,
    timeout_s: f64,
) -> (tempfile::TempDir, ResultsFile) {
    let source = kbench::algos::find("reduce")
        .unwrap()
        .spec()
        .kernel_file
        .source;
    let anchor = "    typedef typename Traits<T>::Vec Vec;";
    assert!(source.contains(anchor));
    let faulty = source.replacen(
        anchor,
        &format!("{anchor}\n    if (n == {bad_n}ull) {{ {misbehaviour} }}"),
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reduce.cu"), faulty).unwrap();
    let text = format!(
        "[study]\nname = \"gpu-fault\"\nalgorithm = \"reduce\"\nseed = 15\n[grid]\nn = [{bad_n}, 1000]\n\
         [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [[variant]]\nname = \"cpu\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 1\nmin_samples = 2\nmax_samples = 2\ntimeout_s = {timeout_s}\n"
    );
    let (out, results) = common::run_study(
        &text,
        KernelSource {
            dir: Some(dir.path().to_path_buf()),
        },
    );
    // The results file on disk has all four cases.
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results.path).unwrap()).unwrap();
    assert_eq!(on_disk["cases"].as_array().unwrap().len(), 4);
    (out, results)
}

fn statuses(results: &ResultsFile) -> Vec<(String, CaseStatus)> {
    results
        .doc
        .cases
        .iter()
        .map(|c| (c.variant.clone(), c.status))
        .collect()
}

fn want(first: CaseStatus) -> Vec<(String, CaseStatus)> {
    [
        ("fast", first),
        ("cpu", CaseStatus::Passed),
        ("fast", CaseStatus::Passed),
        ("cpu", CaseStatus::Passed),
    ]
    .map(|(v, s)| (v.to_string(), s))
    .to_vec()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_faulting_kernel_fails_its_case_and_the_study_goes_on() {
    let (_out, results) = run_with_faulty_kernel(777, "__trap();", 60.0);
    assert_eq!(statuses(&results), want(CaseStatus::Error));
    let reason = results.doc.cases[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("CUDA_ERROR"), "{reason}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_that_never_returns_is_killed_and_the_study_goes_on() {
    let started = std::time::Instant::now();
    // __nanosleep is volatile: the loop cannot be optimized away.
    let (_out, results) = run_with_faulty_kernel(555, "for (;;) __nanosleep(1000000);", 5.0);
    assert_eq!(statuses(&results), want(CaseStatus::TimedOut));
    let reason = results.doc.cases[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("killed"), "{reason}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
}
