//! Every embedded kernel compiles with NVRTC for sm_90 and sm_80. NVRTC needs no GPU: CI installs
//! it from pip and sets KBENCH_REQUIRE_NVRTC=1, so a kernel that does not compile fails CI.

mod common;

use common::nvrtc_or_skip;
use kbench::algos::AxisKind;
use kbench::backend::cuda::{self, KernelSource};

#[test]
fn every_kernel_compiles_for_hopper_and_ampere() {
    if !nvrtc_or_skip("every_kernel_compiles_for_hopper_and_ampere") {
        return;
    }
    let archs = ["sm_90".to_string(), "sm_80".to_string()];
    let compiled =
        cuda::compile_all(&KernelSource::default(), &archs).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(compiled.len(), cuda::EMBEDDED_KERNELS.len() * archs.len());
    for algorithm in kbench::algos::all() {
        let (_, _, ptx) = compiled
            .iter()
            .find(|(file, arch, _)| file == algorithm.kernel_file() && arch == "sm_90")
            .unwrap();
        // Each algorithm's kernels exist for the dtypes its `dtype` axis takes.
        let dtypes = match algorithm.axis("dtype").map(|a| a.kind) {
            Some(AxisKind::Dtype(allowed)) => allowed.to_vec(),
            _ => panic!("{} has no dtype axis", algorithm.name()),
        };
        for kernel in algorithm.cuda_kernels() {
            for dtype in &dtypes {
                let entry = format!(".entry {kernel}_{}(", dtype.name());
                assert!(
                    ptx.contains(&entry),
                    "{} has no {entry}",
                    algorithm.kernel_file()
                );
            }
        }
    }
}

#[test]
fn a_compile_error_carries_the_file_and_nvrtc_log() {
    if !nvrtc_or_skip("a_compile_error_carries_the_file_and_nvrtc_log") {
        return;
    }
    let err = cuda::compile(
        "kernels/broken.cu",
        "extern \"C\" __global__ void k() { int x = nope; }\n",
        "sm_90",
    )
    .unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("kernels/broken.cu(1)"), "{text}");
    assert!(text.contains("identifier \"nope\" is undefined"), "{text}");
}
