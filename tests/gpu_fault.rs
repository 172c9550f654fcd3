//! A kernel that faults on the GPU: its case fails with the CUDA error, the CUDA cases after it
//! are skipped with the reason (a faulted context cannot be recovered within the process), and
//! the CPU cases go on. Its own test binary, since the fault poisons the process's GPU context.
//! Skips without a GPU unless KBENCH_REQUIRE_GPU=1.

mod common;

use kbench::backend::cuda::{self, KernelSource};
use kbench::execute::CaseStatus;

#[test]
fn a_faulting_kernel_fails_its_case_and_the_study_goes_on() {
    if !common::gpu_or_skip("a_faulting_kernel_fails_its_case_and_the_study_goes_on") {
        return;
    }
    // The real kernels, except that reduce_fast traps when n is 777.
    let source = cuda::EMBEDDED_KERNELS
        .iter()
        .find(|(f, _)| *f == "reduce.cu")
        .unwrap()
        .1;
    let anchor = "    typedef typename Traits<T>::Vec Vec;";
    assert!(source.contains(anchor));
    let faulty = source.replacen(
        anchor,
        &format!("{anchor}\n    if (n == 777ull) __trap();"),
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("reduce.cu"), faulty).unwrap();
    let text = "[study]\nname = \"gpu-fault\"\nalgorithm = \"reduce\"\nseed = 15\n[grid]\nn = [777, 1000]\n\
         [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [[variant]]\nname = \"cpu\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 1\nmin_samples = 2\nmax_samples = 2\n";

    let (_out, results) = common::run_study(
        text,
        KernelSource {
            dir: Some(dir.path().to_path_buf()),
        },
    );

    let got: Vec<(String, CaseStatus)> = results
        .doc
        .cases
        .iter()
        .map(|c| (c.variant.clone(), c.status))
        .collect();
    let want = [
        ("fast", CaseStatus::Error),
        ("cpu", CaseStatus::Passed),
        ("fast", CaseStatus::Skipped),
        ("cpu", CaseStatus::Passed),
    ];
    assert_eq!(got, want.map(|(v, s)| (v.to_string(), s)));
    let reason = |i: usize| results.doc.cases[i].reason.clone().unwrap_or_default();
    assert!(reason(0).contains("CUDA_ERROR"), "{}", reason(0));
    assert!(
        reason(2).contains("unusable after the kernel fault in case #0"),
        "{}",
        reason(2)
    );
    // The results file on disk has all four.
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results.path).unwrap()).unwrap();
    assert_eq!(on_disk["cases"].as_array().unwrap().len(), 4);
}
