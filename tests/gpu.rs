//! GPU tests: every reduction kernel, dtype and block size at awkward sizes, each scope, and a
//! kernel that does not compile. They skip (pass, saying so) on a machine without a CUDA driver,
//! unless KBENCH_REQUIRE_GPU=1, which the GPU machine's run sets so a skip cannot pass silently.

mod common;

use common::{gpu_or_skip, run_study};
use kbench::backend::cuda::KernelSource;
use kbench::execute::{CaseResult, CaseStatus};

fn run_manifest(text: &str, kernels: KernelSource) -> Vec<CaseResult> {
    let (_out, results) = run_study(text, kernels);
    let axes = ["n", "dtype", "block"];
    let style = kbench::report::table::TableStyle::Terminal;
    println!(
        "{}",
        kbench::report::table::render(&results.doc, &axes, style)
    );
    results.doc.cases
}

const QUICK: &str = "[measure]\nwarmup = 1\nmin_samples = 2\nmax_samples = 2\n";

#[test]
fn every_kernel_dtype_and_block_size_sums_correctly() {
    if !gpu_or_skip("every_kernel_dtype_and_block_size_sums_correctly") {
        return;
    }
    // Under compute-sanitizer (KBENCH_SANITIZER=1) a smaller grid keeps the run short.
    let (sizes, blocks) = if std::env::var("KBENCH_SANITIZER").is_ok() {
        ("[0, 1, 33, 1000, 65_537]", "[32, 64, 256, 1024]")
    } else {
        (
            "[0, 1, 31, 33, 1000, 65_537, 1_000_003, 4_194_319]",
            "[32, 64, 128, 256, 512, 1024]",
        )
    };
    let text = every_kernel_manifest(
        "reduce",
        11,
        &format!("n = {sizes}\ndtype = [\"i32\", \"f32\", \"f64\"]\nblock = {blocks}"),
    );
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), list_len(sizes) * 3 * list_len(blocks) * 4);
    assert_all_passed(&cases);
}

#[test]
fn transfers_and_program_scopes_produce_checked_results() {
    if !gpu_or_skip("transfers_and_program_scopes_produce_checked_results") {
        return;
    }
    let mut text = String::from(
        "[study]\nname = \"gpu-scopes\"\nalgorithm = \"reduce\"\nseed = 12\n\
         [grid]\nn = [1, 999_999]\ndtype = [\"i32\", \"f64\"]\n",
    );
    for scope in ["kernel", "transfers", "program"] {
        text += &format!("[[variant]]\nname = \"fast_{scope}\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nscope = \"{scope}\"\n");
    }
    text += QUICK;
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), 2 * 2 * 3);
    assert_all_passed(&cases);
    // Whole-program time includes allocation and copies, so it cannot be below the kernel's.
    let median = |name: &str| {
        cases
            .iter()
            .find(|c| c.variant == name && c.params["n"] == kbench::plan::ParamValue::Int(999_999))
            .unwrap()
            .summary
            .as_ref()
            .unwrap()
            .median_s
    };
    assert!(median("fast_program") > median("fast_kernel"));
    assert!(median("fast_transfers") > median("fast_kernel"));
}

#[test]
fn a_kernel_that_does_not_compile_fails_its_cases_with_the_log_and_the_study_goes_on() {
    if !gpu_or_skip(
        "a_kernel_that_does_not_compile_fails_its_cases_with_the_log_and_the_study_goes_on",
    ) {
        return;
    }
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
fn a_size_too_big_for_the_device_is_skipped_and_the_next_sizes_run() {
    if !gpu_or_skip("a_size_too_big_for_the_device_is_skipped_and_the_next_sizes_run") {
        return;
    }
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

/// A quick study of every CUDA kernel of `algorithm` over `grid` (the body of a [grid] table).
fn every_kernel_manifest(algorithm: &str, seed: u64, grid: &str) -> String {
    let mut text = format!(
        "[study]\nname = \"gpu-{algorithm}\"\nalgorithm = \"{algorithm}\"\nseed = {seed}\n[grid]\n{grid}\n"
    );
    for kernel in kbench::algos::find(algorithm).unwrap().cuda_kernels() {
        text += &format!(
            "[[variant]]\nname = \"{kernel}\"\nbackend = \"cuda\"\nkernel = \"{kernel}\"\n"
        );
    }
    text + QUICK
}

/// The number of items in a TOML list written as text.
fn list_len(list: &str) -> usize {
    list.matches(',').count() + 1
}

fn assert_all_passed(cases: &[CaseResult]) {
    let bad: Vec<String> = cases
        .iter()
        .filter(|c| c.status != CaseStatus::Passed)
        .map(|c| {
            format!(
                "{} {:?}: {:?} {:?}",
                c.variant, c.params, c.status, c.reason
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} cases did not pass:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn every_durbin_kernel_form_dtype_and_block_size_solves_correctly() {
    if !gpu_or_skip("every_durbin_kernel_form_dtype_and_block_size_solves_correctly") {
        return;
    }
    // Under compute-sanitizer (KBENCH_SANITIZER=1) a smaller grid keeps the run short: every
    // step is a launch or two, and the sanitizer slows each one down.
    let (sizes, blocks) = if std::env::var("KBENCH_SANITIZER").is_ok() {
        ("[1, 2, 33, 999]", "[32, 256]")
    } else {
        ("[1, 2, 33, 999, 1000, 4097]", "[32, 256, 1024]")
    };
    let text = every_kernel_manifest(
        "durbin",
        21,
        &format!(
            "n = {sizes}\ndtype = [\"f32\", \"f64\"]\nblock = {blocks}\nform = [\"pb42\", \"pb32\"]"
        ),
    );
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), list_len(sizes) * 2 * list_len(blocks) * 2 * 4);
    assert_all_passed(&cases);
}

#[test]
fn durbin_persistent_falls_back_to_global_memory_and_other_scopes_check_out() {
    if !gpu_or_skip("durbin_persistent_falls_back_to_global_memory_and_other_scopes_check_out") {
        return;
    }
    // 227 KiB of shared memory per block: f32 at n = 15000 keeps y and r there, f64 at 15000
    // only y, f32 at 30000 only y, f64 at 30000 neither (y is updated in global memory).
    let text = format!(
        "[study]\nname = \"gpu-durbin-large\"\nalgorithm = \"durbin\"\nseed = 22\n\
         [grid]\nn = [15_000, 30_000]\ndtype = [\"f32\", \"f64\"]\nblock = [256, 1024]\n\
         [[variant]]\nname = \"persistent\"\nbackend = \"cuda\"\nkernel = \"durbin_persistent\"\n\
         [[variant]]\nname = \"persistent_transfers\"\nbackend = \"cuda\"\nkernel = \"durbin_persistent\"\n\
         scope = \"transfers\"\nparams = {{ n = [1000], block = [512] }}\n\
         [[variant]]\nname = \"graph_program\"\nbackend = \"cuda\"\nkernel = \"durbin_graph\"\n\
         scope = \"program\"\nparams = {{ n = [1000], block = [128] }}\n{QUICK}"
    );
    let cases = run_manifest(&text, KernelSource::default());
    assert_eq!(cases.len(), 2 * 2 * 2 + 2 + 2);
    assert_all_passed(&cases);
}
